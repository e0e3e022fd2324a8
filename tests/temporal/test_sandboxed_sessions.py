"""Sandboxed real CLIs on Temporal (claude, codex and pi from npm, offline, against a scripted
model): each turn is an activity that opens the agent afresh on its worker, and its sandboxed
home, where its CLI keeps its session, is kept on the worker from one turn to the next, so the
second turn resumes the first's history, and a compaction finds the session too.

The worker's run root is inside the directory the sandbox writes, covered there: the kept home is
still bound, and no home but the agent's own is seen.
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

from ..clis import CLIS, TAUGHT, compacting, needs_clis, real_runtimes
from ..sandbox.kit import needs_bwrap

pytestmark = [needs_clis, needs_bwrap]

REMEMBERED = "PINEAPPLE-7"  # said in the first turn's activity; the second's model request must carry it
SUMMARY = "SUMMARY: the answer was done"


def script(conv: Conversation) -> Any:
    if compacting(conv):
        return Text(SUMMARY)
    found = TAUGHT.search(conv.prompt)
    assert found is not None
    if conv.tool_results:
        return Text("Finished.")
    wfa, call = found.groups()
    return Shell(f'echo "beside=$(ls -A "$HOME/.." | wc -l)"; {wfa} result {call} done')


@pytest.fixture(params=["asyncio"])  # the scripted model and the engine on one loop; trio runs elsewhere here
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_sandboxed_clis_on_temporal_resume_their_sessions_from_one_turn_activity_to_the_next(
    temporal_address: str, tmp_path: Path
) -> None:
    work = tmp_path / "ws"
    work.mkdir()
    async with ScriptedModel(script) as model:
        homes = tmp_path / "homes"
        runtimes = real_runtimes(model, homes)

        @workflow(name="sandboxed-remember", description="Three sandboxed CLIs, two turns each, each an activity.")
        async def flow(wf):  # type: ignore[no-untyped-def]
            agents = {name: await wf.agents.open(name, runtime=runtimes[name], cwd="ws", sandbox={"write": ["."]})
                      for name in CLIS}

            async def both(name: str) -> list[Any]:
                first = await agents[name].run(f"Remember {REMEMBERED}. Answer done.", timeout=90)
                second = await agents[name].run("What did I ask you to remember? Answer done.", timeout=90)
                said = [first.value, second.value if second.answered else second.outcome.reason]
                if name == "claude":
                    compacted = await agents[name].compact("keep FOCUS-MARK", timeout=90)
                    said.append(compacted.value if compacted.answered else compacted.outcome.reason)
                return said

            return dict(zip(CLIS, await wf.parallel(CLIS, both), strict=True))

        worker_root = work / ".awf" / "temporal"  # where the sandbox writes: covered, but for each agent's own home
        engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=worker_root)
        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path, engine=engine)
    assert result.outcome == "completed", result.reason
    assert result.value == {"claude": ["done", "done", SUMMARY], "codex": ["done", "done"], "pi": ["done", "done"]}
    later = [r for r in model.requests if r.conversation and "What did I ask" in r.conversation.prompt]
    assert {r.dialect for r in later} == {"anthropic", "responses", "chat"}
    assert all(any(REMEMBERED in str(item) for item in r.conversation.history) for r in later)  # resumed
    summarized = [r for r in model.requests if r.conversation and compacting(r.conversation)]
    assert summarized and any(REMEMBERED in str(r.conversation.history) for r in summarized)  # the session compacted
    kept = worker_root / "homes" / "sandboxed-remember" / result.run_id
    assert sorted(path.name for path in kept.iterdir()) == sorted(CLIS)  # one home an agent, for the run
    seen = [output for r in model.requests if r.conversation for output in r.conversation.tool_results]
    assert len([output for output in seen if "beside=1" in output]) == 2 * len(CLIS), seen  # no other home beside its own


@pytest.mark.needs("claude")
async def test_a_continued_runs_sandboxed_agent_finds_its_kept_home_on_temporal(temporal_address: str, tmp_path: Path) -> None:
    """`awf continue` keeps the run's id, so its sandboxed agent, opened again, resumes the session its
    home kept from the attempt before."""
    (tmp_path / "ws").mkdir()
    ready = tmp_path / "ready"
    async with ScriptedModel(script) as model:
        runtime = Runtime(harness="claude", command=(find_cli("claude"),), env=claude_env(model, tmp_path / "home"))

        @workflow(name="sandboxed-recall", description="A stage that tells a sandboxed agent something; after a failure, a turn that asks it.")
        async def recall(wf):  # type: ignore[no-untyped-def]
            agent = await wf.agents.open("a", runtime=runtime, sandbox={"cwd": "ws"})

            async def remember() -> str:
                return (await agent.run(f"Remember {REMEMBERED}. Answer done.", timeout=90)).value

            told = await wf.stage("remember", remember)
            if not ready.exists():
                raise RuntimeError("not ready yet")
            asked = await agent.run("What did I ask you to remember? Answer done.", timeout=90)
            return [told, asked.value if asked.answered else asked.outcome.reason]

        engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
        first = await agentswf.run(recall, run_root=tmp_path / "runs", cwd=tmp_path, engine=engine)
        assert first.outcome == "failed" and "not ready yet" in (first.reason or ""), first.reason
        ready.touch()
        again = await agentswf.run(recall, run_root=tmp_path / "runs", continue_from=first.run_id, engine=engine)
    assert again.outcome == "completed" and again.value == ["done", "done"], again.reason
    asked = [r for r in model.requests if r.conversation and "What did I ask" in r.conversation.prompt]
    assert asked and all(any(REMEMBERED in str(item) for item in r.conversation.history) for r in asked)  # resumed
