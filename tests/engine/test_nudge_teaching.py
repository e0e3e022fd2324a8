"""The check-in teaches `wfa waiting` only where the harness offers it."""

from __future__ import annotations

import pytest

from agentswf import workflow
from agentswf.testing import answer, run_workflow, silent

pytestmark = pytest.mark.anyio


@workflow(name="nudged", description="One turn, answered after a check-in.")
async def nudged(wf):
    agent = await wf.agents.open("a", runtime="codex")
    return (await agent.run("Work.", timeout="20s")).outcome.kind


@pytest.mark.parametrize("supports_waiting", [True, False])
async def test_the_check_in_teaches_waiting_where_it_is_offered(tmp_path, supports_waiting):
    prompts = []

    def respond(turn):
        prompts.append(turn.prompt)
        return "done"

    run = await run_workflow(
        nudged, agents={"a": [silent(), answer(respond)]}, run_root=tmp_path, supports_waiting=supports_waiting
    )
    assert run.value == "answered"
    [check_in] = prompts
    assert ("waiting " in check_in and "--reason" in check_in) is supports_waiting
    assert "never moves the turn's deadline" in check_in if supports_waiting else True
