"""An `awf worker` given another payload key than the run's: it can't decrypt the turn it is sent,
and says so in one line of its own per attempt, never with the SDK's traceback; and a run's host
that can't decrypt its worker's answer ends the run, failed, saying why in a line."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from uuid import uuid4

import anyio
import pytest

import agentswf
from agentswf import workflow

from .processes import stop_groups

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")
pytest.importorskip("cryptography", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from agentswf.engine.record.layout import TEMPORAL_FILE
from agentswf.harnesses.environment import PAYLOAD_KEY_VARIABLE, PAYLOAD_OLD_KEYS_VARIABLE
from agentswf.temporal import TemporalEngine, codec
from agentswf.temporal.codec import payload_key_id

AWF = [sys.executable, "-m", "agentswf"]
SAID_SECONDS = 60.0  # for the worker to be sent the turn and refuse it, at most
POLL_SECONDS = 0.1  # between asks whether a workflow has started
ENDED_SECONDS = 30.0  # for `awf run` to end once its host can't read its worker's answer (3 attempts, ~3 s, on main: never)
FLOW = """
from agentswf import workflow


@workflow(name="keyed", description="One turn, for a worker to take.")
async def keyed(wf):
    agent = await wf.agents.open("one", runtime='shell:echo ok | "$WFA" result "$WFA_CALL_ID"')
    return (await agent.run("Answer.", timeout="2m")).value
"""


def test_a_worker_with_another_payload_key_says_so_in_a_line_without_a_traceback(
    temporal_address: str, tmp_path: Path
) -> None:
    (tmp_path / "flow.py").write_text(FLOW)
    runs, worker = os.urandom(32), os.urandom(32)
    env = {name: value for name, value in os.environ.items() if name not in (PAYLOAD_KEY_VARIABLE, PAYLOAD_OLD_KEYS_VARIABLE)}
    queue = f"test-{uuid4().hex[:8]}"
    where = ["--address", temporal_address, "--task-queue", queue]
    started = [
        subprocess.Popen(
            [*AWF, "run", "flow.py", "--engine", "temporal", *where, "--no-turns-here", "--run-root", str(tmp_path / "runs")],
            env={**env, PAYLOAD_KEY_VARIABLE: base64.b64encode(runs).decode()}, cwd=tmp_path,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, start_new_session=True,
        ),
        subprocess.Popen(
            [*AWF, "worker", *where, "--run-root", str(tmp_path / "worker")],
            env={**env, PAYLOAD_KEY_VARIABLE: base64.b64encode(worker).decode()}, cwd=tmp_path,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
        ),
    ]
    stderr = started[1].stderr
    assert stderr is not None
    late = threading.Timer(SAID_SECONDS, stop_groups, [started])  # a worker that never says it: its stderr ends
    late.start()
    said: list[str] = []
    try:
        while not said or not said[-1].startswith("awf: refused:"):
            line = stderr.readline()
            assert line, f"the worker never refused the turn in a line: {''.join(said)}"
            said.append(line)
    finally:
        late.cancel()
        rest = stop_groups(started)
    assert said[-1].strip() == (
        f"awf: refused: a payload from Temporal is encrypted with payload key '{payload_key_id(runs)}', which this "
        f"process doesn't hold (it holds {payload_key_id(worker)}): give that key in {PAYLOAD_KEY_VARIABLE}, or in "
        f"{PAYLOAD_OLD_KEYS_VARIABLE} once rotated"
    )
    assert "Traceback" not in "".join(said) + rest


def _started(tmp_path: Path, address: str, host: bytes | None, worker: bytes | None) -> list[subprocess.Popen[str]]:
    """`awf run` of FLOW leaving its turn to an `awf worker`, each with its payload key (None: without one)."""
    (tmp_path / "flow.py").write_text(FLOW)
    env = {name: value for name, value in os.environ.items() if name not in (PAYLOAD_KEY_VARIABLE, PAYLOAD_OLD_KEYS_VARIABLE)}
    where = ["--address", address, "--task-queue", f"test-{uuid4().hex[:8]}"]
    commands = [
        ([*AWF, "run", "flow.py", "--engine", "temporal", *where, "--no-turns-here", "--run-root", str(tmp_path / "runs")], host),
        ([*AWF, "worker", *where, "--run-root", str(tmp_path / "worker")], worker),
    ]
    return [
        subprocess.Popen(
            command, env={**env, PAYLOAD_KEY_VARIABLE: base64.b64encode(key).decode()} if key is not None else env,
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
        for command, key in commands
    ]


async def _status(address: str, workflow_id: str) -> WorkflowExecutionStatus | None:
    return (await (await Client.connect(address)).get_workflow_handle(workflow_id).describe()).status


async def _started_on(address: str, workflow_id: str) -> None:
    """Once the workflow `workflow_id` is on Temporal (its starter records its id a moment before)."""
    handle = (await Client.connect(address)).get_workflow_handle(workflow_id)
    while True:
        try:
            await handle.describe()
            return
        except RPCError:
            await asyncio.sleep(POLL_SECONDS)


def _ended(started: list[subprocess.Popen[str]]) -> tuple[int, str, str]:
    """`awf run`'s exit status and stderr once it ends (within ENDED_SECONDS, else the test fails), and
    what the workers said, stopped."""
    try:
        _, said = started[0].communicate(timeout=ENDED_SECONDS)
    except subprocess.TimeoutExpired:
        rest = stop_groups(started)
        pytest.fail(f"awf run still waits {ENDED_SECONDS:g}s after its start: {rest}")
    return started[0].returncode, said, stop_groups(started[1:])


@pytest.mark.parametrize("host_has_key", [True, False], ids=["another-key", "no-key"])
def test_a_host_that_cant_read_its_workers_answer_ends_the_run_failed_in_a_line(
    temporal_address: str, tmp_path: Path, host_has_key: bool
) -> None:
    host, worker = (os.urandom(32) if host_has_key else None), os.urandom(32)
    started = _started(tmp_path, temporal_address, host, worker)
    code, said, rest = _ended(started)
    held = f"it holds {payload_key_id(host)}" if host is not None else f"it has no payload key ({PAYLOAD_KEY_VARIABLE})"
    why = (f"its workflow failed on Temporal: this run's host (the process that runs its workflow's code) can't read its "
           f"worker's answer: it is encrypted with payload key '{payload_key_id(worker)}', which the host doesn't hold "
           f"({held}): give the run's workers and its host the same {PAYLOAD_KEY_VARIABLE}, or the workers' older key in "
           f"the host's {PAYLOAD_OLD_KEYS_VARIABLE}")
    assert code == 1 and [line for line in said.splitlines() if why in line] == [f"awf: keyed failed: {why}"], said
    assert "Traceback" not in said + rest
    [run_dir] = [path.parent for path in (tmp_path / "runs" / "keyed").glob("*/output.json")]
    output = json.loads((run_dir / "output.json").read_text())
    assert (output["outcome"], output["reason"]) == ("failed", why)
    workflow_id = json.loads((run_dir / TEMPORAL_FILE).read_text())["workflow_id"]
    assert asyncio.run(_status(temporal_address, workflow_id)) == WorkflowExecutionStatus.FAILED  # nothing left running


def test_a_worker_without_the_runs_payload_key_fails_the_run_in_a_line(temporal_address: str, tmp_path: Path) -> None:
    """The reverse: the worker can't read the turn (and says why); its failure, in plaintext, fails the turn."""
    host = os.urandom(32)
    started = _started(tmp_path, temporal_address, host, None)
    code, said, rest = _ended(started)
    assert code == 1 and "awf: keyed failed: TurnNotAnswered: turn 1 of one ended failed: the turn's activity failed" in said
    assert f"encrypted with payload key '{payload_key_id(host)}'" in said  # the worker's cause, not only the SDK's words
    assert (f"awf: refused: a payload from Temporal is encrypted with payload key '{payload_key_id(host)}', which this "
            f"process doesn't hold (it has no payload key ({PAYLOAD_KEY_VARIABLE}))") in rest
    assert "Traceback" not in said + rest


HOSTED = """
from agentswf import Runtime, workflow


@workflow(name="hosted", description="One turn on a queue of its own, for a worker to take.")
async def hosted(wf):
    runtime = Runtime(harness="shell", command=("/bin/sh", "-c", "echo ok"), task_queue={queue!r})
    agent = await wf.agents.open("one", runtime=runtime)
    return (await agent.run("Answer.", timeout="2m")).value
"""


def test_a_worker_hosting_runs_ends_the_one_it_cant_read_and_goes_on(temporal_address: str, tmp_path: Path) -> None:
    """`awf worker --workflow` hosts a run whose starter is gone; the worker that takes its turn has another key."""
    host, worker = os.urandom(32), os.urandom(32)
    queue = f"test-{uuid4().hex[:8]}"
    (tmp_path / "flow.py").write_text(HOSTED.format(queue=f"{queue}.turns"))
    env = {name: value for name, value in os.environ.items() if name not in (PAYLOAD_KEY_VARIABLE, PAYLOAD_OLD_KEYS_VARIABLE)}
    where = ["--address", temporal_address]
    commands = [
        ([*AWF, "worker", *where, "--task-queue", queue, "--workflow", "flow.py", "--run-root", "hosting"], host),
        ([*AWF, "worker", *where, "--task-queue", f"{queue}.turns", "--run-root", "turns"], worker),
        ([*AWF, "run", "flow.py", "--engine", "temporal", *where, "--task-queue", queue, "--no-turns-here",
          "--run-root", "runs"], host),
    ]
    started = [
        subprocess.Popen(command, env={**env, PAYLOAD_KEY_VARIABLE: base64.b64encode(key).decode()}, cwd=tmp_path,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
        for command, key in commands
    ]
    hosting, starter = started[0], started[2]
    assert hosting.stderr is not None and starter.stderr is not None
    late = threading.Timer(SAID_SECONDS, stop_groups, [[hosting, starter]])  # one that never says it: its stderr ends
    late.start()
    said: list[str] = []
    try:
        while "run started" not in "".join(said):
            said.append(starter.stderr.readline())
            assert said[-1], f"the run never started: {''.join(said)}"
        [run_dir] = (tmp_path / "runs" / "hosted").iterdir()
        workflow_id = json.loads((run_dir / TEMPORAL_FILE).read_text())["workflow_id"]
        asyncio.run(asyncio.wait_for(_started_on(temporal_address, workflow_id), SAID_SECONDS))
        os.killpg(starter.pid, signal.SIGKILL)  # its starter gone, the run is the hosting worker's
        while not said[-1].startswith("awf: a run's workflow failed:"):
            said.append(hosting.stderr.readline())
            assert said[-1], f"the hosting worker never said the run failed: {''.join(said)}"
        assert hosting.poll() is None  # it goes on serving
    finally:
        late.cancel()
        rest = stop_groups(started)
    assert "this run's host (the process that runs its workflow's code) can't read its worker's answer: it is encrypted " \
           f"with payload key '{payload_key_id(worker)}', which the host doesn't hold (it holds {payload_key_id(host)})" in said[-1]
    assert "Traceback" not in "".join(said) + rest and "awf: worker stopped" in rest
    assert asyncio.run(_status(temporal_address, workflow_id)) == WorkflowExecutionStatus.FAILED
    logs = subprocess.run([*AWF, "logs", str(run_dir)], env={**env, PAYLOAD_KEY_VARIABLE: base64.b64encode(host).decode()},
                          cwd=tmp_path, capture_output=True, text=True, timeout=SAID_SECONDS)
    assert "ended failed" in logs.stdout and f"payload key '{payload_key_id(worker)}'" in logs.stdout, logs.stderr  # its record



@workflow(name="keyed", description="One turn, for a worker to take.")
async def keyed(wf):  # type: ignore[no-untyped-def]
    agent = await wf.agents.open("one", runtime='shell:echo ok | "$WFA" result "$WFA_CALL_ID"')
    return (await agent.run("Answer.", timeout="2m")).value


async def test_a_run_whose_host_cant_read_its_workers_answer_fails_as_a_run_does(
    temporal_address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`agentswf.run` with a TemporalEngine hosting the run without a payload key, its worker holding one."""
    for name in (PAYLOAD_KEY_VARIABLE, PAYLOAD_OLD_KEYS_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(codec, "_held", None)  # this process: no payload key
    worker, queue = os.urandom(32), f"test-{uuid4().hex[:8]}"
    env = {**os.environ, PAYLOAD_KEY_VARIABLE: base64.b64encode(worker).decode()}
    turns = subprocess.Popen([*AWF, "worker", "--address", temporal_address, "--task-queue", queue, "--run-root",
                              str(tmp_path / "worker")], env=env, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        engine = TemporalEngine(address=temporal_address, task_queue=queue, run_turns=False)
        with anyio.fail_after(ENDED_SECONDS):
            result = await agentswf.run(keyed, run_root=tmp_path / "runs", engine=engine)
    finally:
        stop_groups([turns])
    assert result.outcome == "failed", result
    assert result.reason is not None and result.reason.startswith("its workflow failed on Temporal: this run's host")
    assert f"payload key '{payload_key_id(worker)}', which the host doesn't hold (it has no payload key" in result.reason
    assert json.loads((result.run_dir / "output.json").read_text())["reason"] == result.reason
