"""Messaging on Temporal: a person reaches a participant of a Temporal run through awf (`awf
inbox --as`, `awf reply --as`, `awf send --as`: the workflow's update `agentswf.operator`),
and the run's board refuses what the local one refuses, by the same rules."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from uuid import uuid4

import anyio
import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

import agentswf
from agentswf import workflow
from agentswf.temporal import TemporalEngine

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


async def awf(*words: str) -> tuple[int, str, str]:
    done = await anyio.run_process([sys.executable, "-m", "agentswf", *words], check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def engine(address: str, tmp_path: Path) -> TemporalEngine:
    return TemporalEngine(address=address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "worker")


async def test_a_person_answers_a_temporal_runs_coordinator_through_awf(temporal_address: str, tmp_path: Path) -> None:
    merge = agentswf.load_workflow(EXAMPLES / "messaging" / "merge.py")
    runs = tmp_path / "runs"
    results: list[agentswf.RunResult] = []

    async def run() -> None:
        results.append(await agentswf.run(merge, args={"coordinator": "person"}, run_root=runs,
                                          engine=engine(temporal_address, tmp_path)))

    async def person() -> None:
        with anyio.fail_after(60):
            while not list(runs.glob("merge/*/temporal.json")):
                await anyio.sleep(0.1)
        run_id = next(runs.glob("merge/*/temporal.json")).parent.name
        code, out, err = await awf("inbox", run_id, "--as", "nobody", "--run-root", str(runs))
        assert code == 2 and "nobody is not a participant" in err, (code, out, err)
        code, out, err = await awf("inbox", run_id, "--as", "coordinator", "--wait", "60s", "--run-root", str(runs))
        assert code == 0, err
        assert "from implementer (a question: awf reply implementer --as coordinator)" in out and "May I merge?" in out
        code, out, err = await awf("send", run_id, "architect", "Hello.", "--as", "coordinator", "--run-root", str(runs))
        assert code == 1 and "no-route" in err, (code, out, err)  # the coordinator has no route to the architect
        code, out, err = await awf("reply", run_id, "architect", "Yes.", "--as", "coordinator", "--run-root", str(runs))
        assert code == 1 and "none-owed" in err, (code, out, err)  # the architect asked it nothing
        code, out, err = await awf("reply", run_id, "implementer", "Merge it.", "--as", "coordinator", "--run-root", str(runs))
        assert code == 0 and "replied to implementer" in out, (code, out, err)

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await person()
    [result] = results
    assert result.outcome == "completed", result.reason
    assert result.value == {"where": "queue", "merged": True, "coordinator_asked": []}
    trace = await awf("trace", result.run_id, "--run-root", str(runs))
    assert "coordinator -> implementer [reply" in trace[1], trace


async def test_the_boards_refusals_reach_the_agent_and_the_workflow(temporal_address: str, tmp_path: Path) -> None:
    """An agent's send without a route is refused as locally, and told to the agent; the
    workflow's own send to a participant with no route raises MessageRefused."""
    script = tmp_path / "talker.sh"
    script.write_text('#!/bin/sh\ncat >/dev/null\nout=$(echo hi | "$WFA" send stranger 2>&1); echo "$out|$?" | "$WFA" result "$WFA_CALL_ID"\n')
    script.chmod(0o700)

    @workflow(name="refusals", description="Sends that the board refuses.")
    async def refusals(wf):  # type: ignore[no-untyped-def]
        talker = await wf.agents.open("talker", runtime=f"shell:{script}")
        person = await wf.participants.open("person")
        stranger = await wf.participants.open("stranger")
        await wf.route(talker, person, purpose="Talk")
        turn = await talker.run("Talk.", timeout="1m")
        try:
            await wf.send("stranger", "Hello.")
            raised = ""
        except agentswf.errors.WorkflowError as error:
            raised = str(error)
        return {"said": turn.value, "raised": raised, "stranger": len(await stranger.inbox())}

    with anyio.fail_after(60):
        result = await agentswf.run(refusals, run_root=tmp_path / "runs", engine=engine(temporal_address, tmp_path))
    assert result.outcome == "completed", result.reason
    assert "send refused (no-route): there is no route to stranger" in result.value["said"]
    assert result.value["said"].endswith("|1")
    assert result.value["raised"].startswith("no-route:") and result.value["stranger"] == 0
    assert not (result.run_dir / "messages.jsonl").exists() or not json.loads(
        "[" + ",".join((result.run_dir / "messages.jsonl").read_text().splitlines()) + "]"
    )
