"""`awf continue` of a run on Temporal goes on as the local engine's continue does: its finished stages
and its answered id'd turns are given back from the record, not run again; its spend is carried into
its budget; and the continued run's record reads as a local continued run's. Real shell agents, each
turn written down by the agent itself (`ran.log`), on the session's dev server."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

import agentswf
from agentswf import Budget, ContinueFrom
from agentswf.engine.record.attempts import read_attempts, read_sessions, read_stages, read_turn_ids
from agentswf.temporal import TemporalEngine
from agentswf.workflow.loading import load_workflow

from .test_budgets import replays
from .test_record import VARYING

AGENT = """#!/bin/sh
cat >/dev/null
echo "$1" >> "{here}/ran.log"
if [ "$1" = builder ] && [ ! -e "{here}/fixed" ]; then exit 3; fi
printf "%s" "$1 done" | "$WFA" result "$WFA_CALL_ID"
"""

FLOW = """from agentswf import workflow

RUNTIME = "shell:{agent} {{}}"


@workflow(name="two-stages", description="A plan, a note given an id, then a build that fails until it is fixed.")
async def two_stages(wf):
    reviewer = await wf.agents.open("reviewer", runtime=RUNTIME.format("reviewer"))

    async def plan():
        planner = await wf.agents.open("planner", runtime=RUNTIME.format("planner"))
        return (await planner.run("Plan.", id="plan", nudge=False)).value

    planned = await wf.stage("plan", plan)
    note = (await reviewer.run("Note the plan.", id="note", nudge=False)).value

    async def build():
        builder = await wf.agents.open("builder", runtime=RUNTIME.format("builder"))
        built = await builder.run(f"Build {{planned}}.", nudge=False)
        if not built.answered:
            raise RuntimeError(f"the build failed: {{built.outcome.reason}}")
        return built.value

    return [planned, note, await wf.stage("build", build)]
"""


def flow_file(where: Path) -> Path:
    """The workflow's file, and its agent, in `where` (its turns written down in `where`/ran.log)."""
    where.mkdir(parents=True, exist_ok=True)
    agent = where / "agent.sh"
    agent.write_text(AGENT.format(here=where))
    agent.chmod(0o700)
    flow = where / "two_stages.py"
    flow.write_text(FLOW.format(agent=agent))
    return flow


def ran(where: Path) -> list[str]:
    """The turns the agents took, in order, by agent."""
    return (where / "ran.log").read_text().split()


def awf(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentswf", *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def shown(said: str) -> str:
    """`awf logs`' text, what differs between two runs made the same."""
    for pattern, fixed in VARYING:
        said = pattern.sub(fixed, said)
    return re.sub(r"\b\d+\.\d+s\b", "Ns", said)


def logs(where: Path, run_id: str) -> str:
    said = awf("logs", run_id, "--run-root", str(where / "runs"), cwd=where)
    assert said.returncode == 0, said.stderr
    return shown(said.stdout.replace(str(where), "WHERE").replace(run_id, "RUN"))


def continued_record(run_dir: Path) -> dict[str, Any]:
    """What the record says of the run's attempts, stages, id'd turns and agents' sessions."""
    attempts = read_attempts(run_dir)
    return {
        "attempts": [(a.n, a.outcome, a.stages, a.turns, a.reused_turns, a.continues) for a in attempts],
        "stages": {name: (record.attempt, record.value, record.turns) for name, record in read_stages(run_dir).items()},
        "turn ids": [(line["attempt"], line["agent"], line["id"]) for line in read_turn_ids(run_dir)],
        "sessions": [(line["attempt"], line["agent"], line["harness"], line.get("fresh")) for line in read_sessions(run_dir)],
    }


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_awf_continue_of_a_failed_temporal_run_reruns_only_the_failed_stage(
    temporal_address: str, tmp_path: Path, backend: str
) -> None:
    temporal, local = tmp_path / "temporal", tmp_path / "local"
    flow = flow_file(temporal)
    first = awf("run", str(flow), "--engine", "temporal", "--address", temporal_address, "--task-queue",
                f"test-{uuid4().hex[:8]}", "--run-root", "runs", "--json", "--backend", backend, cwd=temporal)
    assert first.returncode == 1, first.stderr
    ended = json.loads(first.stdout)
    assert "the build failed" in ended["reason"], ended
    assert ran(temporal) == ["planner", "reviewer", "builder"]
    assert f"awf: go on with: awf continue {flow} {ended['run_id']}" in first.stderr, first.stderr

    forked = awf("continue", str(flow), ended["run_id"], "--run-root", "runs", "--from", "planner:1", cwd=temporal)
    assert forked.returncode == 2, forked.stderr
    assert "ran on Temporal, where awf continue takes no --from: a fork plays the turns before its turn" in forked.stderr

    (temporal / "fixed").touch()
    again = awf("continue", str(flow), ended["run_id"], "--run-root", "runs", "--json", "--backend", backend,
                cwd=temporal)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["value"] == ["planner done", "reviewer done", "builder done"]
    assert "awf: on Temporal at " in again.stderr and "(attempt 2)" in again.stderr, again.stderr
    assert ran(temporal) == ["planner", "reviewer", "builder", "builder"]  # the plan and the note not run again

    # The same run, done and continued locally, is recorded the same.
    flow_file(local)
    done = awf("run", str(local / "two_stages.py"), "--run-root", "runs", "--json", cwd=local)
    local_id = json.loads(done.stdout)["run_id"]
    (local / "fixed").touch()
    assert awf("continue", str(local / "two_stages.py"), local_id, "--run-root", "runs", cwd=local).returncode == 0
    assert ran(local) == ran(temporal)
    run_dir = temporal / "runs" / "two-stages" / ended["run_id"]
    recorded = continued_record(run_dir)
    assert recorded == continued_record(local / "runs" / "two-stages" / local_id)
    assert recorded["stages"] == {"plan": (1, "planner done", 1), "build": (2, "builder done", 1)}
    assert recorded["attempts"] == [
        (1, "failed", {"plan": "ran", "build": "ran"}, 3, 0, None),
        (2, "completed", {"plan": "reused", "build": "ran"}, 1, 1, 1),
    ]
    said = logs(temporal, ended["run_id"])
    assert "plan reused (attempt 1), build ran; 1 turn run, 1 id'd turn given back" in said, said
    assert said == logs(local, local_id)
    listed = awf("ls", "--run-root", "runs", cwd=temporal)
    assert listed.returncode == 0 and ended["run_id"] in listed.stdout, listed.stderr
    assert json.loads((run_dir / "temporal.json").read_text())["workflow_id"] == f"two-stages-{ended['run_id']}.2"


async def test_a_continue_on_temporal_carries_the_spend_into_its_budget(temporal_address: str, tmp_path: Path) -> None:
    """Three turns were spent; the continue's one turn fits a budget of three alone, not with them."""
    flow = load_workflow(str(flow_file(tmp_path)), None)
    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
    first = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path, budget=Budget(turns=3), engine=engine)
    assert first.outcome == "failed", first.reason
    (tmp_path / "fixed").touch()

    tripped = await agentswf.run(flow, run_root=tmp_path / "runs", continue_from=first.run_id, engine=engine)
    assert tripped.outcome == "failed" and tripped.attempt == 2, tripped.reason
    assert "the run's budget: 3 of 3 turns given" in (tripped.reason or ""), tripped.reason
    assert ran(tmp_path) == ["planner", "reviewer", "builder"]  # nothing ran: the budget was spent

    raised = await agentswf.run(
        flow, run_root=tmp_path / "runs", continue_from=first.run_dir, budget=Budget(turns=4), engine=engine
    )
    assert raised.outcome == "completed" and raised.attempt == 3, raised.reason
    assert ran(tmp_path) == ["planner", "reviewer", "builder", "builder"]
    assert len(raised.usage.by_turn) == 4  # the run's turns, every attempt's


async def test_rerun_on_temporal_runs_a_stage_again_and_what_follows(temporal_address: str, tmp_path: Path) -> None:
    flow = load_workflow(str(flow_file(tmp_path)), None)
    (tmp_path / "fixed").touch()
    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
    first = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path, engine=engine)
    assert first.completed, first.reason
    again = await agentswf.run(flow, run_root=tmp_path / "runs", continue_from=first.run_id, rerun="plan", engine=engine)
    assert again.completed and again.attempt == 2, again.reason
    assert await replays(temporal_address, again)  # the continued attempt's workflow decides the same from its history
    # the note was answered after the plan began: given again, as locally
    assert ran(tmp_path) == ["planner", "reviewer", "builder", "planner", "reviewer", "builder"]
    assert sorted((tmp_path / "runs" / "two-stages" / first.run_id / "replaced").iterdir()) == [
        tmp_path / "runs" / "two-stages" / first.run_id / "replaced" / name for name in ("build.1.json", "plan.1.json")
    ]


async def test_a_run_goes_on_on_the_engine_it_ran_on(temporal_address: str, tmp_path: Path) -> None:
    flow = load_workflow(str(flow_file(tmp_path)), None)
    local = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
    with pytest.raises(agentswf.DefinitionError, match="it ran on the local engine, and goes on there, not on Temporal"):
        await agentswf.run(flow, run_root=tmp_path / "runs", continue_from=local.run_id, engine=engine)
    remote = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path, engine=engine)
    with pytest.raises(agentswf.DefinitionError, match="it ran on Temporal, and goes on there, not on the local engine"):
        await agentswf.run(flow, run_root=tmp_path / "runs", continue_from=remote.run_id)


async def test_a_fork_on_temporal_is_refused_saying_why(run_key_file: Path, tmp_path: Path) -> None:
    flow = load_workflow(str(flow_file(tmp_path)), None)
    nowhere = TemporalEngine(address="127.0.0.1:9", task_queue="q")
    with pytest.raises(agentswf.DefinitionError) as refused:
        await agentswf.run(flow, continue_from=ContinueFrom("r", "planner", 1), engine=nowhere)
    assert str(refused.value).startswith("not on TemporalEngine yet: continue_from=ContinueFrom(...) (awf continue --from): "
                                         "a fork plays the turns before its turn from the record"), refused.value
