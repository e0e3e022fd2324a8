"""`run_workflow(..., approvals=…)`: a tool call that waits for approval is decided as `awf approve`
decides it, through the run's operator socket, recorded with its `by`; a call the test decides
nothing for fails the test, naming it."""

from __future__ import annotations

import pytest

from agentswf import Workflow, tool, workflow
from agentswf.engine.record.lines import ApprovalRequest
from agentswf.testing import TestScriptError, ToolResult, answer, approve, reject, run_workflow
from agentswf.testing.scripted import ScriptedTurn

pytestmark = pytest.mark.anyio
deployed: list[str] = []


def deploy(target: str) -> str:
    deployed.append(target)
    return f"deployed to {target}"


@workflow(name="deployer", description="Deploys, once a person approves.")
async def deployer(wf: Workflow) -> str:
    agent = await wf.agents.open("a", runtime="codex", tools={
        "deploy": tool(deploy, description="Deploy.", requires_approval=True),
    })  # fmt: skip
    return (await agent.run("Deploy to staging.")).value


async def agent_a(turn: ScriptedTurn) -> str:
    result = await turn.tool("deploy", {"target": "staging"})
    return str(result.output) if isinstance(result, ToolResult) else f"refused: {result.error}"


async def test_a_call_approved_by_tool_name_runs_and_the_approval_is_recorded_as_a_persons():
    deployed.clear()
    run = await run_workflow(
        deployer, agents={"a": answer(agent_a)}, approvals={"deploy": approve(by="alice", reason="staging is fine")}
    )
    assert run.value == "deployed to staging" and deployed == ["staging"]
    (approval,) = run.record.approvals
    assert approval["decision"] == {"approved": True, "reason": "staging is fine", "by": "alice"}, approval


async def test_a_function_of_the_request_decides_and_a_rejection_reaches_the_agent():
    deployed.clear()
    asked: list[ApprovalRequest] = []

    def decide(request: ApprovalRequest):
        asked.append(request)
        return reject(reason="not on Fridays")

    run = await run_workflow(deployer, agents={"a": answer(agent_a)}, approvals=decide)
    assert run.value.startswith("refused") and "not on Fridays" in run.value
    assert deployed == [] and asked[0].tool == "deploy" and asked[0].agent == "a"


async def test_a_call_the_test_decides_nothing_for_fails_the_test_naming_it():
    deployed.clear()
    with pytest.raises(TestScriptError, match=r"\(deploy, by agent a\) waited for approval"):
        await run_workflow(deployer, agents={"a": answer(agent_a)}, approvals={})
    assert deployed == []


@workflow(name="raises", description="Raises with a participant beside it.")
async def raises(wf: Workflow) -> str:
    raise RuntimeError("the workflow's own mistake")


async def test_a_failure_beside_the_test_kits_players_is_placed_in_the_workflows_file():
    run = await run_workflow(raises, agents={}, approvals={})
    assert run.outcome == "failed" and "test_approvals_kit.py:" in (run.result.where or ""), run.result.where


async def test_an_answer_that_is_no_decision_fails_the_test(tmp_path):
    with pytest.raises(TestScriptError, match=r"approvals answered 'yes' for deploy: use approve"):
        await run_workflow(deployer, agents={"a": answer(agent_a)}, approvals=lambda request: "yes", run_root=tmp_path)
