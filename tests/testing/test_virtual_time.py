"""Virtual time: a workflow's twenty-minute waits tested in milliseconds, on asyncio and trio (issue 33).

The run's turns, records and scripted agents are all real (sockets, files); only the loop's clock is
virtual, jumping to the next deadline once the run has been idle a moment of real time.
"""

from __future__ import annotations

import time

import anyio
import msgspec
import pytest

import agentswf
from agentswf import Runtime, Workflow, tool, workflow
from agentswf.testing import ScriptedTurn, ToolResult, answer, approve, hang, respond, run_workflow, silent

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


@workflow(name="nudged", description="A reviewer nudged once, then out of time.")
async def nudged(wf: Workflow) -> tuple[str, bool]:
    reviewer = await wf.agents.open("reviewer", runtime="claude")
    turn = await reviewer.run("Review src/.", timeout="20m")
    return turn.outcome.kind, turn.nudged


async def test_a_nudged_reviewer_times_out_at_its_deadline():
    run = await run_workflow(nudged, agents={"reviewer": [silent(), hang()]}, timeout="1h")
    assert run.value == ("timed-out", True)
    [turn] = run.turns
    assert turn["ended_at"] - turn["started_at"] == pytest.approx(20 * 60, abs=1)


@workflow(name="slow", description="An agent that works ten minutes.")
async def slow(wf: Workflow) -> str:
    worker = await wf.agents.open("worker", runtime="claude")
    return (await worker.run("Build it.", timeout="20m")).value


async def test_a_script_works_ten_minutes_on_the_runs_clock():
    async def works(turn: ScriptedTurn) -> str:
        await turn.wait("10m")
        return "built"

    run = await run_workflow(slow, agents={"worker": answer(works)})
    assert run.value == "built"
    [turn] = run.turns
    assert turn["ended_at"] - turn["started_at"] == pytest.approx(10 * 60, abs=1)


class Merge(msgspec.Struct):
    merged: bool


@workflow(name="ask-lead", description="An implementer asks a lead, who answers five minutes later.")
async def ask_lead(wf: Workflow) -> bool:
    implementer = await wf.agents.open("implementer", runtime="codex")
    lead = await wf.participants.open("lead")
    await wf.route(implementer, lead, purpose="Ask before merging")
    return (await implementer.run("Merge once the lead agrees.", schema=Merge, timeout="1h")).value.merged


async def implementer(turn: ScriptedTurn) -> Merge | None:
    if "lead's reply" in turn.prompt:
        return Merge(merged="Merge" in turn.prompt)
    sent = await turn.send("lead", "May I merge?", await_reply=True)
    assert sent.ok, sent.stderr
    return None


async def test_a_person_answers_five_minutes_later(run_root):
    run = await run_workflow(
        ask_lead, agents={"implementer": answer(implementer)}, participants={"lead": respond("Merge it.", after="5m")},
        run_root=run_root,
    )
    assert run.value is True
    asked, replied = (line["mail"]["at"] for line in run.record.messages if "mail" in line)
    assert replied - asked == pytest.approx(5 * 60, abs=1)


@workflow(name="await-alone", description="A question nobody answers, with a deadline of its own.")
async def await_alone(wf: Workflow) -> str:
    implementer = await wf.agents.open("implementer", runtime="codex")
    lead = await wf.participants.open("lead")
    await wf.route(implementer, lead, purpose="Ask before merging")
    return (await implementer.run("Ask the lead.", timeout="2h")).value


async def test_an_await_reply_times_out_at_its_own_deadline():
    prompts: list[str] = []

    async def asks(turn: ScriptedTurn) -> None:
        sent = await turn.send("lead", "May I merge?", await_reply=True, timeout_seconds=20 * 60)
        assert sent.ok, sent.stderr

    def goes_on(turn: ScriptedTurn) -> str:
        prompts.append(turn.prompt)
        return "went on"

    started = time.monotonic()
    run = await run_workflow(await_alone, agents={"implementer": [answer(asks), answer(goes_on)]},
                             participants={"lead": respond(lambda mail: None)}, timeout="3h")
    assert time.monotonic() - started < DONE_WITHIN_SECONDS
    assert run.value == "went on"
    [turn] = run.turns
    assert turn["ended_at"] - turn["started_at"] == pytest.approx(20 * 60, abs=1)  # the question's own deadline
    assert "lead" in prompts[0]


@workflow(name="fix", description="A fixer whose tool times out, then retries.")
async def fix(wf: Workflow) -> list[str]:
    attempts: list[str] = []

    async def check(target: str) -> str:
        attempts.append(target)
        if len(attempts) == 1:
            await anyio.sleep(60 * 60)  # hangs past its time
        if len(attempts) == 2:
            raise RuntimeError("flaky")
        return "green"

    fixer = await wf.agents.open("fixer", runtime="codex", tools={
        "check": tool(check, description="Run the checks.", timeout="5m", max_attempts=2, backoff="1m"),
    })
    return [(await fixer.run("Fix it.", timeout="1h")).value, *attempts]


async def test_a_tool_times_out_then_retries_after_its_backoff(run_root):
    async def fixer(turn: ScriptedTurn) -> str:
        first = await turn.tool("check", {"target": "a"})
        second = await turn.tool("check", {"target": "b"})
        return f"{type(first).__name__}:{getattr(first, 'outcome', '')} {type(second).__name__}"

    run = await run_workflow(fix, agents={"fixer": answer(fixer)}, run_root=run_root)
    assert run.value == ["ToolFailed:timed-out ToolResult", "a", "b", "b"]
    first, second = run.record.tools
    assert first["outcome"] == "timed-out"
    assert first["ended_at"] - first["started_at"] == pytest.approx(5 * 60, abs=1)
    assert second["attempts"] == 2
    assert second["ended_at"] - second["started_at"] == pytest.approx(60, abs=1)  # its backoff


def deploy(target: str) -> str:
    return f"deployed to {target}"


@workflow(name="deploy", description="Deploys once a person approves.")
async def deploy_flow(wf: Workflow) -> str:
    deployer = await wf.agents.open("deployer", runtime="codex", tools={
        "deploy": tool(deploy, description="Deploy.", requires_approval=True, timeout="2h"),
    })
    return (await deployer.run("Deploy to staging.", timeout="3h")).value


async def test_a_person_approves_an_hour_later(run_root):
    async def deployer(turn: ScriptedTurn) -> str:
        result = await turn.tool("deploy", {"target": "staging"})
        return result.output if isinstance(result, ToolResult) else f"not deployed: {result.error}"

    run = await run_workflow(deploy_flow, agents={"deployer": answer(deployer)}, run_root=run_root, timeout="4h",
                             approvals={"deploy": approve(by="alice", after="1h")})
    assert run.value == "deployed to staging"
    [decided] = run.record.approvals
    [call] = run.record.tools
    assert decided["decision"]["by"] == "alice"
    assert call["ended_at"] - call["started_at"] == pytest.approx(60 * 60, abs=1)


@workflow(name="over-time", description="A turn longer than the run.")
async def over_time(wf: Workflow) -> str:
    worker = await wf.agents.open("worker", runtime="claude")
    return (await worker.run("Work.", timeout="2h")).outcome.kind


async def test_the_runs_timeout_ends_it_on_the_virtual_clock(run_root):
    started = time.monotonic()
    run = await run_workflow(over_time, agents={"worker": hang()}, run_root=run_root, timeout="45m")
    assert time.monotonic() - started < DONE_WITHIN_SECONDS
    assert run.outcome == "timed-out"
    output = run.record.output
    assert output["ended_at"] - output["started_at"] == pytest.approx(45 * 60, abs=5)


@workflow(name="budgeted", description="A run whose wall budget stops a turn in flight.")
async def budgeted(wf: Workflow) -> str:
    wf.budget("worker", wall="30m")
    worker = await wf.agents.open("worker", runtime="claude")
    return (await worker.run("Work.", timeout="2h")).outcome.reason


async def test_a_wall_budget_stops_a_turn_in_flight(run_root):
    run = await run_workflow(budgeted, agents={"worker": hang()}, run_root=run_root, timeout="3h")
    assert "wall time passed" in run.value
    [turn] = run.turns
    assert turn["ended_at"] - turn["started_at"] == pytest.approx(30 * 60, abs=1)


@pytest.mark.parametrize(
    "runtime",
    ['shell:"$WFA" result "$WFA_CALL_ID" <<< ok', Runtime(harness="claude", placement="pane", command=("/bin/true",))],
    ids=["shell", "pane"],
)
async def test_a_real_process_is_refused_under_virtual_time(runtime, run_root):
    @workflow(name="real", description="A real process under virtual time.")
    async def real(wf: Workflow) -> str:
        agent = await wf.agents.open("agent", runtime=runtime)
        return (await agent.run("Go.")).value

    result = await agentswf.run(real, run_root=run_root)
    assert result.outcome == "failed"
    assert "lives in real time, and this run's clock is virtual" in result.reason


@workflow(name="boxed", description="A scripted agent in a sandbox, under virtual time.")
async def boxed(wf: Workflow) -> str:
    agent = await wf.agents.open("agent", runtime="claude", sandbox={"write": ["."]})
    return (await agent.run("Go.")).value


async def test_a_sandbox_is_refused_under_virtual_time(run_root):
    run = await run_workflow(boxed, agents={"agent": answer("ok")}, run_root=run_root)
    assert run.outcome == "failed"
    assert "a sandbox lives in real time" in run.reason
