"""The examples on the Temporal engine with their real shell agents: the workflow's code as
Temporal workflow code in this process, each turn an activity (here too, or on `awf worker`s)."""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

import agentswf
from agentswf.temporal import TemporalEngine

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def engine(address: str, tmp_path: Path) -> TemporalEngine:
    return TemporalEngine(address=address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "worker")


async def test_review_fix_finds_fixes_and_approves_on_temporal(temporal_address: str, tmp_path: Path) -> None:
    review_fix = agentswf.load_workflow(EXAMPLES / "review_fix" / "review_fix.py")
    result = await agentswf.run(review_fix, args={"rounds": 3}, run_root=tmp_path / "runs",
                                engine=engine(temporal_address, tmp_path))
    assert result.outcome == "completed", result.reason
    assert result.value == {"verdict": "approve", "rounds": 2, "fixed": ["calc.py"]}
    turns = tmp_path / "worker" / "review-fix" / result.run_id  # each turn ran in an activity, its record there
    assert sorted(path.name for path in turns.iterdir()) == ["fixer-1-attempt1", "reviewer-1-attempt1", "reviewer-2-attempt1"]


async def test_review_fix_stops_on_temporal_as_it_does_locally(temporal_address: str, tmp_path: Path) -> None:
    review_fix = agentswf.load_workflow(EXAMPLES / "review_fix" / "review_fix.py")
    result = await agentswf.run(review_fix, args={"rounds": 1}, run_root=tmp_path / "runs",
                                engine=engine(temporal_address, tmp_path))
    assert result.outcome == "stopped"
    assert result.reason == "no approval after 1 rounds"


async def test_triage_tools_reach_the_workflows_handlers_on_temporal(temporal_address: str, tmp_path: Path) -> None:
    triage = agentswf.load_workflow(EXAMPLES / "tools" / "triage.py")
    result = await agentswf.run(triage, run_root=tmp_path / "runs", engine=engine(temporal_address, tmp_path))
    assert result.outcome == "completed", result.reason
    assert result.value["ended"] == "answered"
    assert result.value["summary"] == "Triaged 4 items."
    assert result.value["labels"] == {
        "b1": ["performance"], "b2": ["bug", "ops"], "b3": ["cosmetic"], "b4": ["bug"],
    }
    assert result.value["priorities"] == {"b1": "p1", "b2": "p2", "b3": "p3", "b4": "p1"}
    assert result.value["untriaged"] == []
