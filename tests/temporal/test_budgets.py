"""Budgets on the Temporal engine: the workflow keeps the run's spend in workflow state, from each
turn activity's returned turn, and refuses a turn past a budget with the local engine's words; a
wall budget fixes a turn's deadline before its activity is scheduled. Each check runs the same
workflow and budget on both engines, with real shell agents (and the real claude CLI, offline,
for tokens), and compares how they ended."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

import agentswf
from agentswf import Budget, Runtime, workflow
from agentswf.temporal import TemporalEngine, on_asyncio
from agentswf.temporal.turns import turns_ran
from agentswf.testing.models import Conversation, ScriptedModel, Shell, Text, claude_env, find_cli

from ..clis import TAUGHT, needs_clis
from .test_examples import _replay

ANSWERS = '#!/bin/sh\ncat >/dev/null\nprintf done | "$WFA" result "$WFA_CALL_ID"\n'
SLEEPS = "#!/bin/sh\nsleep 30\n"


def script(tmp_path: Path, text: str) -> str:
    path = tmp_path / "agent.sh"
    path.write_text(text)
    path.chmod(0o700)
    return f"shell:{path}"


async def both_engines(flow: Any, address: str, tmp_path: Path, budget: Budget) -> list[agentswf.RunResult]:
    """The run locally, then on Temporal (its turns on a worker of this process)."""
    local = await agentswf.run(flow, run_root=tmp_path / "local", cwd=tmp_path, budget=budget)
    engine = TemporalEngine(address=address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "worker")
    remote = await agentswf.run(flow, run_root=tmp_path / "temporal", cwd=tmp_path, budget=budget, engine=engine)
    return [local, remote]


def refusals(run_dir: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]
    return [line["fields"] for line in lines if line["message"] == "a budget stopped a turn"]


def turns(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "turns.jsonl").read_text().splitlines()]


async def replays(address: str, result: agentswf.RunResult) -> bool:
    """Whether the run's workflow code, run again from its history, decides the same (its budgets too)."""
    workflow_id = json.loads((result.run_dir / "temporal.json").read_text())["workflow_id"]
    return await on_asyncio(functools.partial(_replay, address, workflow_id)) is None


def told(turn: Any) -> str:
    return turn.outcome.kind if turn.answered else f"{turn.outcome.kind}: {turn.outcome.reason}"


async def test_a_turns_budget_refuses_the_third_turn_on_both_engines(temporal_address: str, tmp_path: Path) -> None:
    runtime = script(tmp_path, ANSWERS)

    @workflow(name="three-turns", description="One agent, three turns, how each ended, and the run's spend.")
    async def three(wf):  # type: ignore[no-untyped-def]
        agent = await wf.agents.open("a", runtime=runtime)
        kinds = [told(await agent.run("Work.", nudge=False)) for _ in range(3)]
        return {"kinds": kinds, "turns": wf.spent().run.turns}

    local, remote = await both_engines(three, temporal_address, tmp_path, Budget(turns=2))
    expected = {"kinds": ["answered", "answered", "failed: the run's budget: 2 of 2 turns given"], "turns": 2}
    assert local.value == remote.value == expected, (local.reason, remote.reason)
    for result in (local, remote):
        assert refusals(result.run_dir) == [{"agent": "a", "turn": 3, "budget": "run", "reason": "2 of 2 turns given"}]
        assert [turn["outcome"]["kind"] for turn in turns(result.run_dir)] == ["answered", "answered"]  # as locally: the log says it
    assert len(turns_ran(tmp_path / "worker", "three-turns", remote.run_id)) == 2  # the third never reached a worker
    assert await replays(temporal_address, remote)


async def test_a_stage_and_a_key_groups_budget_hold_on_temporal(temporal_address: str, tmp_path: Path) -> None:
    runtime = script(tmp_path, ANSWERS)

    @workflow(name="scoped", description="A stage's budget and a key group's, each reached.")
    async def scoped(wf):  # type: ignore[no-untyped-def]
        wf.budget("review", turns=1)
        reviewer = await wf.agents.open("review:style", runtime=runtime)
        builder = await wf.agents.open("build", runtime=runtime)
        said = [told(await reviewer.run("Look.", nudge=False)), told(await reviewer.run("Again.", nudge=False))]

        async def build() -> list[str]:
            return [told(await builder.run("Build.", nudge=False)) for _ in range(2)]

        said += await wf.stage("build", build, budget=Budget(turns=1))
        return said

    local, remote = await both_engines(scoped, temporal_address, tmp_path, Budget(turns=10))
    assert local.value == remote.value == [
        "answered", "failed: key group review's budget: 1 of 1 turns given",
        "answered", "failed: stage build's budget: 1 of 1 turns given",
    ], (local.reason, remote.reason)


async def test_a_wall_budget_stops_a_turn_in_flight_on_both_engines(temporal_address: str, tmp_path: Path) -> None:
    runtime = script(tmp_path, SLEEPS)

    @workflow(name="walled", description="A turn longer than the run's wall budget, then one past it.")
    async def walled(wf):  # type: ignore[no-untyped-def]
        agent = await wf.agents.open("slow", runtime=runtime)
        first = await agent.run("Work.", timeout="2m", nudge=False)
        second = await agent.run("Again.", timeout="2m", nudge=False)
        return [told(first), second.outcome.reason.split(": ")[0]]

    local, remote = await both_engines(walled, temporal_address, tmp_path, Budget(wall="2s"))
    assert local.value == remote.value == [
        "failed: the run's budget: its wall time passed while the turn ran", "the run's budget",
    ], (local.reason, remote.reason)
    [first] = turns(remote.run_dir)  # the second never started, as locally
    assert first["ended_at"] - first["started_at"] < 20  # the budget's deadline, not the turn's 2m
    assert await replays(temporal_address, remote)  # its wall time counted in workflow time


def model_script(conv: Conversation) -> Any:
    found = TAUGHT.search(conv.prompt)
    if found is None or conv.tool_results:
        return Text("Finished.")
    wfa, call = found.groups()
    return Shell(f"{wfa} result {call} done")


@needs_clis
class TestTokens:
    @pytest.fixture(params=["asyncio"])  # the scripted model and the engine on one loop
    def anyio_backend(self, request: pytest.FixtureRequest) -> str:
        return str(request.param)

    async def test_a_tokens_budget_counts_what_the_turns_activity_returned(self, temporal_address: str, tmp_path: Path) -> None:
        async with ScriptedModel(model_script) as model:
            runtime = Runtime(harness="claude", command=(find_cli("claude"),), env=claude_env(model, tmp_path / "home"))

            @workflow(name="tokens", description="Two turns under a budget of one token.")
            async def tokens(wf):  # type: ignore[no-untyped-def]
                agent = await wf.agents.open("a", runtime=runtime)
                first = await agent.run("Answer done.", timeout=90)
                second = await agent.run("Answer done.", timeout=90)
                return [told(first), told(second), wf.spent().run.tokens]

            local, remote = await both_engines(tokens, temporal_address, tmp_path, Budget(tokens=1))
        assert local.value[0] == remote.value[0] == "answered", (local.value, remote.value)
        spent = remote.value[2]
        assert spent > 0 and local.value[2] == spent  # the same usage, counted the same way
        assert local.value[1] == remote.value[1] == f"failed: the run's budget: {spent} of 1 tokens spent"


BUDGETED = """
from agentswf import workflow


@workflow(name="budgeted", description="Two turns under awf run's --budget.")
async def budgeted(wf):
    agent = await wf.agents.open("a", runtime={runtime!r})
    kinds = []
    for _ in range(2):
        turn = await agent.run("Work.", nudge=False)
        kinds.append(turn.outcome.kind if turn.answered else turn.outcome.reason)
    return kinds
"""


def test_awf_run_engine_temporal_takes_budget(temporal_address: str, tmp_path: Path) -> None:
    flow = tmp_path / "budgeted.py"
    flow.write_text(BUDGETED.format(runtime=script(tmp_path, ANSWERS)))
    done = subprocess.run(
        [sys.executable, "-m", "agentswf", "run", str(flow), "--engine", "temporal", "--address", temporal_address,
         "--task-queue", f"test-{uuid4().hex[:8]}", "--budget", "1turns", "--run-root", str(tmp_path / "runs"), "--json"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["value"] == ["answered", "the run's budget: 1 of 1 turns given"]
