"""fork, compact, set and stop on scripted agents: every rule and refusal, through the real engine."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from agentswf import ToolCall, tool, workflow
from agentswf.errors import AgentClosed, DefinitionError, WorkflowError
from agentswf.testing import answer, failed, hang, run_workflow, silent

pytestmark = pytest.mark.anyio


def flow(fn):
    return workflow(name="ops", description="operations on an agent")(fn)


async def test_set_switches_later_turns_and_every_turn_records_its_settings(tmp_path):
    @flow
    async def ops(wf):
        a = await wf.agents.open("a", runtime="claude")
        await a.run("one")
        switched = await a.set(model="opus", effort="high")
        await a.run("two")
        return switched.outcome.kind, a.model, a.effort

    run = await run_workflow(ops, agents={"a": answer("x")}, run_root=tmp_path)
    assert run.value == ("answered", "opus", "high")
    turns = run.turns_of("a")
    assert [(t["model"], t["effort"]) for t in turns] == [(None, None), ("opus", "high")]
    assert [(s["model"], s["effort"]) for s in run.sets_of("a")] == [("opus", "high")]


@pytest.mark.parametrize(
    ("runtime", "kwargs", "match"),
    [
        ("claude", {"effort": "minimal"}, "claude has no effort 'minimal'; its levels are low"),
        ("shell:true", {"model": "x"}, "shell can't switch model or effort: a program has no model"),
        ("cursor", {"effort": "high"}, "cursor can't take effort='high': cursor has no effort flag"),
        ("claude", {}, "set needs a model or an effort"),
    ],
)
async def test_set_is_refused_before_it_runs(tmp_path, runtime, kwargs, match):
    @flow
    async def ops(wf):
        a = await wf.agents.open("a", runtime=runtime)
        with pytest.raises(DefinitionError, match=match):
            await a.set(**kwargs)
        return len(run_sets())

    def run_sets():
        return []

    run = await run_workflow(ops, agents={"a": answer("x")}, run_root=tmp_path)
    assert run.value == 0
    assert run.sets_of("a") == []


async def test_unscripted_compaction_answers_empty_and_takes_no_turn_entry(tmp_path):
    @flow
    async def ops(wf):
        a = await wf.agents.open("a", runtime="claude")
        await a.run("one")
        first = await a.compact("keep the plan", id="c1")
        again = await a.compact("keep the plan", id="c1")
        with pytest.raises(DefinitionError, match="compaction id 'c1' was reused with a different focus"):
            await a.compact("another focus", id="c1")
        await a.run("two")
        return first.outcome.kind, first.value, again is first

    run = await run_workflow(ops, agents={"a": [answer("x"), answer("y")]}, run_root=tmp_path)
    assert run.value == ("answered", "", True)
    assert [c["outcome"]["kind"] for c in run.compactions_of("a")] == ["answered"]
    assert len(run.turns_of("a")) == 2


@pytest.mark.virtual_time
async def test_scripted_compactions_and_a_compaction_timeout_leaves_the_agent_usable(tmp_path):
    @flow
    async def ops(wf):
        a = await wf.agents.open("a", runtime="claude")
        await a.run("one")
        summary = await a.compact("focus")
        hung = await a.compact("focus", timeout="10m")
        unconfirmed = await a.compact("focus")
        broke = await a.compact("focus")
        after = await a.run("two")
        return [summary.value, hung.outcome.kind, unconfirmed.outcome.reason, broke.outcome.kind, after.value]

    run = await run_workflow(
        ops, agents={"a": answer("x")}, run_root=tmp_path,
        compactions={"a": [answer("the summary"), hang(), silent(), failed("boom")]},
    )
    assert run.value == ["the summary", "timed-out", "the harness did not confirm a compaction", "failed", "x"]
    hung = run.compactions_of("a")[1]
    assert hung["ended_at"] - hung["started_at"] == pytest.approx(10 * 60, abs=1)


async def test_a_harness_that_cant_compact_fails_at_once(tmp_path):
    @flow
    async def ops(wf):
        a = await wf.agents.open("a", runtime="cursor")
        await a.run("one")
        turn = await a.compact("focus")
        return turn.outcome.kind, turn.outcome.reason

    run = await run_workflow(ops, agents={"a": answer("x")}, run_root=tmp_path, compactions={"a": [failed("never")]})
    kind, reason = run.value
    assert kind == "failed" and "headless cursor has no compaction" in reason


async def test_fork_inherits_and_has_its_own_script_socket_and_key(tmp_path):
    seen: dict[str, object] = {}

    def counting(n: int) -> str:
        """Count."""
        return str(n)

    def fork_script(turn):
        seen["fork_launcher"] = turn.launcher
        return "from fork"

    @flow
    async def ops(wf):
        a = await wf.agents.open("a", runtime="claude", tools={"count": tool(counting)})
        await a.run("one")
        await a.set(effort="max")
        b = await a.fork("b")
        same = await a.fork("b")
        none = await a.fork("c", tools={})
        given_none = await a.fork("d", tools=None)  # as leaving it out: the parent's tools
        with pytest.raises(DefinitionError, match="already open, not as this fork of a"):
            await a.fork("b", instructions="other")
        turn = await b.run("go")
        return [same is b, sorted(b.tools), none.tools, sorted(given_none.tools), b.effort, b.launcher != a.launcher,
                turn.value]

    run = await run_workflow(
        ops, agents={"a": answer("x"), "b": answer(fork_script), "c": [], "d": []}, run_root=tmp_path
    )
    assert run.value == [True, ["count"], {}, ["count"], "max", True, "from fork"]
    [fork] = [line for line in run.turns_of("a", "fork") if line["outcome"]["value"] == "b"]
    [turn] = run.turns_of("b")
    assert turn["forked_from"] == "a" and turn["effort"] == "max" and turn["session"] == fork["session"]


async def test_fork_refusals(tmp_path):
    @flow
    async def ops(wf):
        a = await wf.agents.open("a", runtime="claude")
        with pytest.raises(DefinitionError, match="an agent cannot be forked before its first turn"):
            await a.fork("b")
        s = await wf.agents.open("s", runtime="shell:true")
        await s.run("one")
        with pytest.raises(DefinitionError, match="can't be forked: a shell agent has no session"):
            await s.fork("t")
        x = await wf.agents.open("x", runtime="cursor")
        await x.run("one")
        with pytest.raises(DefinitionError, match="can't be forked: not verified: cursor-agent"):
            await x.fork("y")
        await a.run("one")
        with pytest.raises(DefinitionError, match="already open, not as this fork of a"):
            await a.fork("s")
        await a.close()
        with pytest.raises(AgentClosed):
            await a.fork("z")
        return "ok"

    run = await run_workflow(ops, agents={"a": answer("x"), "s": answer("x"), "x": answer("x")}, run_root=tmp_path)
    assert run.value == "ok"


async def test_fork_is_copied_after_what_was_queued_before_it(tmp_path):
    order: list[str] = []

    def parent(turn):
        order.append(f"a:{turn.prompt.split()[0]}")
        return "x"

    @flow
    async def ops(wf):
        a = await wf.agents.open("a", runtime="claude")
        async with anyio.create_task_group() as group:
            group.start_soon(a.run, "first")
            await anyio.lowlevel.checkpoint()
            forking: list = []

            async def fork() -> None:
                forking.append(await a.fork("b"))
                order.append("forked")

            group.start_soon(fork)
            await anyio.lowlevel.checkpoint()
            group.start_soon(a.run, "second")
        return order

    run = await run_workflow(ops, agents={"a": answer(parent), "b": []}, run_root=tmp_path)
    value = run.value
    assert value.index("forked") < value.index("a:second") or value[-1] == "forked"
    kinds = [t.get("kind") for t in run.turns if t["agent"] == "a"]
    assert kinds == ["turn", "fork", "turn"]


async def test_stop_cancels_the_turn_in_flight_and_refuses_after(tmp_path):
    @flow
    async def ops(wf):
        a = await wf.agents.open("a", runtime="claude")
        outcome: list = []

        async def long() -> None:
            outcome.append(await a.run("hang"))

        async with anyio.create_task_group() as group:
            group.start_soon(long)
            await anyio.sleep(0.2)
            assert await wf.agents.stop("a", "no longer needed") is True
        assert await wf.agents.stop("a") is False
        assert await wf.agents.stop("nobody") is False
        for operation in (a.run("x"), a.compact("f"), a.set(effort="low"), a.fork("b")):
            with pytest.raises(AgentClosed, match=r"agent a was stopped \(no longer needed\)"):
                await operation
        with pytest.raises(DefinitionError, match="was stopped"):
            await wf.agents.open("a", runtime="claude")
        return outcome[0].outcome.kind, outcome[0].outcome.reason

    run = await run_workflow(ops, agents={"a": hang()}, run_root=tmp_path)
    assert run.value == ("cancelled", "the agent was stopped: no longer needed")
    assert [t["outcome"]["kind"] for t in run.turns_of("a", "stop")] == ["cancelled"]


async def test_operations_throw_inside_the_agents_own_tool_handler(tmp_path):
    caught: list[str] = []

    async def poke(wf_agent) -> str:
        return ""

    @flow
    async def ops(wf):
        holder: dict = {}

        async def handler(n: int) -> str:
            """Poke."""
            a = holder["a"]
            for call in (lambda: a.compact("f"), lambda: a.set(effort="low"), lambda: a.fork("b"),
                         lambda: wf.agents.stop("a")):
                try:
                    await call()
                except WorkflowError as error:
                    caught.append(str(error).split(":")[0])
            return "ok"

        holder["a"] = await wf.agents.open("a", runtime="claude", tools={"poke": tool(handler)})
        await holder["a"].run("go")
        return caught

    async def script(turn):
        await turn.tool("poke", {"n": 1})
        return "done"

    run = await run_workflow(ops, agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == [f"a tool handler can't {what} agent a" for what in ("compact", "set", "fork", "stop")]


async def test_a_forks_answers_go_through_its_own_socket_and_its_calls_are_its_own(tmp_path):
    callers: list[str] = []
    parent_call: dict[str, str] = {}

    def whoami(n: int, call: ToolCall) -> str:
        """Who called."""
        callers.append(call.agent)
        return call.agent

    def parent_script(turn):
        parent_call["id"] = turn.call_id
        return "x"

    async def fork_script(turn):
        foreign = await turn.request("result", call_id=parent_call["id"], args=[], input='"stolen"')
        await turn.tool("whoami", {"n": 1})
        return foreign.code

    @flow
    async def ops(wf):
        a = await wf.agents.open("a", runtime="claude", tools={"whoami": tool(whoami)})
        await a.run("one")
        b = await a.fork("b")
        return (await b.run("go")).value

    run = await run_workflow(ops, agents={"a": answer(parent_script), "b": answer(fork_script)}, run_root=tmp_path)
    assert run.value == "wrong-agent"
    assert callers == ["b"]


async def test_awf_logs_shows_each_operation_among_the_turns(tmp_path):
    import io

    from agentswf.cli.logs import print_run

    @flow
    async def ops(wf):
        a = await wf.agents.open("a", runtime="claude")
        await a.run("one")
        await a.compact("keep it")
        await a.set(effort="high")
        b = await a.fork("b")
        await b.run("two")
        await wf.agents.stop("b", "enough")
        return "ok"

    run = await run_workflow(
        ops, agents={"a": answer("x"), "b": answer("y")}, run_root=tmp_path, compactions={"a": [answer("the gist")]}
    )
    out = io.StringIO()
    print_run(run.run_dir, out)
    text = out.getvalue()
    assert "a compaction [" in text and "summary: the gist" in text
    assert "a set [" in text and "(effort high)" in text
    assert "forked into b" in text and "a fork of a" in text
    assert "b stop [" in text and "the agent was stopped: enough" in text


async def test_a_fork_is_forked_only_after_its_own_first_turn(tmp_path):
    @flow
    async def ops(wf):
        a = await wf.agents.open("a", runtime="claude")
        await a.run("one")
        b = await a.fork("b")
        with pytest.raises(DefinitionError, match="an agent cannot be forked before its first turn"):
            await b.fork("c")
        await b.run("two")
        c = await b.fork("c")
        return (await c.run("three")).value

    run = await run_workflow(ops, agents={"a": answer("x"), "b": answer("y"), "c": answer("z")}, run_root=tmp_path)
    assert run.value == "z"
    assert run.turns_of("c")[0]["forked_from"] == "b"
