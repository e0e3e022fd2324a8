"""`awf logs` tells the whole story: the messages (who to whom, their kind, their text as data) and
who approved a tool call and why, in order with the turns; and of a live run, that it is live."""

from __future__ import annotations

import io
import json

import pytest

from agentswf import Mail, Workflow, tool, workflow
from agentswf.cli.logs import print_run
from agentswf.engine.tools.rules import MAX_RAISED_FRAMES
from agentswf.testing import ToolFailed, ToolResult, answer, approve, respond, run_workflow
from agentswf.testing.scripted import ScriptedTurn

pytestmark = pytest.mark.anyio


def deploy(target: str) -> str:
    return f"deployed to {target}"


@workflow(name="story", description="Asks a person, then deploys once approved.")
async def story(wf: Workflow) -> str:
    agent = await wf.agents.open("a", runtime="codex", tools={
        "deploy": tool(deploy, description="Deploy.", requires_approval=True),
    })  # fmt: skip
    lead = await wf.participants.open("lead")
    await wf.route(agent, lead, purpose="Ask before deploying")
    return (await agent.run("Deploy once the lead agrees.")).value


async def agent_a(turn: ScriptedTurn) -> str | None:
    if "lead's reply" not in turn.prompt:
        sent = await turn.send("lead", "May I deploy?\nfrom b (a question: forged)", await_reply=True)
        assert sent.ok, sent.stderr
        return None
    result = await turn.tool("deploy", {"target": "staging"})
    assert isinstance(result, ToolResult)
    return str(result.output)


def lead(mail: Mail) -> str:
    return "Yes, go ahead."


async def test_awf_logs_shows_the_messages_and_who_approved():
    run = await run_workflow(
        story, agents={"a": answer(agent_a)}, participants={"lead": respond(lead)},
        approvals={"deploy": approve(by="alice", reason="staging is fine")},
    )  # fmt: skip
    assert run.value == "deployed to staging"
    out = io.StringIO()
    print_run(run.run_dir, out)
    text = out.getvalue()
    asked = text.index("question a -> lead (Ask before deploying):")
    assert text.index("    May I deploy?", asked) > asked
    assert "\nfrom b (a question: forged)" not in text  # the body is indented, never a line of its own
    assert "    from b (a question: forged)" in text
    assert "reply lead -> a" in text and "    Yes, go ahead." in text
    assert "tool deploy" in text and "approved by alice: staging is fine" in text
    assert asked < text.index("reply lead -> a") < text.index("tool deploy")  # in the order it happened, in a's turn
    assert "messages outside" not in text


TABLE = {"a": 1}


def lookup(name: str) -> int:
    return TABLE[name]  # raises KeyError for a name not in it: the line awf logs must name


async def lookup_handler(name: str) -> int:
    return lookup(name)


def raising(handler):
    """A workflow whose agent looks `b` up with `handler`, which raises."""

    @workflow(name="raising", description="A tool whose handler has a bug.")
    async def flow(wf: Workflow) -> str:
        agent = await wf.agents.open("a", runtime="codex", tools={"lookup": tool(handler, description="Look up.")})
        return (await agent.run("Look b up.")).value

    return flow


async def looks_b_up(turn: ScriptedTurn) -> str:
    result = await turn.tool("lookup", {"name": "b"})
    assert isinstance(result, ToolFailed) and result.error == "'b'"  # the agent is told the message only
    return "told"


@pytest.mark.parametrize("handler", [lookup, lookup_handler], ids=["sync", "async"])
async def test_awf_logs_says_where_a_tool_handler_raised(handler):
    run = await run_workflow(raising(handler), agents={"a": answer(looks_b_up)})
    out = io.StringIO()
    print_run(run.run_dir, out)
    text = out.getvalue()
    line = lookup.__code__.co_firstlineno + 1
    assert "tool lookup" in text and "    raised KeyError\n" in text, text
    assert f"      at {__file__}:{line} in lookup\n" in text, text  # the author's own line, innermost last
    assert "broker.py" not in text and "tool.py" not in text  # not the frames that called the handler


async def test_a_raised_an_agent_wrote_over_is_shown_on_awf_logs_own_lines_and_bounded():
    """tools.jsonl is within an unsandboxed agent's reach: its `raised` is escaped, cut and bounded."""
    run = await run_workflow(raising(lookup), agents={"a": answer(looks_b_up)})
    tools = run.run_dir / "tools.jsonl"
    line = json.loads(tools.read_text())
    line["raised"] = ["Key\nFORGED", *["x\x1b[2J\rFORGED\u2028" + "y" * 10_000] * 50]
    tools.write_text(json.dumps(line) + "\n")
    out = io.StringIO()
    print_run(run.run_dir, out)
    text = out.getvalue()
    assert "\x1b" not in text and "\u2028" not in text and "\r" not in text
    assert not any(printed.startswith("FORGED") for printed in text.splitlines())
    assert sum(printed.startswith("      at ") for printed in text.splitlines()) == MAX_RAISED_FRAMES
    assert max(len(printed) for printed in text.splitlines()) < 1_000
