"""Every tool call is a message to the ToolBroker and every record line a message to the
Recorder, so a run's mailbox trace (`awf run --trace`, `awf trace RUN --actors`) shows each:
handled in the asker's task when the actor would do nothing else first (`inline: true`), but
a mailbox event all the same."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import agentswf
from agentswf import tool, workflow
from agentswf.actors import capture_trace
from agentswf.cli.actors import print_actors
from agentswf.testing import ToolResult, answer, run_workflow

from .kit import tool_lines

pytestmark = pytest.mark.anyio
CALLS = 3


@tool(description="Echo.")
async def echo(n: int) -> int:
    return n


@workflow(name="t", description="Calls in turn.")
async def calls(wf) -> str:  # type: ignore[no-untyped-def]
    agent = await wf.agents.open("a", runtime="codex", tools={"echo": echo})
    return (await agent.run("Go.", timeout="60s", nudge=False)).outcome.kind


def _handled(events: list[dict], actor: str, kind: str) -> list[dict]:
    return [e for e in events if e["event"] in {"mailbox.handled", "handled"} and e["actor"] == actor and e["message_type"] == kind]


async def test_each_tool_call_and_each_record_line_is_a_mailbox_event(tmp_path: Path) -> None:
    async def play(turn) -> str:  # type: ignore[no-untyped-def]
        for n in range(CALLS):
            assert await turn.tool("echo", {"n": n}) == ToolResult(output=n)
        return "done"

    with capture_trace() as events:
        run = await run_workflow(calls, agents={"a": answer(play)}, run_root=tmp_path)
    assert run.value == "answered"
    assert len(tool_lines(run.run_dir)) == CALLS
    assert len(_handled(events, "tools", "RunTool")) == CALLS  # each call, asked of the broker
    assert len(_handled(events, "recorder", "ToolCalled")) == CALLS  # each call's line
    assert len(_handled(events, "recorder", "CandidateSeen")) == 1  # the answer's line
    assert len(_handled(events, "recorder", "TurnEnded")) == 1
    enqueued = [e for e in events if e["event"] == "mailbox.enqueue" and e["message_type"] in {"RunTool", "ToolCalled"}]
    assert len(enqueued) == 2 * CALLS


ANSWER_AFTER_A_CALL = 'shell:"$WFA" tool echo --n 7 && echo fine | "$WFA" result "$WFA_CALL_ID"'


@workflow(name="traced-call", description="A shell agent calls a tool once, then answers.")
async def traced_call(wf) -> str:  # type: ignore[no-untyped-def]
    agent = await wf.agents.open("a", runtime=ANSWER_AFTER_A_CALL, tools={"echo": echo})
    return (await agent.run("Call echo, then say fine.")).value


async def test_awf_trace_actors_shows_the_call_and_its_line(tmp_path: Path) -> None:
    result = await agentswf.run(traced_call, run_root=tmp_path, cwd=tmp_path, trace=True)
    assert result.completed and result.value == "fine", result.reason
    events = [json.loads(line) for line in (result.run_dir / "actors.jsonl").read_text().splitlines()]
    assert len(_handled(events, "tools", "RunTool")) == 1
    assert len(_handled(events, "recorder", "ToolCalled")) == 1
    summary = json.loads((result.run_dir / "actors.json").read_text())
    assert summary["actors"]["tools"]["handled"] == 1
    shown = io.StringIO()
    print_actors(result.run_dir, shown)
    tools_row = next(line for line in shown.getvalue().splitlines() if line.startswith("tools "))
    assert tools_row.split()[1] == "1"  # HANDLED
