"""`awf status` says an agent awaiting a reply is in its turn, as the record (`awf tail`, the live
view) says it: both read the turn open, not whether a process of the agent runs now."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agentswf import Mail, Workflow, workflow
from agentswf.engine.operator import Status, ask_run
from agentswf.engine.records import read_json
from agentswf.testing import answer, respond, run_workflow
from agentswf.testing.scripted import ScriptedTurn

pytestmark = pytest.mark.anyio
run_dirs: list[Path] = []


@workflow(name="asks", description="An agent asks a person and awaits the reply.")
async def asks(wf: Workflow) -> str:
    run_dirs.append(wf.run_dir)
    agent = await wf.agents.open("a", runtime="claude")
    lead = await wf.participants.open("lead")
    await wf.route(agent, lead, purpose="Ask")
    return (await agent.run("Ask the lead.")).value


async def agent_a(turn: ScriptedTurn) -> str | None:
    if "lead's reply" in turn.prompt:
        return "asked"
    sent = await turn.send("lead", "Which branch?", await_reply=True)
    assert sent.ok, sent.stderr
    return None


async def test_an_agent_awaiting_a_reply_is_in_its_turn_in_awf_status():
    seen: list[dict] = []

    async def lead(mail: Mail) -> str:
        control = read_json(run_dirs[-1] / "run.json")["control"]
        with anyio.fail_after(10):
            while True:  # the agent's attempt ends as it awaits: then ask
                status = (await anyio.to_thread.run_sync(ask_run, control, Status())).value
                (agent,) = status["agents"]
                if agent["awaits"] == "lead":
                    seen.append(agent)
                    return "main"
                await anyio.sleep(0.02)

    run = await run_workflow(asks, agents={"a": answer(agent_a)}, participants={"lead": respond(lead)})
    assert run.value == "asked"
    assert seen and seen[0]["in_turn"] is True, seen
