"""What agentswf adds to a turn of a real agent CLI, against the CLI alone, in the same run.

    AGENTSWF_CLI_DIR=.ci/node/node_modules/.bin python benchmarks/turn.py [N]   (default N=5)

The same scripted exchange each way, against the same scripted model on loopback: the
model has the CLI run one shell command, then finish.

- baseline: the CLI alone, started with the very command line and environment its harness
  uses, running `true` as its command (and, for `added_vs_a_python_command`, running
  `python -S -I -c pass`, a command of the same weight as `wfa`);
- ours: a turn through `agent.run`, where the command is the taught `wfa result` (so what
  agentswf adds includes the agent's own `wfa` round trip), timed around `agent.run`;
- kept: the CLI alone as in the baseline, but started through `run_in_group`, under a
  keeper (`keeper_added` is its median less the baseline's: what the keeper costs a turn).

Interleaved, N times per CLI. Prints the medians, their ratio, and the milliseconds added
per turn (goal: at most 20 ms); and `engine`, agent.run's time less the time its CLI
process ran, which is what the engine itself adds around the process (the rest of
`added` is spent inside the CLI: the `wfa` round trip and a longer prompt). `engine_cpu`
is the benchmark process's CPU time over agent.run (the engine's, the `wfa` answer's and
the in-process scripted model's, all threads): on shared CPUs it moves far less with the
load than `engine`, a wall time of a few milliseconds.
"""

from __future__ import annotations

import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import msgspec

import agentswf
from agentswf import Runtime, workflow
from agentswf.harnesses import cli
from agentswf.harnesses.base import Attempt
from agentswf.harnesses.process import run_in_group
from agentswf.harnesses.runtime import harness_for
from agentswf.testing.models import Conversation, ScriptedModel, Shell, Text, claude_env, codex_env, find_cli, pi_env

CLIS = ("claude", "codex", "pi")
TAUGHT = re.compile(r"(/\S+/wfa) result (\w+)")


class Verdict(msgspec.Struct):
    verdict: str


cli_seconds: list[float] = []
_run_in_group = cli.run_in_group


async def _timed_run_in_group(*args: object, **kwargs: object) -> object:
    start = time.perf_counter()
    try:
        return await _run_in_group(*args, **kwargs)
    finally:
        cli_seconds.append(time.perf_counter() - start)


cli.run_in_group = _timed_run_in_group  # type: ignore[assignment]  # to time the CLI process alone


PYTHON_COMMAND = f"{sys.executable} -S -I -c pass"


def script(conv: Conversation) -> Shell | Text:
    if conv.tool_results:
        return Text("Finished.")
    found = TAUGHT.search(conv.prompt)
    if found:
        return Shell(f"{found.group(1)} result {found.group(2)} --verdict ok")
    return Shell(PYTHON_COMMAND if "PYTHON" in conv.prompt else "true")


def runtime(name: str, model: ScriptedModel, home: Path) -> Runtime:
    command = (find_cli(name) or name,)
    if name == "claude":
        return Runtime(harness="claude", command=command, env=claude_env(model, home))
    if name == "codex":
        return Runtime(harness="codex", command=command, env=codex_env(model, home))
    return Runtime(harness="pi", command=command, model="fake/fake-model", env=pi_env(model, home))


async def alone(name: str, run: Runtime, cwd: Path, prompt: str, *, kept: bool = False) -> float:
    """One turn of the CLI by itself, with its harness's command line and environment;
    `kept`: started under a keeper, as `run_in_group` starts it."""
    harness = harness_for(run)
    attempt = Attempt(name, "none", 1, False, prompt, Path("/nonexistent/wfa"), cwd, {**os.environ, **run.env})
    argv, stdin, env = harness.argv(attempt), harness.stdin(attempt), harness.env(attempt)
    start = time.perf_counter()
    if kept:
        exited = await run_in_group(argv, input=stdin, cwd=cwd, env=env)
        status, stderr = exited.exit_code, exited.stderr
    else:
        done = await anyio.run_process(argv, input=stdin, env=env, cwd=cwd, check=False)
        status, stderr = done.returncode, done.stderr.decode()
    took = time.perf_counter() - start
    if status != 0:
        sys.exit(f"{name} alone exited {status}: {stderr[-500:]}")
    return took


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory(prefix="awf-bench-turn-") as root:
        base = Path(root)
        async with ScriptedModel(script) as model:
            runs = {name: runtime(name, model, base / name) for name in CLIS}
            times: dict[str, dict[str, list[float]]] = {
                name: {"alone": [], "alone_python": [], "kept": [], "ours": [], "engine": [], "cpu": []} for name in CLIS
            }

            @workflow(name="bench-turn", description="Turns of each CLI, timed.")
            async def flow(wf):
                for _ in range(n):
                    for name in CLIS:
                        times[name]["alone"].append(await alone(name, runs[name], base, "Run the command."))
                        times[name]["alone_python"].append(await alone(name, runs[name], base, "Run the PYTHON command."))
                        times[name]["kept"].append(await alone(name, runs[name], base, "Run the command.", kept=True))
                        agent = await wf.agents.open(f"{name}-{len(times[name]['ours'])}", runtime=runs[name])
                        cli_seconds.clear()
                        start, cpu = time.perf_counter(), time.process_time()
                        turn = await agent.run("Run the command, then finish.", schema=Verdict, timeout="60s")
                        took = time.perf_counter() - start
                        times[name]["cpu"].append(time.process_time() - cpu)
                        times[name]["ours"].append(took)
                        times[name]["engine"].append(took - sum(cli_seconds))
                        assert turn.answered, turn.outcome
                        await agent.close()

            result = await agentswf.run(flow, run_root=base / "runs", cwd=base)
            assert result.outcome == "completed", result.reason
    for name in CLIS:
        ours, baseline = statistics.median(times[name]["ours"]), statistics.median(times[name]["alone"])
        engine = statistics.median(times[name]["engine"])
        python = statistics.median(times[name]["alone_python"])
        kept = statistics.median(times[name]["kept"])
        cpu = statistics.median(times[name]["cpu"])
        print(
            f"turn_{name}: ours={ours:.3f}s baseline={baseline:.3f}s ratio={ours / baseline:.3f} "
            f"added={(ours - baseline) * 1000:.0f}ms engine={engine * 1000:.1f}ms engine_cpu={cpu * 1000:.1f}ms "
            f"added_vs_a_python_command={(ours - python) * 1000:.0f}ms "
            f"kept={kept:.3f}s kept_ratio={kept / baseline:.3f} keeper_added={(kept - baseline) * 1000:.0f}ms"
        )


if __name__ == "__main__":
    missing = [name for name in CLIS if find_cli(name) is None]
    if missing:
        sys.exit(f"install the CLIs first (missing: {', '.join(missing)}); .ci/run shows how")
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 5)
