"""A Temporal run's record is a local run's: `awf logs` of it says what it says of the same run done
locally, its turns' calls (what the agent answered, how each attempt ended) written from what the
workers' local runs recorded."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from uuid import uuid4

import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

import agentswf
from agentswf import tool, workflow
from agentswf.engine.record.layout import read_json, read_lines
from agentswf.temporal import TemporalEngine

CALLER = 'shell:cat >/dev/null; "$WFA" tool add --a 2 --b 3 </dev/null >/dev/null; echo "five" | "$WFA" result "$WFA_CALL_ID"'
VARYING = [  # what differs between any two runs: times, ids, durations
    (re.compile(r"\d\d:\d\d:\d\d"), "T"), (re.compile(r"call [0-9a-f]+"), "call C"), (re.compile(r"run \S+ of"), "run R of"),
    (re.compile(r"after [0-9.]+s"), "after Ns"), (re.compile(r"\(\d+ ms\)"), "(N ms)"),
]


def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@workflow(name="logged", description="Two turns, each with a tool call, and a log line.")
async def logged(wf):  # type: ignore[no-untyped-def]
    agent = await wf.agents.open("adder", runtime=CALLER, tools={"add": tool(add)})
    wf.log("about to add")
    first = await agent.run("Add 2 and 3.")
    return first.value + (await agent.run("Again.")).value


def logs_of(result: agentswf.RunResult) -> str:
    said = subprocess.run(
        [sys.executable, "-m", "agentswf", "logs", result.run_id, "--run-root", str(result.run_dir.parent.parent)],
        capture_output=True, text=True, check=True,
    ).stdout
    for pattern, fixed in VARYING:
        said = pattern.sub(fixed, said)
    return said


async def test_awf_logs_of_a_temporal_run_is_that_of_the_local_run(temporal_address: str, tmp_path: Path) -> None:
    local = await agentswf.run(logged, run_root=tmp_path / "local", cwd=tmp_path)
    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
    remote = await agentswf.run(logged, run_root=tmp_path / "temporal", cwd=tmp_path, engine=engine)
    assert local.value == remote.value == "fivefive", (local.reason, remote.reason)
    shown = logs_of(remote)
    assert "accepted: five" in shown and "attempt ended: exited" in shown, shown
    assert shown == logs_of(local)
    calls = sorted(path.name for path in (remote.run_dir / "calls").iterdir())
    assert calls == sorted(line["call_id"] for line in read_lines(remote.run_dir / "turns.jsonl"))
    assert sorted(
        read_json(remote.run_dir / "calls" / call / "call.json")["n"] for call in calls) == [1, 2]
