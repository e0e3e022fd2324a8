"""agentswf.testing is strict: a missing script, a list left over or run out, a failing assert."""

from __future__ import annotations

import pytest

from agentswf import workflow
from agentswf.errors import TestScriptError
from agentswf.testing import answer, run_workflow, silent

pytestmark = pytest.mark.anyio


@workflow(name="two-agents", description="Asks a and then b once each.")
async def two_agents(wf) -> list:
    a = await wf.agents.open("a", runtime="shell:true")
    first = await a.run("First question.")
    b = await wf.agents.open("reviewer", runtime="shell:true")
    second = await b.run("Second question.")
    return [first.outcome.kind, second.outcome.kind]


async def test_the_happy_path(tmp_path):
    run = await run_workflow(two_agents, agents={"a": answer("x"), "reviewer": [answer("y")]}, run_root=tmp_path)
    assert run.value == ["answered", "answered"]
    assert [t["agent"] for t in run.turns] == ["a", "reviewer"]


async def test_an_agent_without_a_script_is_named(tmp_path):
    with pytest.raises(TestScriptError, match="agent reviewer was opened, but has no script"):
        await run_workflow(two_agents, agents={"a": answer("x")}, run_root=tmp_path)


async def test_a_script_for_an_agent_never_opened_is_named(tmp_path):
    with pytest.raises(TestScriptError, match=r"agent reviwer has a script, but was never opened \(opened: a, reviewer\)"):
        await run_workflow(
            two_agents,
            agents={"a": answer("x"), "reviewer": answer("y"), "reviwer": answer("z")},
            run_root=tmp_path,
        )


async def test_a_list_with_entries_left_over(tmp_path):
    with pytest.raises(TestScriptError, match="agent reviewer: its script has 2 entries left over"):
        await run_workflow(
            two_agents,
            agents={"a": answer("x"), "reviewer": [answer("y"), answer("z"), answer("w")]},
            run_root=tmp_path,
        )


async def test_a_list_that_runs_out(tmp_path):
    # the silent attempt is nudged, and the list has nothing for the nudge
    with pytest.raises(TestScriptError, match=r"agent a turn 1 \(the nudge\): its script has 1 entry, all used"):
        await run_workflow(two_agents, agents={"a": [silent()], "reviewer": answer("y")}, run_root=tmp_path)


async def test_an_assert_inside_a_script_surfaces_as_itself(tmp_path):
    def script(turn):
        assert turn.prompt.startswith("Something else"), "the prompt was not what the test expected"
        return "x"

    with pytest.raises(AssertionError, match="the prompt was not what the test expected") as raised:
        await run_workflow(two_agents, agents={"a": answer(script), "reviewer": answer("y")}, run_root=tmp_path)
    assert not isinstance(raised.value, TestScriptError)


async def test_an_error_inside_a_script_surfaces_as_itself(tmp_path):
    async def script(turn):
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        await run_workflow(two_agents, agents={"a": answer(script), "reviewer": answer("y")}, run_root=tmp_path)


async def test_a_refused_scripted_answer_is_a_script_error(tmp_path):
    @workflow(name="typed", description="Wants an int.")
    async def typed(wf):
        a = await wf.agents.open("a", runtime="shell:true")
        return (await a.run("Count.", schema=int)).value

    with pytest.raises(TestScriptError, match=r"refused \(invalid-result\)"):
        await run_workflow(typed, agents={"a": answer("not a number")}, run_root=tmp_path)


async def test_value_raises_when_the_run_did_not_complete(tmp_path):
    @workflow(name="boom", description="Fails.")
    async def boom(wf):
        raise RuntimeError("no")

    run = await run_workflow(boom, agents={}, run_root=tmp_path)
    assert run.outcome == "failed" and run.reason == "RuntimeError: no"
    with pytest.raises(AssertionError, match="the run ended failed: RuntimeError: no"):
        run.value


async def test_scripted_turns_see_prompt_number_and_nudge(tmp_path):
    seen = []

    def script(turn):
        seen.append((turn.n, turn.nudge, turn.agent, turn.call_id in turn.prompt))
        if turn.nudge:
            return "late"

    @workflow(name="nudge", description="One nudged turn.")
    async def fn(wf):
        a = await wf.agents.open("a", runtime="shell:true")
        return (await a.run("Work.")).value

    from agentswf.engine.rules import AttemptEnding
    from agentswf.testing import Script

    class FirstSilent(Script):
        async def play(self, turn):
            seen.append((turn.n, turn.nudge, turn.agent, turn.call_id in turn.prompt))
            return AttemptEnding("exited")

    run = await run_workflow(fn, agents={"a": [FirstSilent("silent"), answer(script)]}, run_root=tmp_path)
    assert run.value == "late"
    assert seen == [(1, False, "a", True), (1, True, "a", True)]
