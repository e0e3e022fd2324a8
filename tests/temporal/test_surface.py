"""One author surface on both engines: on Temporal the `wf` a workflow is given is the same
`Workflow` (and its routes, participants and approvals the same classes) as locally, and what
Temporal can't do is refused by its engine port, naming the feature and the engine."""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

import anyio
import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

import agentswf
from agentswf import Approvals, Participant, Participants, Route, Workflow, workflow
from agentswf.temporal import TemporalEngine


async def test_wf_on_temporal_is_a_workflow_and_refuses_what_temporal_lacks(temporal_address: str, tmp_path: Path) -> None:
    async def nothing() -> None:
        return None

    @workflow(name="one-surface", description="The author surface on Temporal.")
    async def flow(wf: Workflow) -> dict[str, object]:
        person = await wf.participants.open("person")
        route = await wf.route(wf, person, purpose="say hello")
        classes = [isinstance(wf, Workflow), isinstance(wf.approvals, Approvals),
                   isinstance(wf.participants, Participants), isinstance(person, Participant), isinstance(route, Route)]
        refusals = []
        for attempt in (lambda: wf.worktree("side"),):
            try:
                attempt()
            except agentswf.WorkflowError as error:
                refusals.append(str(error))
        try:
            await wf.race(nothing())
        except agentswf.WorkflowError as error:
            refusals.append(str(error))
        return {"classes": classes, "refusals": refusals, "pending": len(await wf.approvals.pending())}

    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
    with anyio.fail_after(60):
        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path, engine=engine)
    assert result.outcome == "completed", result.reason
    assert result.value == {
        "classes": [True] * 5,
        "refusals": [
            f"{feature} is not on the Temporal engine yet (docs/guide/temporal.md says what is)"
            for feature in ("wf.worktree", "wf.race and wf.select")
        ],
        "pending": 0,
    }


async def test_an_agent_on_temporal_is_the_one_agent(temporal_address: str, tmp_path: Path) -> None:
    @workflow(name="one-agent", description="The agent class on Temporal.")
    async def flow(wf: Workflow) -> dict[str, object]:
        agent = await wf.agents.open("a", runtime="shell:true")
        turn = await agent.run("do nothing")
        again = await wf.agents.open("a", runtime="shell:true")
        try:
            await wf.agents.stop("a")
        except agentswf.WorkflowError as error:
            stop = str(error)
        return {
            "agents": isinstance(wf.agents, agentswf.Agents),
            "stop": stop,
            "open": "a" in wf.agents,
            "agent": isinstance(agent, agentswf.Agent),
            "same": again is agent,
            "repr": repr(agent),
            "turn": turn.n,
            "usage": agent.usage is None,
            "settings": [agent.model, agent.effort],
        }

    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
    with anyio.fail_after(60):
        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path, engine=engine)
    assert result.outcome == "completed", result.reason
    assert result.value == {
        "agents": True, "stop": "wf.agents.stop is not on the Temporal engine yet (docs/guide/temporal.md says what is)",
        "open": True, "agent": True, "same": True, "repr": "<Agent a turns=1>", "turn": 1, "usage": True, "settings": [None, None],
    }
