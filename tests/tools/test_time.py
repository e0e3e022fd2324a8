"""A tool call's time: its timeout, the turn's deadline, and the call's cancellation signal.

On virtual time: every time here is exact, in minutes, and passes at once."""

from __future__ import annotations

import anyio
import pytest

from agentswf import ToolCall, tool, workflow
from agentswf.testing import ToolFailed, ToolResult, answer, run_workflow
from agentswf.workflow.tools import DEFAULT_TOOL_TIMEOUT_SECONDS

from .kit import cancel_after, tool_lines

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


def _wf(fn):
    return workflow(name="t", description="A test workflow.")(fn)


def test_a_handler_has_30_seconds_by_default_or_its_own_timeout():
    assert DEFAULT_TOOL_TIMEOUT_SECONDS == 30.0
    assert tool(lambda: 1, description="d").timeout == 30.0
    assert tool(lambda: 1, description="d", timeout="2m").timeout == 120.0
    assert tool(lambda: 1, description="d", timeout=1.5).timeout == 1.5
    assert tool(lambda: 1, description="d", timeout=False).timeout is None


def _waiter(log: dict):
    async def wait(call: ToolCall) -> str:
        log["started"] = anyio.current_time()
        log["cancelled_before"] = call.cancelled
        await call.wait_cancelled()
        log["released"] = anyio.current_time()
        log["cancelled_after"] = call.cancelled
        return "released"

    return wait


async def _hang_on(turn, name):
    await turn.tool(name)
    await anyio.sleep_forever()


@pytest.mark.parametrize(
    ("timeout", "turn_timeout", "expected"),
    [
        ("3m", 600, 180),  # the call's own time
        (False, 300, 300),  # only the turn's deadline
        ("30m", 300, 300),  # the turn's deadline always bounds it
    ],
)
async def test_the_signal_fires_when_the_calls_time_is_up(tmp_path, timeout, turn_timeout, expected):
    log: dict = {}
    seen = []

    async def script(turn):
        seen.append(await turn.tool("wait"))
        return "done"

    async def fn(wf):
        agent = await wf.agents.open(
            "a", runtime="shell:true", tools={"wait": tool(_waiter(log), description="Waits.", timeout=timeout)}
        )
        started = anyio.current_time()
        turn = await agent.run("Go.", timeout=turn_timeout)
        return started, turn.outcome.kind

    run = await run_workflow(_wf(fn), agents={"a": answer(script)}, run_root=tmp_path)
    started, kind = run.value
    assert log["cancelled_before"] is False and log["cancelled_after"] is True
    assert log["released"] - started == pytest.approx(expected, abs=0.01)
    [line] = tool_lines(run.run_dir)
    assert line["outcome"] == "timed-out"
    if timeout == "3m":  # the call ran out, not the turn: the agent is told and answers
        assert kind == "answered"
        assert seen == [ToolFailed(outcome="timed-out", error=seen[0].error)]
        assert "may have run" in seen[0].error.lower()
    else:
        assert kind == "timed-out"


async def test_each_running_call_is_signalled_at_its_own_time_however_their_deadlines_come(tmp_path):
    """One watchdog keeps every call's time: a later call with an earlier deadline than the one
    it waits for is signalled at its own time, and the earlier-armed, later one at its own."""
    logs: dict[str, dict] = {"slow": {}, "quick": {}}

    async def slow_script(turn):
        await turn.tool("slow")
        return "done"

    async def quick_script(turn):
        await anyio.sleep(60)  # the slow call's deadline is armed first
        await turn.tool("quick")
        return "done"

    async def fn(wf):
        tools = {
            "slow": tool(_waiter(logs["slow"]), description="Waits.", timeout="12m"),
            "quick": tool(_waiter(logs["quick"]), description="Waits.", timeout="3m"),
        }
        agents = [await wf.agents.open(key, runtime="shell:true", tools=tools) for key in ("s", "q")]
        kinds = await wf.parallel(agents, lambda agent: agent.run("Go.", timeout="1h"))
        return [turn.outcome.kind for turn in kinds]

    run = await run_workflow(_wf(fn), agents={"s": answer(slow_script), "q": answer(quick_script)}, run_root=tmp_path)
    assert run.value == ["answered", "answered"]
    quick, slow = logs["quick"], logs["slow"]
    assert quick["released"] - quick["started"] == pytest.approx(3 * 60, abs=0.01)
    assert slow["released"] - slow["started"] == pytest.approx(12 * 60, abs=0.01)
    assert sorted(line["outcome"] for line in tool_lines(run.run_dir)) == ["timed-out", "timed-out"]


async def test_the_signal_fires_when_the_turn_ends_otherwise(tmp_path):
    log: dict = {}

    async def fn(wf):
        agent = await wf.agents.open(
            "a", runtime="shell:true", tools={"wait": tool(_waiter(log), description="Waits.", timeout=False)}
        )
        started = anyio.current_time()
        await cancel_after(180, lambda: agent.run("Go.", timeout="1h"))
        return started

    run = await run_workflow(
        _wf(fn), agents={"a": answer(lambda turn: _hang_on(turn, "wait"))}, run_root=tmp_path
    )
    assert log["cancelled_after"] is True
    assert log["released"] - run.value == pytest.approx(180, abs=0.01)
    [turn] = run.turns
    assert turn["outcome"]["kind"] == "cancelled"


async def test_a_handler_that_finishes_in_time_is_not_cancelled(tmp_path):
    calls: list[ToolCall] = []

    async def quick(call: ToolCall) -> str:
        await anyio.sleep(4 * 60)
        calls.append(call)
        return "fine"

    async def script(turn):
        assert await turn.tool("quick") == ToolResult(output="fine")
        return "done"

    async def fn(wf):
        agent = await wf.agents.open(
            "a", runtime="shell:true", tools={"quick": tool(quick, description="Quick.", timeout="5m")}
        )
        return (await agent.run("Go.", timeout="10m")).outcome.kind

    run = await run_workflow(_wf(fn), agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == "answered"
    assert calls[0].cancelled is False


async def test_a_handler_cant_run_or_close_its_own_agent_but_can_run_another(tmp_path):
    agents: dict = {}
    seen = []

    async def run_self(call: ToolCall) -> str:
        await agents["a"].run("Nested.")
        return "ran"

    async def close_self(call: ToolCall) -> str:
        await agents["a"].close()
        return "closed"

    async def ask_helper(question: str) -> str:
        turn = await agents["helper"].run(question, timeout=5)
        return turn.outcome.value

    async def script(turn):
        seen.append(await turn.tool("run_self"))
        seen.append(await turn.tool("close_self"))
        seen.append(await turn.tool("ask_helper", {"question": "What is 2+2?"}))
        return "done"

    async def fn(wf):
        agents["a"] = await wf.agents.open(
            "a",
            runtime="shell:true",
            tools={
                "run_self": tool(run_self, description="Runs its own agent."),
                "close_self": tool(close_self, description="Closes its own agent."),
                "ask_helper": tool(ask_helper, description="Asks the helper."),
            },
        )
        agents["helper"] = await wf.agents.open("helper", runtime="shell:true")
        turn = await agents["a"].run("Go.", timeout=10)
        return turn.outcome.kind, agents["a"].closed

    run = await run_workflow(
        _wf(fn), agents={"a": answer(script), "helper": answer(lambda turn: "four")}, run_root=tmp_path
    )
    assert run.value == ("answered", False)
    run_self_, close_self_, helper = seen
    assert isinstance(run_self_, ToolFailed) and run_self_.outcome == "failed"
    assert "can't run agent a" in run_self_.error and "Another agent can be run" in run_self_.error
    assert isinstance(close_self_, ToolFailed) and "can't close agent a" in close_self_.error
    assert helper == ToolResult(output="four")


async def test_a_turn_that_times_out_while_its_agent_hangs_ends_the_running_call(tmp_path):
    """The workflow keeps what the tool gave it however the turn ends (the guide's findings)."""
    got = []

    def record(item: str) -> str:
        got.append(item)
        return "kept"

    async def script(turn):
        await turn.tool("record", {"item": "one"})
        await anyio.sleep_forever()

    async def fn(wf):
        agent = await wf.agents.open("a", runtime="shell:true", tools={"record": tool(record, description="R.")})
        turn = await agent.run("Go.", timeout="20m")
        return turn.outcome.kind, list(got)

    run = await run_workflow(_wf(fn), agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == ("timed-out", ["one"])


async def test_a_handler_cant_wait_for_an_event(tmp_path):
    seen = []
    workflows: dict = {}

    async def races() -> str:
        wf = workflows["wf"]
        await wf.race()
        return "raced"

    async def selects() -> str:
        wf = workflows["wf"]
        await wf.select()
        return "selected"

    async def script(turn):
        seen.append(await turn.tool("races"))
        seen.append(await turn.tool("selects"))
        return "done"

    async def fn(wf):
        workflows["wf"] = wf
        tools = {"races": tool(races, description="R."), "selects": tool(selects, description="S.")}
        agent = await wf.agents.open("a", runtime="shell:true", tools=tools)
        return (await agent.run("Go.", timeout=10)).outcome.kind

    run = await run_workflow(_wf(fn), agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == "answered"
    for got, what in zip(seen, ("wf.race", "wf.select")):
        assert isinstance(got, ToolFailed) and got.outcome == "failed"
        assert f"{what} can't be used inside a tool handler" in got.error
