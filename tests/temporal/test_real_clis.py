"""Real agent CLIs on Temporal (claude, codex and pi from npm, offline, against a scripted model):
each turn is an activity of its own, and the agent's native session goes on from turn to turn.

Skipped, saying where it looked, when the CLIs aren't installed (`.ci/run` installs them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

import agentswf
from agentswf import Runtime, workflow
from agentswf.temporal import TemporalEngine
from agentswf.testing.models import Conversation, ScriptedModel, Shell, Text, claude_env, find_cli

from ..clis import CLIS, TAUGHT, needs_clis, real_runtimes

pytestmark = [needs_clis]

REMEMBERED = "PINEAPPLE-7"  # said in the first turn's activity; the second's model request must carry it


def script(conv: Conversation) -> Any:
    found = TAUGHT.search(conv.prompt)
    if found is None or conv.tool_results:
        return Text("Finished.")
    wfa, call = found.groups()
    return Shell(f"{wfa} result {call} done")


@pytest.fixture(params=["asyncio"])  # the scripted model and the engine on one loop; trio runs elsewhere here
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_real_clis_resume_their_sessions_from_one_turn_activity_to_the_next(
    temporal_address: str, tmp_path: Path
) -> None:
    async with ScriptedModel(script) as model:
        homes = tmp_path / "homes"
        runtimes = real_runtimes(model, homes)

        @workflow(name="remember", description="Three CLIs, two turns each, each turn an activity.")
        async def flow(wf):  # type: ignore[no-untyped-def]
            agents = {name: await wf.agents.open(name, runtime=runtimes[name]) for name in CLIS}

            async def both(name: str) -> list[str]:
                first = await agents[name].run(f"Remember {REMEMBERED}. Answer done.", timeout=90)
                second = await agents[name].run("What did I ask you to remember? Answer done.", timeout=90)
                return [first.value, second.value]

            return dict(zip(CLIS, await wf.parallel(CLIS, both), strict=True))

        engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path, engine=engine)
    assert result.outcome == "completed", result.reason
    assert result.value == {name: ["done", "done"] for name in CLIS}
    later = [r for r in model.requests if r.conversation and "What did I ask" in r.conversation.prompt]
    assert {r.dialect for r in later} == {"anthropic", "responses", "chat"}
    assert all(any(REMEMBERED in str(item) for item in r.conversation.history) for r in later)  # resumed
    assert result.usage.turns == 2 * len(CLIS)


SUMMARY = "SUMMARY: the answer was done"


def compacting(conv: Conversation) -> Any:
    return Text(SUMMARY) if TAUGHT.search(conv.prompt) is None else script(conv)  # claude's compaction asks for a summary


async def test_claude_compacts_and_switches_model_on_temporal(temporal_address: str, tmp_path: Path) -> None:
    async with ScriptedModel(compacting) as model:
        runtime = Runtime(harness="claude", command=(find_cli("claude"),), env=claude_env(model, tmp_path / "home"))

        @workflow(name="operations", description="A turn, a compaction, a switch of model, a turn.")
        async def flow(wf):  # type: ignore[no-untyped-def]
            agent = await wf.agents.open("a", runtime=runtime)
            first = await agent.run("FIRST. Answer done.", timeout=90)
            compacted = await agent.compact("keep FOCUS-MARK", timeout=90)
            switched = await agent.set(model="claude-sonnet-9-9")
            after = await agent.run("AFTER. Answer done.", timeout=90)
            return [first.value, compacted.outcome.kind, compacted.value, switched.model, after.value, after.model]

        engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path, engine=engine)
    assert result.outcome == "completed", result.reason
    assert result.value == ["done", "answered", SUMMARY, "claude-sonnet-9-9", "done", "claude-sonnet-9-9"]
    assert any("FOCUS-MARK" in str(r.conversation.history) + r.conversation.prompt
               for r in model.requests if r.conversation is not None)
    later = [r.conversation for r in model.requests if r.conversation is not None and "AFTER" in r.conversation.prompt]
    assert later and all(c.model == "claude-sonnet-9-9" for c in later)


async def test_real_clis_fork_on_a_worker_and_the_fork_goes_on_from_the_copy(temporal_address: str, tmp_path: Path) -> None:
    """`agent.fork` copies the session on a worker (the activity `agentswf.fork`); the fork's
    turns resume the copy, and the parent's own session goes on apart from it."""
    async with ScriptedModel(script) as model:
        homes = tmp_path / "homes"
        runtimes = real_runtimes(model, homes)

        @workflow(name="forks", description="Each CLI remembers, is forked, and its fork is asked.")
        async def flow(wf):  # type: ignore[no-untyped-def]
            async def one(name: str) -> list[Any]:
                parent = await wf.agents.open(name, runtime=runtimes[name])
                first = await parent.run(f"Remember {REMEMBERED}. Answer done.", timeout=90)
                child = await parent.fork(f"{name}-fork")
                asked = await child.run("FORKED: what did I ask you to remember? Answer done.", timeout=90)
                return [first.value, asked.value, f"{name}-fork" in wf.agents]

            return dict(zip(CLIS, await wf.parallel(CLIS, one), strict=True))

        engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path, engine=engine)
    assert result.outcome == "completed", result.reason
    assert result.value == {name: ["done", "done", True] for name in CLIS}
    forked = [r for r in model.requests if r.conversation and "FORKED" in r.conversation.prompt]
    assert {r.dialect for r in forked} == {"anthropic", "responses", "chat"}
    assert all(any(REMEMBERED in str(item) for item in r.conversation.history) for r in forked)  # the copy resumed
    turns = [line for line in (result.run_dir / "turns.jsonl").read_text().splitlines() if '"kind":"fork"' in line]
    assert len(turns) == len(CLIS)
