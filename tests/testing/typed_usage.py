"""What a type checker sees of the public API: checked by `mypy --strict` in test_typing.py.

Each `assert_type` fails the check when the type it names is lost (becomes Any, say).
"""

from __future__ import annotations

from typing import Literal, assert_type

import msgspec

import agentswf
from agentswf import (
    Agent,
    Agents,
    Answered,
    Mail,
    Outcome,
    Participant,
    RunResult,
    Turn,
    Workflow,
    workflow,
)
from agentswf.testing import (
    Response,
    ScriptedTurn,
    TestRun,
    ToolFailed,
    ToolRefused,
    ToolResult,
    answer,
    respond,
    run_workflow,
)


class Verdict(msgspec.Struct):
    verdict: Literal["approve", "changes"]


@workflow(name="typed", description="Every turn's value has its schema's type.")
async def typed(wf: Workflow) -> str:
    assert_type(wf.agents, Agents)
    agent = await wf.agents.open("reviewer", runtime="shell:true")
    assert_type(agent, Agent)
    turn = await agent.run("Review it.", schema=Verdict)
    assert_type(turn, Turn[Verdict])
    assert_type(turn.value, Verdict)
    assert_type(turn.outcome, Outcome[Verdict])
    if isinstance(turn.outcome, Answered):
        assert_type(turn.outcome.value, Verdict)
    text = await agent.run("Say something.")
    assert_type(text.value, str)
    several = await agent.run("List them.", schema=list[Verdict])
    assert_type(several.value, list[Verdict])
    person = await wf.participants.open("coordinator")
    assert_type(person, Participant)
    assert_type(await person.receive(), Mail)
    assert_type(wf.run_id, str)
    return turn.value.verdict


async def run_it() -> None:
    result = await agentswf.run(typed)
    assert_type(result, RunResult)
    tested = await run_workflow(
        typed,
        agents={"reviewer": answer(Verdict("approve"))},
        participants={"coordinator": respond(lambda mail: "ok")},
    )
    assert_type(tested, TestRun)


async def script(turn: ScriptedTurn) -> None:
    sent = await turn.send("lead", "Ship it?", await_reply=True)
    assert_type(sent, Response)
    assert_type(await turn.tool("list_items"), ToolResult | ToolFailed | ToolRefused)
