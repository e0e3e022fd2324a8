"""An `awf worker` given another payload key than the run's: it can't decrypt the turn it is sent,
and says so in one line of its own per attempt, never with the SDK's traceback."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import threading
from pathlib import Path
from uuid import uuid4

import pytest

from .processes import stop_groups

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")
pytest.importorskip("cryptography", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

from agentswf.harnesses.environment import PAYLOAD_KEY_VARIABLE, PAYLOAD_OLD_KEYS_VARIABLE
from agentswf.temporal.codec import payload_key_id

AWF = [sys.executable, "-m", "agentswf"]
SAID_SECONDS = 60.0  # for the worker to be sent the turn and refuse it, at most
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
