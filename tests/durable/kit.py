"""A three-stage workflow of shell agents whose every run leaves a mark, for the durable-run tests.

Each agent appends a line to `<dir>/<agent>.count` every time its command runs, and answers
with that count, so a value says which run gave it. Files in `<dir>` steer the run:
`fail` makes stage `build` raise after its first (id'd) turn; `hang` makes the builder's
second turn write `ready` and wait forever (for kill -9 and Ctrl-C); `prompt` replaces the
id'd turn's prompt.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

import agentswf
from agentswf import load_workflow
from agentswf.engine.record.attempts import read_attempts, read_stages

AWF = [sys.executable, "-m", "agentswf"]
READY_SECONDS = 30.0  # for a loaded machine to start `awf run` and reach the hanging turn

FLOWS = r'''
from pathlib import Path

import msgspec

from agentswf import workflow


class Args(msgspec.Struct):
    dir: str


class Plan(msgspec.Struct):
    title: str


def counting(d: Path, name: str, answer: str, hold: str = "") -> str:
    """A shell agent that counts its runs in d/name.count and answers `answer` (which may use $n)."""
    count = d / f"{name}.count"
    return f'shell:echo run >> "{count}"; n=$(($(wc -l < "{count}"))); {hold}"$WFA" result "$WFA_CALL_ID" {answer}'


@workflow(name="three", description="Three stages of counting agents; stage build fails while DIR/fail exists.")
async def three(wf, args: Args) -> dict:
    d = Path(args.dir)
    greeter = await wf.agents.open("greeter", runtime=counting(d, "greeter", '"hello-$n"'))
    planner = await wf.agents.open("planner", runtime=counting(d, "planner", '--title "plan-$n"'))
    hang = f'if grep -q "Build more" && [ -e "{d}/hang" ]; then touch "{d}/ready"; exec sleep 1000; fi; '
    builder = await wf.agents.open("builder", runtime=counting(d, "builder", '"built-$n"', hold=hang))
    checker = await wf.agents.open("checker", runtime=counting(d, "checker", '"checked-$n"'))
    hello = (await greeter.run("Say hello.", id="hello")).value  # outside every stage

    async def plan() -> Plan:
        return (await planner.run("Plan.", schema=Plan)).value

    async def build() -> str:
        prompt = (d / "prompt").read_text() if (d / "prompt").exists() else "Build."
        first = await builder.run(prompt, id="build-1")
        if (d / "fail").exists():
            raise RuntimeError("the build broke")
        second = await builder.run("Build more.")
        return f"{first.value}+{second.value}"

    async def check() -> str:
        return (await checker.run("Check.")).value

    planned = await wf.stage("plan", plan, result=Plan)
    built = await wf.stage("build", build, result=str)
    checked = await wf.stage("check", check)
    return {"hello": hello, "plan": planned.title, "build": built, "check": checked}
'''


def write_flows(tmp_path: Path) -> Path:
    path = tmp_path / "flows.py"
    path.write_text(FLOWS)
    (tmp_path / "marks").mkdir(exist_ok=True)
    return path


def marks(tmp_path: Path) -> Path:
    return tmp_path / "marks"


def counts(tmp_path: Path) -> dict[str, int]:
    """How many times each agent's command ran."""
    found = {}
    for name in ("greeter", "planner", "builder", "checker"):
        path = marks(tmp_path) / f"{name}.count"
        found[name] = len(path.read_text().splitlines()) if path.exists() else 0
    return found


async def run_three(tmp_path: Path, **options: Any) -> agentswf.RunResult:
    flows = load_workflow(write_flows(tmp_path) if not (tmp_path / "flows.py").exists() else tmp_path / "flows.py")
    if "continue_from" not in options:
        options.setdefault("args", {"dir": str(marks(tmp_path))})
    return await agentswf.run(flows, run_root=tmp_path / "runs", cwd=tmp_path, **options)


def awf(tmp_path: Path, *words: str, timeout: float = 90, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **(env or {})}
    return subprocess.run(
        [*AWF, *words], cwd=tmp_path, capture_output=True, text=True, timeout=timeout, check=False, env=environment
    )


def start_hanging(tmp_path: Path, backend: str) -> subprocess.Popen[str]:
    """`awf run` of the three stages, held in the builder's second turn (stage build)."""
    write_flows(tmp_path)
    (marks(tmp_path) / "hang").touch()
    run = subprocess.Popen(
        [*AWF, "run", "flows.py", "--run-root", "runs", "--backend", backend, "--", "--dir", str(marks(tmp_path))],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + READY_SECONDS
    while not (marks(tmp_path) / "ready").exists():
        if run.poll() is not None or time.monotonic() > deadline:
            run.kill()
            _, err = run.communicate()
            raise AssertionError(f"the builder never reached its hanging turn:\n{err}")
        time.sleep(0.02)
    (marks(tmp_path) / "hang").unlink()
    return run


def the_run(tmp_path: Path) -> Path:
    [run_dir] = [path.parent for path in (tmp_path / "runs" / "three").glob("*/run.json")]
    return run_dir


def attempts(run_dir: Path) -> list[dict[str, Any]]:
    return [msgspec.to_builtins(record) for record in read_attempts(run_dir)]


def stages(run_dir: Path) -> dict[str, Any]:
    return {name: msgspec.to_builtins(record) for name, record in read_stages(run_dir).items()}
