"""Virtual time: a workflow's twenty-minute waits tested in milliseconds, on asyncio and trio (issue 33).

The run's turns, records and scripted agents are all real (sockets, files); only the loop's clock is
virtual, jumping to the next deadline once the run has been idle a moment of real time.
"""

from __future__ import annotations

import time

import pytest

from agentswf import Workflow, workflow
from agentswf.testing import hang, run_workflow

pytestmark = pytest.mark.virtual_time

DONE_WITHIN_SECONDS = 2.0  # of real time, for twenty minutes of the run's


@workflow(name="unanswered", description="A turn of twenty minutes nobody answers.")
async def unanswered(wf: Workflow) -> str:
    reviewer = await wf.agents.open("reviewer", runtime="claude")
    turn = await reviewer.run("Review src/.", timeout="20m")
    return turn.outcome.kind


async def test_a_twenty_minute_turn_never_answered_times_out_in_under_two_seconds(run_root):
    started = time.monotonic()
    run = await run_workflow(unanswered, agents={"reviewer": hang()}, run_root=run_root, timeout="1h")
    took = time.monotonic() - started
    assert run.value == "timed-out"
    [turn] = run.turns
    assert turn["outcome"]["kind"] == "timed-out"
    assert turn["ended_at"] - turn["started_at"] == pytest.approx(20 * 60, abs=1)
    output = run.record.output
    assert output["ended_at"] - output["started_at"] == pytest.approx(20 * 60, abs=5)  # the run's own times agree
    assert took < DONE_WITHIN_SECONDS
