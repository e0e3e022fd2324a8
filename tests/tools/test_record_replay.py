"""The record of tool calls (tools.jsonl) and replaying a run from it."""

from __future__ import annotations

import anyio
import msgspec
import pytest

import agentswf
from agentswf import DefinitionError, ToolCall, tool, workflow
from agentswf.engine.tools.policy import deny
from agentswf.testing import answer, run_workflow
from agentswf.testing.scripted import ScriptBook

from .kit import tool_lines

pytestmark = pytest.mark.anyio


class Secret(msgspec.Struct):
    name: str
    password: str


async def test_every_call_is_recorded_with_its_input_outcome_timings_agent_and_turn(tmp_path):
    ids = []

    def login(s: Secret, call: ToolCall) -> str:
        ids.append(call.id)
        return f"hello {s.name}"

    def boom() -> str:
        raise ValueError("it broke")

    async def slow() -> str:
        await anyio.sleep(5)
        return "never"

    def no_admin(call):
        return deny("no admin") if call.tool == "admin" else None

    async def script(turn):
        await turn.tool("login", {"name": "ann", "password": "pw1"})
        await turn.tool("boom")
        await turn.tool("slow")
        await turn.tool("admin")
        return "done"

    @workflow(name="t", description="d", policies=[no_admin])
    async def fn(wf):
        tools = {
            "login": tool(login, input=Secret, description="L.", sensitive_fields=["password"]),
            "boom": tool(boom, description="B."),
            "slow": tool(slow, description="S.", timeout="0.2s"),
            "admin": tool(lambda: "root", description="A."),
        }
        agent = await wf.agents.open("rev", runtime="shell:true", tools=tools)
        turn = await agent.run("Go.")
        return turn.call_id

    run = await run_workflow(fn, agents={"rev": answer(script)}, run_root=tmp_path)
    turn_call_id = run.value
    lines = tool_lines(run.run_dir)
    assert [line["tool"] for line in lines] == ["login", "boom", "slow", "admin"]
    login_, boom_, slow_, admin_ = lines
    assert login_["call_id"] == ids[0]
    assert login_["input"] == {"name": "ann", "password": "[redacted]"}
    assert (login_["outcome"], login_["result"], login_["error"]) == ("result", "hello ann", "")
    assert (boom_["outcome"], boom_["error"], boom_["result"]) == ("failed", "it broke", None)
    assert boom_["input"] == {}
    assert slow_["outcome"] == "timed-out" and "may have run" in slow_["error"].lower()
    assert 0.15 <= slow_["ended_at"] - slow_["started_at"] < 2
    assert (admin_["outcome"], admin_["code"], admin_["error"]) == ("refused", "denied", "no admin")
    for line in lines:
        assert line["agent"] == "rev" and line["turn_call_id"] == turn_call_id
        assert 0 < line["started_at"] <= line["ended_at"]
    assert len({line["call_id"] for line in lines}) == 4

    # awf logs shows each call under its turn, its input redacted
    import io

    from agentswf.cli.logs import print_run

    shown = io.StringIO()
    print_run(run.run_dir, shown)
    text = shown.getvalue()
    for name in ("login", "boom", "slow", "admin"):
        assert name in text
    assert "it broke" in text and "hello ann" in text and "pw1" not in text


# Replay --------------------------------------------------------------------------------

COUNTER = {"n": 0}


class Item(msgspec.Struct):
    item: str


def _count(x: Item) -> int:
    COUNTER["n"] += 1
    return COUNTER["n"]


def _fail(x: Item) -> str:
    COUNTER["n"] += 100
    raise RuntimeError(f"{x.item} failed")


@workflow(name="counting", description="A tool with a side effect.")
async def counting(wf) -> list:
    agent = await wf.agents.open(
        "a",
        runtime="shell:true",
        tools={"count": tool(_count, input=Item, description="Count."), "fail": tool(_fail, input=Item, description="F.")},
    )
    turn = await agent.run("Count.")
    return turn.outcome.value


def _reads(items):
    async def script(turn):
        got = []
        for name, item in items:
            got.append(msgspec.to_builtins(await turn.tool(name, {"item": item})))
        return msgspec.json.encode(got).decode()

    return script


async def _replay(record, items, tmp_path):
    book = ScriptBook({"a": answer(_reads(items))})
    result = await agentswf.run(
        counting, run_root=tmp_path / "replayed", cwd=tmp_path, harnesses=book.harness_for, replay=record
    )
    book.check()
    assert result.outcome == "completed", result.reason
    return msgspec.json.decode(result.value), result


async def test_a_replayed_run_answers_from_the_record_and_no_handler_runs(tmp_path):
    COUNTER["n"] = 0
    items = [("count", "x"), ("count", "y"), ("count", "x"), ("fail", "z")]
    first = await run_workflow(counting, agents={"a": answer(_reads(items))}, run_root=tmp_path / "first")
    recorded = msgspec.json.decode(first.value)
    assert [r.get("output") for r in recorded[:3]] == [1, 2, 3]
    assert recorded[3] == {"kind": "failed", "outcome": "failed", "error": "z failed"}
    assert COUNTER["n"] == 103

    replayed, result = await _replay(first.run_dir, items, tmp_path)
    assert COUNTER["n"] == 103  # no handler ran
    assert replayed == recorded  # the same answers, in order per input
    lines = tool_lines(result.run_dir)
    assert [line["result"] for line in lines[:3]] == [1, 2, 3]
    assert (result.run_dir / "run.json").exists()


async def test_a_call_not_in_the_record_fails_with_a_clear_message(tmp_path):
    COUNTER["n"] = 0
    first = await run_workflow(counting, agents={"a": answer(_reads([("count", "x")]))}, run_root=tmp_path / "first")
    assert COUNTER["n"] == 1

    replayed, _ = await _replay(first.run_dir, [("count", "x"), ("count", "x"), ("count", "new")], tmp_path)
    assert COUNTER["n"] == 1
    assert replayed[0] == {"kind": "result", "output": 1}
    for got, what in ((replayed[1], "x"), (replayed[2], "new")):
        assert got["kind"] == "failed" and got["outcome"] == "failed"
        assert "replay" in got["error"] and "no further call of count by a" in got["error"], what


async def test_replay_of_a_directory_that_is_not_a_run_is_refused(tmp_path):
    with pytest.raises(DefinitionError, match="not a run"):
        await agentswf.run(counting, run_root=tmp_path, cwd=tmp_path, replay=tmp_path / "nothing")
