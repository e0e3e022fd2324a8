"""A turn worker's one local run (turns.WorkerRuns): its agents open in it for a turn and close after,
so a worker pays a run's setup once, not once a turn; a key in a turn in it already gets a run of its own.
Its log says whose each turn was."""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

import agentswf
from agentswf import Runtime, workflow
from agentswf.engine.record.layout import read_lines
from agentswf.temporal import TemporalEngine
from agentswf.temporal.turns import TURN_RAN, WorkerRuns, turns_ran

ANSWER = 'cat >/dev/null; echo "$WFA_AGENT" | "$WFA" result "$WFA_CALL_ID"'


async def test_a_workers_turns_run_in_one_local_run_it_holds(temporal_address: str, tmp_path: Path) -> None:
    @workflow(name="held", description="Two agents' turns, on one worker.")
    async def held(wf):  # type: ignore[no-untyped-def]
        runtime = Runtime(harness="shell", command=("/bin/sh", "-c", ANSWER))
        one, two = await wf.agents.open("one", runtime=runtime), await wf.agents.open("two", runtime=runtime)
        said = [(await one.run("Go.")).value for _ in range(3)]
        return [*said, (await two.run("Go.")).value]

    root = tmp_path / "worker"
    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=root)
    result = await agentswf.run(held, run_root=tmp_path / "runs", engine=engine)
    assert result.outcome == "completed", result.reason
    assert result.value == ["one", "one", "one", "two"]  # each under its own key, as locally
    [local] = (root / "runs").iterdir()  # one local run served the four turns
    call_ids = [line["call_id"] for line in read_lines(local / "turns.jsonl")]
    ran = [line["fields"] for line in read_lines(local / "log.jsonl") if line["message"] == TURN_RAN]
    assert [(said["agent"], said["turn"], said["call"]) for said in ran] == [  # whose each call was
        ("one", 1, call_ids[0]), ("one", 2, call_ids[1]), ("one", 3, call_ids[2]), ("two", 1, call_ids[3]),
    ]
    assert turns_ran(root, "held", result.run_id) == ["one-1-attempt1", "one-2-attempt1", "one-3-attempt1", "two-1-attempt1"]
    assert not (root / "held").exists()  # nothing made per turn


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # a worker's activities run on asyncio
async def test_a_key_in_a_turn_already_gets_a_local_run_of_its_own(tmp_path: Path) -> None:
    runs = WorkerRuns(tmp_path, turns_per_run=3)
    async with runs.lease("reviewer") as first, runs.lease("fixer") as beside:
        assert beside is first  # another key shares the run
        async with runs.lease("reviewer") as second:  # two workflows' `reviewer` at once
            assert second is not first and first.alive() and second.alive()
        assert runs.runs == [first]  # the second, left with no turn, is closed
        assert not second.alive()
    async with runs.lease("reviewer") as worn:  # the first run's third turn: the last it is given
        assert worn is first
    async with runs.lease("reviewer") as fresh:
        assert fresh is not first and not first.alive()
    assert runs.runs == [fresh]
    await runs.close()
    assert not fresh.alive() and runs.runs == []
