"""A continued Temporal run's agent resumes its native session, as a local continue's does: the real
claude CLI (offline, against a scripted model) remembers in the continued attempt what it was told in
the first, whose stage isn't run again."""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

import agentswf
from agentswf import Runtime, workflow
from agentswf.engine.record.attempts import read_sessions
from agentswf.temporal import TemporalEngine
from agentswf.testing.models import ScriptedModel, claude_env, find_cli

from .test_real_clis import REMEMBERED, script


@pytest.fixture(params=["asyncio"])  # the scripted model and the engine on one loop
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.needs("claude")
async def test_a_continued_agent_resumes_its_session_on_temporal(temporal_address: str, tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    async with ScriptedModel(script) as model:
        runtime = Runtime(harness="claude", command=(find_cli("claude"),), env=claude_env(model, tmp_path / "home"))

        @workflow(name="recall", description="A stage that tells the agent something; a turn, after a failure, that asks it.")
        async def recall(wf):  # type: ignore[no-untyped-def]
            agent = await wf.agents.open("a", runtime=runtime)

            async def remember() -> str:
                return (await agent.run(f"Remember {REMEMBERED}. Answer done.", timeout=90)).value

            told = await wf.stage("remember", remember)
            if not ready.exists():
                raise RuntimeError("not ready yet")
            return [told, (await agent.run("What did I ask you to remember? Answer done.", timeout=90)).value]

        engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
        first = await agentswf.run(recall, run_root=tmp_path / "runs", cwd=tmp_path, engine=engine)
        assert first.outcome == "failed" and "not ready yet" in (first.reason or ""), first.reason
        ready.touch()
        again = await agentswf.run(recall, run_root=tmp_path / "runs", continue_from=first.run_id, engine=engine)
    assert again.outcome == "completed" and again.value == ["done", "done"], again.reason
    told = [r for r in model.requests if r.conversation and REMEMBERED in r.conversation.prompt
            and not r.conversation.tool_results]  # each turn's first request: the later have its tool's result
    asked = [r for r in model.requests if r.conversation and "What did I ask" in r.conversation.prompt]
    assert len(told) == 1 and asked  # the stage wasn't run again
    assert all(any(REMEMBERED in str(item) for item in r.conversation.history) for r in asked)  # resumed
    [_, resumed] = read_sessions(first.run_dir)
    assert (resumed["attempt"], resumed["agent"], resumed["harness"]) == (2, "a", "claude")
    assert resumed["resumed"] and "fresh" not in resumed
