"""`awf worker` processes: they run the turns of a run started elsewhere, and a worker killed
with -9 mid-turn loses nothing: the turn's activity times out on its heartbeat and runs again
on the other worker."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import anyio
import pytest

from .processes import stop_groups

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

from temporalio.client import Client

import agentswf
from agentswf import Runtime, workflow
from agentswf.temporal import TemporalEngine, on_asyncio
from agentswf.temporal.turns import turns_ran

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WORKER_READY_SECONDS = 30.0


class Workers:
    """`awf worker` processes on one queue, each with its own root; all stopped at the test's end."""

    def __init__(self, address: str, queue: str, tmp_path: Path) -> None:
        self.address, self.queue, self.tmp_path = address, queue, tmp_path
        self.processes: list[subprocess.Popen[str]] = []

    def start(self, name: str, *more: str) -> subprocess.Popen[str]:
        root = self.tmp_path / name
        process = subprocess.Popen(
            [sys.executable, "-m", "agentswf", "worker", "--address", self.address, "--task-queue", self.queue,
             "--run-root", str(root), *more],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, start_new_session=True,
        )
        self.processes.append(process)
        assert process.stderr is not None
        line = process.stderr.readline()  # the worker says so once it polls
        line = process.stderr.readline() if line.startswith("awf: WARNING: no payload key") else line
        assert line.startswith("awf: worker on"), line
        return process

    def stop(self) -> None:
        stop_groups(self.processes)


@pytest.fixture
def workers(temporal_address: str, tmp_path: Path) -> Iterator[Workers]:
    started = Workers(temporal_address, f"test-{uuid4().hex[:8]}", tmp_path)
    try:
        yield started
    finally:
        started.stop()


async def test_a_run_started_here_has_its_turns_run_by_an_awf_worker(workers: Workers, tmp_path: Path) -> None:
    workers.start("one")
    review_fix = agentswf.load_workflow(EXAMPLES / "review_fix" / "review_fix.py")
    engine = TemporalEngine(address=workers.address, task_queue=workers.queue, run_turns=False)
    result = await agentswf.run(review_fix, run_root=tmp_path / "runs", engine=engine)
    assert result.outcome == "completed", result.reason
    assert turns_ran(tmp_path / "one", "review-fix", result.run_id) == [
        "fixer-1-attempt1", "reviewer-1-attempt1", "reviewer-2-attempt1",
    ]


def _lingering(text: str) -> list[str]:
    """The processes whose command line holds `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in line and entry.name.isdigit():
            found.append(line)
    return found


async def test_a_worker_killed_mid_turn_loses_nothing(workers: Workers, tmp_path: Path) -> None:
    mark = tmp_path / "first-attempt"
    agent = tmp_path / "slow-first.sh"
    agent.write_text(
        "#!/bin/sh\ncat >/dev/null\n"
        f'if [ ! -e "{mark}" ]; then : > "{mark}"; sleep 59.4321; fi\n'
        'echo "answered on the other worker" | "$WFA" result "$WFA_CALL_ID"\n'
    )
    agent.chmod(0o700)
    first, second = workers.start("first"), workers.start("second")
    workers_by_root = {"first": first, "second": second}

    @workflow(name="survivor", description="One turn, whose first worker is killed.")
    async def survivor(wf):  # type: ignore[no-untyped-def]
        one = await wf.agents.open("one", runtime=Runtime(harness="shell", command=(str(agent),)))
        turn = await one.run("Answer.", timeout="2m")
        return turn.value if turn.answered else turn.outcome.reason

    engine = TemporalEngine(address=workers.address, task_queue=workers.queue, run_turns=False)
    results: list[agentswf.RunResult] = []

    async def run() -> None:
        results.append(await agentswf.run(survivor, run_root=tmp_path / "runs", engine=engine))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        with anyio.fail_after(30):
            while not mark.exists():
                await anyio.sleep(0.05)
        [took] = [name for name in workers_by_root if any((tmp_path / name).glob("runs/*"))]
        os.kill(workers_by_root[took].pid, signal.SIGKILL)  # the worker alone: its agent's watchdog does the rest
        started = time.monotonic()
    [result] = results
    assert result.outcome == "completed", result.reason
    assert result.value == "answered on the other worker"
    other = "second" if took == "first" else "first"
    assert turns_ran(tmp_path / other, "survivor", result.run_id) == ["one-1-attempt2"]
    assert time.monotonic() - started < 20  # the heartbeat timeout (5 s) and a retry, not the turn's 2 minutes
    assert not _lingering(str(agent)) and not _lingering("sleep 59.4321")  # the killed worker's agent went with it


def test_awf_run_engine_temporal_prints_the_value_and_exits_0(workers: Workers, tmp_path: Path) -> None:
    workers.start("one")
    done = subprocess.run(
        [sys.executable, "-m", "agentswf", "run", str(EXAMPLES / "review_fix" / "review_fix.py"), "--engine", "temporal",
         "--address", workers.address, "--task-queue", workers.queue, "--no-turns-here", "--run-root",
         str(tmp_path / "runs"), "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["outcome"] == "completed"
    assert record["value"]["fixed"] == ["calc.py"]
    assert turns_ran(tmp_path / "one", "review-fix", record["run_id"])  # its turns ran on the worker


@pytest.mark.parametrize(
    ("words", "says"),
    [
        (["run", str(EXAMPLES / "tools" / "triage.py"), "--engine", "temporal"], "needs --address HOST:PORT and --task-queue"),
        (["run", str(EXAMPLES / "tools" / "triage.py"), "--task-queue", "q"], "--task-queue is for --engine temporal"),
        (["worker", "--address", "127.0.0.1:1", "--task-queue", "q", "--max-turns", "0"], "--max-turns is at least 1"),
    ],
)
def test_awf_refuses_a_temporal_command_it_cant_run(words: list[str], says: str) -> None:
    done = subprocess.run([sys.executable, "-m", "agentswf", *words], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert says in done.stderr


async def test_a_runtimes_task_queue_sends_its_agents_turns_to_that_queues_workers(
    workers: Workers, tmp_path: Path
) -> None:
    workers.start("gpu-box")
    here = Runtime(harness="shell", command=("/bin/sh", "-c", 'cat >/dev/null; echo here | "$WFA" result "$WFA_CALL_ID"'))
    there = Runtime(
        harness="shell", command=("/bin/sh", "-c", 'cat >/dev/null; echo there | "$WFA" result "$WFA_CALL_ID"'),
        task_queue=workers.queue,
    )

    @workflow(name="placed", description="Two agents, one placed on another queue.")
    async def placed(wf):  # type: ignore[no-untyped-def]
        local = await wf.agents.open("local", runtime=here)
        remote = await wf.agents.open("remote", runtime=there)
        return [(await local.run("Say.")).value, (await remote.run("Say.")).value]

    engine = TemporalEngine(address=workers.address, task_queue=f"here-{uuid4().hex[:8]}", worker_root=tmp_path / "here")
    result = await agentswf.run(placed, run_root=tmp_path / "runs", engine=engine)
    assert result.value == ["here", "there"], result.reason
    assert turns_ran(tmp_path / "here", "placed", result.run_id) == ["local-1-attempt1"]
    assert turns_ran(tmp_path / "gpu-box", "placed", result.run_id) == ["remote-1-attempt1"]


FLOW = """
import sys
from agentswf import Runtime, workflow

AGENT = Runtime(harness="shell", command=(sys.executable, {agent!r}))


@workflow(name="outlives", description="Two turns; the process that started the run dies between them.")
async def outlives(wf):
    agent = await wf.agents.open("one", runtime=AGENT)
    first = await agent.run("First.", timeout="2m")
    second = await agent.run("Second.", timeout="2m")
    return [first.value, second.value]
"""

SLOW_FIRST = """
import os, pathlib, subprocess, sys, time
prompt = sys.stdin.read()
mark = pathlib.Path({mark!r})
if "First." in prompt and not mark.exists():
    mark.touch()
    while not pathlib.Path({go_on!r}).exists():
        time.sleep(0.05)
said = "first" if "First." in prompt else "second"
subprocess.run([os.environ["WFA"], "result", os.environ["WFA_CALL_ID"], said], check=True)
"""


async def host_killed_mid_turn(workers: Workers, tmp_path: Path, go_on: Path) -> tuple[Path, Path]:
    """`awf run` of FLOW on Temporal, a keeper worker running its turns and its workflow's code, the
    run's host killed -9 mid-turn (the first turn waits for `go_on`): (the agent's script, the run root)."""
    mark = tmp_path / "first-started"
    agent = tmp_path / "agent.py"
    agent.write_text(SLOW_FIRST.format(mark=str(mark), go_on=str(go_on)))
    flow = tmp_path / "outlives.py"
    flow.write_text(FLOW.format(agent=str(agent)))
    workers.start("keeper", "--workflow", str(flow))  # runs turns, and this workflow's own code
    runs = tmp_path / "runs"
    host = subprocess.Popen(
        [sys.executable, "-m", "agentswf", "run", str(flow), "--engine", "temporal", "--address", workers.address,
         "--task-queue", workers.queue, "--no-turns-here", "--run-root", str(runs)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        with anyio.fail_after(60):
            while not mark.exists():
                await anyio.sleep(0.05)
    finally:
        os.killpg(host.pid, signal.SIGKILL)  # the run's host, mid-turn: its workflow worker goes with it
        host.wait()
    return agent, runs


async def test_a_run_goes_on_after_the_process_that_started_it_is_killed(workers: Workers, tmp_path: Path) -> None:
    go_on = tmp_path / "go-on"
    _, runs = await host_killed_mid_turn(workers, tmp_path, go_on)
    go_on.touch()
    [record] = runs.glob("outlives/*/temporal.json")
    workflow_id = json.loads(record.read_text())["workflow_id"]
    with anyio.fail_after(90):  # the sticky queue's timeout (10 s), then the keeper replays and goes on
        ending = await on_asyncio(functools.partial(_result, workers.address, workflow_id))
    assert ending["outcome"] == "completed", ending
    assert ending["value"] == ["first", "second"]
    assert not (record.parent / "output.json").exists()  # its host died before it could write the record
    logs = await anyio.run_process(
        [sys.executable, "-m", "agentswf", "logs", record.parent.name, "--run-root", str(runs)], check=False
    )
    assert logs.returncode == 0, logs.stderr.decode()
    assert "written from Temporal" in logs.stderr.decode()
    assert "ended completed" in logs.stdout.decode() and "one turn 2" in logs.stdout.decode()
    assert json.loads((record.parent / "output.json").read_text())["value"] == ["first", "second"]


async def _result(address: str, workflow_id: str) -> Any:
    client = await Client.connect(address)
    return await client.get_workflow_handle(workflow_id).result()


@pytest.mark.parametrize("flag", ["--run-root", "--root"])
def test_a_workers_run_root_is_given_as_awfs_other_commands_give_it(flag: str) -> None:
    from agentswf.cli.main import _parser

    options = _parser("worker").parse_args(["worker", "--address", "127.0.0.1:1", "--task-queue", "q", flag, "/tmp/w"])
    assert options.run_root == "/tmp/w"  # --root, its first name, is the same flag
