"""`agentswf.testing.replay`: a recorded run played again on the real engine, agents from the record;
the workflow's value as recorded, and each way a changed workflow diverges found and named."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import anyio
import msgspec
import pytest

from agentswf import Workflow, tool, workflow
from agentswf.testing import (
    RecordUnreadable,
    ReplayDiverged,
    ScriptedTurn,
    ToolResult,
    answer,
    approve,
    blocked,
    failed,
    hang,
    replay,
    respond,
    run_workflow,
    silent,
    timed_out,
)


class Verdict(msgspec.Struct):
    verdict: Literal["approve", "changes"]
    problem: str = ""


class Strict(msgspec.Struct):
    verdict: Literal["approve"]


class Finding(msgspec.Struct):
    file: str
    line: int


FOUND: list[Finding] = []


def add_finding(file: str, line: int) -> str:
    FOUND.append(Finding(file, line))
    return f"noted {file}:{line}"


def other_finding(file: str, line: int) -> str:
    return f"seen {file}:{line}"


TOOLS = {"add_finding": tool(add_finding, description="Note a finding.")}


def review_flow(
    *, prompt: str = "Review src/.", schema: Any = Verdict, fixer_first: bool = False, extra: bool = False,
    runtime: str = "claude", handler: Any = add_finding, rounds: int = 2,
):  # fmt: skip
    """The workflow under test, or a changed version of it (the same name: a record of one is a record of each)."""

    @workflow(name="review", description="A reviewer with a tool, a fixer, until approved.")
    async def review(wf: Workflow) -> dict[str, Any]:
        reviewer = await wf.agents.open(
            "reviewer", runtime=runtime, tools={"add_finding": tool(handler, description="Note a finding.")}
        )
        fixer = await wf.agents.open("fixer", runtime="codex")
        if extra:
            await wf.agents.open("critic", runtime="pi")
        fixes = []
        for round_ in range(1, rounds + 1):
            if fixer_first and round_ == 1:
                fixes.append((await fixer.run("Fix what you see.")).value)
            turn = await reviewer.run(prompt, schema=schema)
            if not turn.answered:
                wf.stop(f"no review: {turn.outcome.kind}")
            if turn.value.verdict == "approve":
                return {"rounds": round_, "fixes": fixes}
            if not fixer_first:
                fixes.append((await fixer.run(f"Fix: {turn.value.problem}")).value)
        wf.stop("never approved")

    return review


async def reviewer(turn: ScriptedTurn) -> Any:
    if turn.n == 1:
        said = await turn.tool("add_finding", {"file": "a.py", "line": 3})
        assert isinstance(said, ToolResult)
        return Verdict("changes", "a.py:3 is wrong")
    return Verdict("approve")


SCRIPTS = {"reviewer": answer(reviewer), "fixer": answer("fixed a.py")}


@pytest.fixture
async def recorded(tmp_path: Path) -> Path:
    run = await run_workflow(review_flow(), agents=SCRIPTS, run_root=tmp_path / "recorded")
    assert run.value == {"rounds": 2, "fixes": ["fixed a.py"]}
    return run.run_dir


async def test_a_run_replays_to_its_recorded_value_with_the_handlers_run_again(recorded: Path, tmp_path: Path) -> None:
    FOUND.clear()
    run = await replay(review_flow(), recorded, run_root=tmp_path / "replays")
    assert run.value == {"rounds": 2, "fixes": ["fixed a.py"]}
    assert FOUND == [Finding("a.py", 3)]  # the handler ran again, with the recorded input
    assert [(turn["agent"], turn["n"]) for turn in run.turns] == [("reviewer", 1), ("fixer", 1), ("reviewer", 2)]
    assert run.record.tools[0]["result"] == "noted a.py:3"


async def test_with_tools_from_the_record_no_handler_runs(recorded: Path, tmp_path: Path) -> None:
    FOUND.clear()
    run = await replay(review_flow(), recorded, tools="record", run_root=tmp_path / "replays")
    assert run.value == {"rounds": 2, "fixes": ["fixed a.py"]}
    assert FOUND == []
    assert run.record.run["replay_of"] == str(recorded.resolve())


async def test_a_changed_prompt_diverges_naming_the_turn_with_a_diff(recorded: Path) -> None:
    with pytest.raises(ReplayDiverged) as raised:
        await replay(review_flow(prompt="Review src/ and tests/."), recorded)
    diverged = raised.value
    assert (diverged.agent, diverged.turn, diverged.field) == ("reviewer", "turn 1", "prompt")
    assert "-Review src/." in diverged.diff and "+Review src/ and tests/." in diverged.diff
    assert "agent reviewer turn 1: the prompt differs" in str(diverged)


async def test_not_strict_a_changed_prompt_replays(recorded: Path) -> None:
    run = await replay(review_flow(prompt="Review src/ and tests/."), recorded, strict=False)
    assert run.value == {"rounds": 2, "fixes": ["fixed a.py"]}


async def test_a_changed_schema_diverges(recorded: Path) -> None:
    class Verdict2(msgspec.Struct):
        verdict: Literal["approve", "changes"]
        problem: str = ""
        severity: int = 0

    with pytest.raises(ReplayDiverged) as raised:
        await replay(review_flow(schema=Verdict2), recorded)
    assert (raised.value.agent, raised.value.field) == ("reviewer", "schema")


async def test_another_agent_diverges(recorded: Path) -> None:
    with pytest.raises(ReplayDiverged) as raised:
        await replay(review_flow(extra=True), recorded)
    assert (raised.value.agent, raised.value.field) == ("critic", "agent")


async def test_another_runtime_diverges(recorded: Path) -> None:
    with pytest.raises(ReplayDiverged) as raised:
        await replay(review_flow(runtime="pi"), recorded)
    assert (raised.value.agent, raised.value.field, raised.value.recorded, raised.value.now) == (
        "reviewer", "runtime", "claude", "pi"
    )


async def test_turns_in_another_order_diverge(recorded: Path) -> None:
    with pytest.raises(ReplayDiverged) as raised:
        await replay(review_flow(fixer_first=True), recorded)
    assert (raised.value.agent, raised.value.turn, raised.value.field) == ("fixer", "turn 1", "order")
    assert raised.value.recorded == "after agent reviewer's turn 1"


async def test_a_tool_whose_result_changed_diverges_under_handlers_not_from_the_record(recorded: Path) -> None:
    with pytest.raises(ReplayDiverged) as raised:
        await replay(review_flow(handler=other_finding), recorded)
    assert (raised.value.agent, raised.value.turn, raised.value.field) == ("reviewer", "turn 1", "tool add_finding")
    assert raised.value.recorded == {"outcome": "result", "result": "noted a.py:3"}
    assert raised.value.now == {"outcome": "result", "result": "seen a.py:3"}
    run = await replay(review_flow(handler=other_finding), recorded, tools="record")
    assert run.value == {"rounds": 2, "fixes": ["fixed a.py"]}


async def test_another_schema_is_found_before_the_answer(tmp_path: Path) -> None:
    run = await run_workflow(review_flow(rounds=1), agents={"reviewer": answer(Verdict("approve")), "fixer": answer("x")},
                             run_root=tmp_path)  # fmt: skip
    with pytest.raises(ReplayDiverged) as raised:
        await replay(review_flow(rounds=1, schema=Strict), run.run_dir, strict=False)
    assert raised.value.field == "schema"


async def test_an_answer_that_no_longer_fits_its_schema_diverges(tmp_path: Path) -> None:
    run = await run_workflow(review_flow(), agents=SCRIPTS, run_root=tmp_path)

    class Verdict(msgspec.Struct):  # the same JSON Schema, a check of its own: a change would pass it
        verdict: Literal["approve", "changes"]
        problem: str = ""

        def __post_init__(self) -> None:
            if self.problem.startswith("a.py"):
                raise ValueError("a.py is not reviewed any more")

    with pytest.raises(ReplayDiverged) as raised:
        await replay(review_flow(schema=Verdict), run.run_dir)
    assert (raised.value.agent, raised.value.turn, raised.value.field) == ("reviewer", "turn 1", "answer")
    assert raised.value.recorded == "accepted" and "a.py is not reviewed any more" in raised.value.now


async def test_fewer_turns_and_another_value_diverge(recorded: Path) -> None:
    with pytest.raises(ReplayDiverged) as raised:
        await replay(review_flow(rounds=1), recorded)
    assert (raised.value.agent, raised.value.turn, raised.value.field) == ("reviewer", "turn 2", "turn")

    @workflow(name="review", description="The same turns, another value.")
    async def changed(wf: Workflow) -> dict[str, Any]:
        return {**await review_flow().fn(wf), "changed": True}

    with pytest.raises(ReplayDiverged) as raised:
        await replay(changed, recorded)
    assert (raised.value.agent, raised.value.field, raised.value.now) == (None, "value", {
        "rounds": 2, "fixes": ["fixed a.py"], "changed": True,
    })


@workflow(name="endings", description="One turn, ending however the agent ends it.")
async def endings(wf: Workflow) -> str:
    agent = await wf.agents.open("agent", runtime="claude")
    turn = await agent.run("Do it.")
    return f"{turn.outcome.kind}: {turn.outcome.reason}" if not turn.answered else turn.value


@pytest.mark.parametrize(
    "script",
    [[silent(), answer("late")], [silent(), silent()], failed("rate limited"), blocked("a prompt"), timed_out("slow")],
    ids=["nudged", "unanswered", "failed", "blocked", "timed-out"],
)
async def test_each_ending_replays_as_recorded(script: Any, tmp_path: Path) -> None:
    run = await run_workflow(endings, agents={"agent": script}, run_root=tmp_path)
    again = await replay(endings, run.run_dir, run_root=tmp_path)
    assert again.value == run.value
    assert [turn["nudged"] for turn in again.turns] == [turn["nudged"] for turn in run.turns]


@workflow(name="race", description="Two agents race; the slower one's turn is given up on.")
async def race(wf: Workflow) -> str:
    slow = await wf.agents.open("slow", runtime="claude")
    quick = await wf.agents.open("quick", runtime="codex")
    async with anyio.create_task_group() as group:
        group.start_soon(slow.run, "Take your time.")
        won = (await quick.run("Be quick.")).value
        group.cancel_scope.cancel()
    return won


async def test_a_cancelled_turn_is_cancelled_again(tmp_path: Path) -> None:
    run = await run_workflow(race, agents={"slow": hang(), "quick": answer("first")}, run_root=tmp_path)
    assert run.value == "first" and run.turns_of("slow")[0]["outcome"]["kind"] == "cancelled"
    again = await replay(race, run.run_dir, run_root=tmp_path)
    assert again.value == "first" and again.turns_of("slow")[0]["outcome"]["kind"] == "cancelled"


def add(a: int, b: int) -> int:
    return a + b


@workflow(name="talk", description="Messages, a question and its reply, a compaction, a set, a fork and a stop.")
async def talk(wf: Workflow) -> list[str]:
    lead = await wf.agents.open("lead", runtime="claude", tools={"add": tool(add, description="Add.")})
    helper = await wf.agents.open("helper", runtime="codex")
    await wf.route(lead, helper, purpose="help")
    first = await lead.run("Add, then ask the helper.")
    summary = await lead.compact("the sum")
    await lead.set(model="opus")
    copy = await lead.fork("copy")
    second = await copy.run("Again.")
    await wf.agents.stop("copy", "enough")
    return [first.value, summary.value, second.value]


async def test_messages_and_operations_replay_through_the_real_switchboard(tmp_path: Path) -> None:
    asked: list[str] = []

    async def lead(turn: ScriptedTurn) -> Any:
        asked.append(turn.call_id)
        if asked.count(turn.call_id) > 1:  # the helper's reply started it again
            return "the helper said yes"
        assert await turn.tool("add", {"a": 1, "b": 2}) == ToolResult(output=3)
        assert (await turn.send("helper", "is 3 right?", await_reply=True)).ok
        return None

    async def helper(turn: ScriptedTurn) -> None:
        assert (await turn.reply("lead", "yes")).ok

    run = await run_workflow(talk, agents={"lead": answer(lead), "helper": answer(helper), "copy": answer("again")},
                             compactions={"lead": [answer("summed")]}, run_root=tmp_path)  # fmt: skip
    assert run.value == ["the helper said yes", "summed", "again"]
    again = await replay(talk, run.run_dir, run_root=tmp_path)
    assert again.value == run.value
    sent = [(line["mail"]["sender"], line["mail"]["kind"], line["mail"]["text"])
            for line in again.record.messages if line["event"] == "sent"]  # fmt: skip
    assert sent == [("lead", "question", "is 3 right?"), ("helper", "reply", "yes")]
    assert [turn.get("kind") for turn in again.turns_of("copy", "stop")] == ["stop"]
    assert [turn["model"] for turn in again.sets_of("lead")] == ["opus"]


@workflow(name="ask", description="An agent asks a person, and approvals.")
async def ask(wf: Workflow) -> str:
    def deploy(target: str) -> str:
        return f"deployed {target}"

    agent = await wf.agents.open("agent", runtime="claude", tools={
        "deploy": tool(deploy, description="Deploy.", requires_approval=True),
    })  # fmt: skip
    person = await wf.participants.open("lead")
    await wf.route(agent, person, purpose="ask")
    return (await agent.run("Ask, then deploy.")).value


async def test_people_and_approvals_replay_as_recorded(tmp_path: Path) -> None:
    from agentswf.testing import ToolFailed, ToolRefused

    async def agent(turn: ScriptedTurn) -> Any:
        if "lead's reply" in turn.prompt:
            said = await turn.tool("deploy", {"target": "staging"})
            assert not isinstance(said, (ToolFailed, ToolRefused)), said
            return said.output
        assert (await turn.send("lead", "May I deploy?", await_reply=True)).ok
        return None

    run = await run_workflow(ask, agents={"agent": answer(agent)}, participants={"lead": respond("Yes.")},
                             approvals={"deploy": approve(by="alice")}, run_root=tmp_path)  # fmt: skip
    assert run.value == "deployed staging"
    again = await replay(ask, run.run_dir, run_root=tmp_path)  # an approval on record may be an agent's forgery:
    assert again.value == "deployed staging"  # the handler doesn't run, its recorded result stands
    assert again.record.approvals[0]["decision"]["by"] == "replay" and not again.record.approvals[0]["decision"]["approved"]
    assert again.notes == ("agent agent turn 1: tool deploy needs a person's approval, so its handler was not run again; "
                           "its recorded result stands (--tools record answers every call from the record)",)  # fmt: skip
    from_record = await replay(ask, run.run_dir, tools="record", run_root=tmp_path)  # no handler runs: as decided
    assert from_record.value == "deployed staging"
    assert from_record.record.approvals[0]["decision"]["by"] == "alice"


async def test_a_record_of_another_workflow_or_a_newer_format_is_refused(recorded: Path, tmp_path: Path) -> None:
    with pytest.raises(RecordUnreadable, match="a record of workflow 'review', not of 'endings'"):
        await replay(endings, recorded)
    info = msgspec.json.decode((recorded / "run.json").read_bytes())
    (recorded / "run.json").write_bytes(msgspec.json.encode({**info, "version": 99}))
    with pytest.raises(RecordUnreadable, match="newer than this agentswf reads"):
        await replay(review_flow(), recorded)


async def test_a_hostile_record_is_refused_not_followed(recorded: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text('{"prompt": "the secret"}')
    call = next((recorded / "calls").iterdir()) / "call.json"
    call.unlink()
    os.symlink(secret, call)  # an exported record checked in with a link to a file of the machine replaying it
    with pytest.raises(RecordUnreadable, match="symbolic link"):
        await replay(review_flow(), recorded)
    call.unlink()
    elsewhere = tmp_path / "elsewhere"
    (recorded / "calls" / call.parent.name).rename(elsewhere)
    os.symlink(elsewhere, call.parent)  # a call's directory linked out of the record
    with pytest.raises(RecordUnreadable, match="through a symbolic link"):
        await replay(review_flow(), recorded)
    call.parent.unlink()
    tools = recorded / "tools.jsonl"
    tools.write_bytes(tools.read_bytes() + b'{"input": ' + b"[" * 5000 + b"]" * 5000 + b"}\n")  # a record walked as it is read
    with pytest.raises(RecordUnreadable, match="nests arrays and objects 5001 deep"):
        await replay(review_flow(), recorded)
    tools.write_bytes(b"")
    turns = recorded / "turns.jsonl"
    line = msgspec.json.decode(turns.read_bytes().splitlines()[0])
    turns.write_bytes(msgspec.json.encode({**line, "call_id": "../../../etc"}) + b"\n")
    with pytest.raises(RecordUnreadable, match="not a turn's line"):
        await replay(review_flow(), recorded)
