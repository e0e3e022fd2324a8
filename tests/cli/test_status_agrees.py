"""`awf status` says an agent awaiting a reply is in its turn, as the record (`awf tail`, the live
view) says it: both read the turn open, not whether a process of the agent runs now."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agentswf import Mail, Workflow, workflow
from agentswf.engine.operator_wire import Status, ask_run
from agentswf.engine.record.layout import read_json
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


async def test_a_tool_call_running_is_in_its_agents_status_and_the_live_views_doing():
    from rich.console import Console

    from agentswf import tool
    from agentswf.cli.follow import Event, Tally
    from agentswf.cli.live import render
    from agentswf.testing import ToolResult

    seen: list[dict] = []

    async def build() -> str:
        control = read_json(run_dirs[-1] / "run.json")["control"]
        status = (await anyio.to_thread.run_sync(ask_run, control, Status())).value
        seen.append(status)
        return "built"

    @workflow(name="builds", description="An agent runs a tool.")
    async def builds(wf: Workflow) -> str:
        run_dirs.append(wf.run_dir)
        agent = await wf.agents.open("a", runtime="codex", tools={"build": tool(build, description="Build.")})
        return (await agent.run("Build.")).value

    async def agent_a(turn: ScriptedTurn) -> str:
        result = await turn.tool("build", {})
        assert isinstance(result, ToolResult)
        return str(result.output)

    run = await run_workflow(builds, agents={"a": answer(agent_a)})
    assert run.value == "built"
    (agent,) = seen[0]["agents"]
    assert agent["tools"] == ["build"] and agent["in_turn"] is True, agent
    tally = Tally()
    tally.add(Event(100.0, "turn-started", "a", "turn 1 started", {"n": 1}))
    console = Console(width=160, record=True)
    console.print(render(tally, seen[0], "run x", 101.0))
    assert "tool build runs" in console.export_text()
