"""A tool call's path through the agent's actor: while the actor is idle its start and end
are stepped in the connection's task (no mailbox round trip); a refusal, which is recorded
first, and every call while the actor is busy still go through the mailbox, with the same
answers and the same records."""

from __future__ import annotations

import anyio
import pytest

from agentswf import tool, workflow
from agentswf.actors import capture_trace
from agentswf.testing import ToolRefused, ToolResult, answer, run_workflow

from .kit import tool_lines

pytestmark = pytest.mark.anyio
CALLS = 5


@tool(description="Echo.")
async def echo(n: int) -> int:
    await anyio.lowlevel.checkpoint()  # a handler that waits: its cancel scope is entered
    return n


@workflow(name="t", description="Calls in turn.")
async def calls(wf) -> str:
    agent = await wf.agents.open("a", runtime="codex", tools={"echo": echo})
    return (await agent.run("Go.", timeout="60s", nudge=False)).outcome.kind


def _agent_messages(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["event"] == "mailbox.enqueue" and e["message_type"] == kind]


async def test_calls_to_an_idle_agent_skip_its_mailbox_and_are_recorded(tmp_path) -> None:
    got: list[object] = []

    async def play(turn) -> str:
        for n in range(CALLS):
            got.append(await turn.tool("echo", {"n": n}))
        got.append(await turn.tool("missing", {}))  # refused: recorded first, through the mailbox
        return "done"

    with capture_trace() as events:
        run = await run_workflow(calls, agents={"a": answer(play)}, run_root=tmp_path)
    assert run.value == "answered"
    assert got[:CALLS] == [ToolResult(output=n) for n in range(CALLS)]
    assert isinstance(got[CALLS], ToolRefused) and got[CALLS].code == "unknown-tool"
    assert len(_agent_messages(events, "ToolDone")) == 0
    asked = _agent_messages(events, "WfaCall")  # the refusal and the answer; not the calls run
    assert 2 <= len(asked) < CALLS
    lines = tool_lines(run.run_dir)
    assert [line["outcome"] for line in lines] == ["result"] * CALLS + ["refused"]
