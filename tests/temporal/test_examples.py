"""The examples on the Temporal engine with their real shell agents: the workflow's code as
Temporal workflow code in this process, each turn an activity (here too, or on `awf worker`s)."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from uuid import uuid4

import anyio
import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

from temporalio.client import Client
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner

import agentswf
from agentswf.temporal import TemporalEngine, load_key, on_asyncio
from agentswf.temporal.driver import KeyHolder
from agentswf.temporal.flow import AgentswfWorkflow
from agentswf.temporal.turns import turns_ran

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def engine(address: str, tmp_path: Path) -> TemporalEngine:
    return TemporalEngine(address=address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "worker")


async def test_review_fix_finds_fixes_and_approves_on_temporal(temporal_address: str, tmp_path: Path) -> None:
    review_fix = agentswf.load_workflow(EXAMPLES / "review_fix" / "review_fix.py")
    result = await agentswf.run(review_fix, args={"rounds": 3}, run_root=tmp_path / "runs",
                                engine=engine(temporal_address, tmp_path))
    assert result.outcome == "completed", result.reason
    assert result.value == {"verdict": "approve", "rounds": 2, "fixed": ["calc.py"]}
    ran = turns_ran(tmp_path / "worker", "review-fix", result.run_id)  # each turn ran in an activity, recorded there
    assert ran == ["fixer-1-attempt1", "reviewer-1-attempt1", "reviewer-2-attempt1"]


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


async def test_the_examples_histories_replay_without_nondeterminism(temporal_address: str, tmp_path: Path) -> None:
    """Temporal's Replayer runs each finished run's workflow code again from its history: the
    same decisions, so a worker that restarts (or evicts it from its cache) goes on from it."""
    for path, args in (
        (EXAMPLES / "review_fix" / "review_fix.py", {"rounds": 3}), (EXAMPLES / "tools" / "triage.py", None),
        (EXAMPLES / "messaging" / "merge.py", None),  # its board: updates, mail, turns started by mail
    ):
        definition = agentswf.load_workflow(path)
        result = await agentswf.run(definition, args=args, run_root=tmp_path / "runs", engine=engine(temporal_address, tmp_path))
        assert result.outcome == "completed", result.reason
        workflow_id = json.loads((result.run_dir / "temporal.json").read_text())["workflow_id"]
        replayed = await on_asyncio(functools.partial(_replay, temporal_address, workflow_id))
        assert replayed is None


async def _replay(address: str, workflow_id: str) -> BaseException | None:
    client = await Client.connect(address)
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    replayer = Replayer(workflows=[AgentswfWorkflow], workflow_runner=UnsandboxedWorkflowRunner(),
                        interceptors=[KeyHolder(load_key())])  # a replay reseals what the run sealed
    replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    return replayed.replay_failure


async def test_the_replayer_catches_workflow_code_that_decides_otherwise(temporal_address: str, tmp_path: Path) -> None:
    """The check above can fail: code whose decisions change between runs fails its replay."""
    executions: list[int] = []
    runtime = 'shell:cat >/dev/null; echo ok | "$WFA" result "$WFA_CALL_ID"'

    @agentswf.workflow(name="fickle", description="Gives one more turn each time its code runs.")
    async def fickle(wf):  # type: ignore[no-untyped-def]
        executions.append(1)
        agent = await wf.agents.open("one", runtime=runtime)
        for _ in range(len(executions)):
            await agent.run("Go.")
        return len(executions)

    result = await agentswf.run(fickle, run_root=tmp_path / "runs", engine=engine(temporal_address, tmp_path))
    assert result.value == 1, result.reason
    workflow_id = json.loads((result.run_dir / "temporal.json").read_text())["workflow_id"]
    failure = await on_asyncio(lambda: _replay(temporal_address, workflow_id))
    assert failure is not None and "nondetermin" in str(failure).lower()


async def test_a_temporal_runs_record_reads_as_a_local_ones(temporal_address: str, tmp_path: Path) -> None:
    """`awf logs RUN` reads it: the run's host writes the lines its workflow kept, through its Recorder."""
    triage = agentswf.load_workflow(EXAMPLES / "tools" / "triage.py")
    result = await agentswf.run(triage, run_root=tmp_path / "runs", engine=engine(temporal_address, tmp_path))
    assert result.outcome == "completed", result.reason
    done = await anyio.run_process(
        [sys.executable, "-m", "agentswf", "logs", result.run_id, "--run-root", str(tmp_path / "runs")], check=False
    )
    text = done.stdout.decode()
    assert done.returncode == 0, done.stderr.decode()
    assert "ended completed" in text and "triager turn 1" in text
    assert text.count("label_item") == 4 and text.count("set_priority") == 4
    assert "labelled" in text  # wf.log's lines, from the workflow
    assert result.usage.turns == 1


async def test_merge_messages_its_architect_and_coordinator_on_temporal(temporal_address: str, tmp_path: Path) -> None:
    """The agents message each other through the workflow's board: the implementer's questions
    go from its worker to the workflow, the architect's turn is started by its mail, and the
    workflow answers as the coordinator; the record's messages are the local run's."""
    merge = agentswf.load_workflow(EXAMPLES / "messaging" / "merge.py")
    result = await agentswf.run(merge, run_root=tmp_path / "runs", engine=engine(temporal_address, tmp_path))
    assert result.outcome == "completed", result.reason
    assert result.value["where"] == "queue" and result.value["merged"] is True
    assert len(result.value["coordinator_asked"]) == 1
    lines = [json.loads(line) for line in (result.run_dir / "messages.jsonl").read_text().splitlines()]
    sent = [line["mail"] for line in lines if line["event"] == "sent"]
    assert [(mail["sender"], mail["to"], mail["kind"]) for mail in sent] == [
        ("implementer", "architect", "question"),
        ("architect", "implementer", "reply"),
        ("implementer", "coordinator", "question"),
        ("coordinator", "implementer", "reply"),
    ]
    assert sum(line["event"] == "read" for line in lines) == 4
    turns = [json.loads(line) for line in (result.run_dir / "turns.jsonl").read_text().splitlines()]
    assert [(turn["agent"], turn["started_by"]) for turn in turns] == [("architect", "message"), ("implementer", "workflow")]
