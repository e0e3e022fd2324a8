"""`awf logs` tells the whole story: the messages (who to whom, their kind, their text as data) and
who approved a tool call and why, in order with the turns; and of a live run, that it is live."""

from __future__ import annotations

import io

import pytest

from agentswf import Mail, Workflow, tool, workflow
from agentswf.cli.logs import print_run
from agentswf.testing import ToolResult, answer, approve, respond, run_workflow
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
