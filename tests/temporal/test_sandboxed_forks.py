"""Sandboxed real CLIs forked on Temporal (claude, codex and pi from npm, offline, against a scripted
model): the fork activity runs the CLI's fork in the parent's sandbox, with the home its worker keeps
for it, and places the copy in the fork's kept home, made then; the fork's turn, opened afresh on a
worker, resumes the parent's history, and the parent's next turn doesn't carry the fork's.

The worker's run root is inside the directory the sandboxes write, covered there, as in
test_sandboxed_sessions.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import uuid4

import msgspec
import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

import agentswf
from agentswf import Runtime, workflow
from agentswf.sandbox.runner import KEPT_FORKS_NAME, REPLACED_PREFIX
from agentswf.temporal import TemporalEngine
from agentswf.testing.models import Conversation, ScriptedModel, Shell, Text, claude_env, find_cli, pi_env

from ..clis import CLIS, TAUGHT, needs_clis, real_runtimes
from ..sandbox.kit import needs_bwrap

pytestmark = [needs_clis, needs_bwrap]


def script(conv: Conversation) -> Any:
    found = TAUGHT.search(conv.prompt)
    assert found is not None
    if conv.tool_results:
        return Text("Finished.")
    wfa, call = found.groups()
    if "FORK-TWO" in conv.prompt:  # the fork writes its own cwd, and tries its parent's
        return Shell(f"touch forked-here; touch ../parent/from-fork 2>/dev/null; {wfa} result {call} done")
    return Shell(f"{wfa} result {call} done")


def texts(history: tuple[Any, ...]) -> str:
    return msgspec.json.encode(list(history)).decode()


@pytest.fixture(params=["asyncio"])  # the scripted model and the engine on one loop; trio runs elsewhere here
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_sandboxed_clis_fork_on_temporal_the_fork_resumes_the_parents_history_and_the_parent_not_the_forks(
    temporal_address: str, tmp_path: Path
) -> None:
    for name in CLIS:
        for where in ("parent", "fork"):
            (tmp_path / "ws" / name / where).mkdir(parents=True)
    async with ScriptedModel(script) as model:
        homes = tmp_path / "homes"
        runtimes = real_runtimes(model, homes)

        @workflow(name="sandboxed-fork", description="Each CLI forked in its sandbox, each turn an activity.")
        async def flow(wf):  # type: ignore[no-untyped-def]
            async def one(name: str) -> list[Any]:
                parent = await wf.agents.open(
                    f"{name}-parent", runtime=runtimes[name], cwd=f"ws/{name}/parent", sandbox={"write": ["."]}
                )
                first = await parent.run(f"PARENT-ONE {name}. Answer done.", timeout=90)
                fork = await parent.fork(f"{name}-fork", cwd=f"ws/{name}/fork")
                forked = await fork.run(f"FORK-TWO {name}. Answer done.", timeout=90)
                later = await parent.run(f"PARENT-THREE {name}. Answer done.", timeout=90)
                return [first.value, forked.value if forked.answered else forked.outcome.reason,
                        later.value if later.answered else later.outcome.reason, forked.session != first.session]

            return dict(zip(CLIS, await wf.parallel(CLIS, one), strict=True))

        worker_root = tmp_path / "ws" / ".awf" / "temporal"  # where the sandboxes write: covered, but for each agent's own home
        engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=worker_root)
        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path, engine=engine)
    assert result.outcome == "completed", result.reason
    assert result.value == {name: ["done", "done", "done", True] for name in CLIS}, result.value
    calls = [r.conversation for r in model.requests if r.conversation is not None]
    for name in CLIS:
        forks = [c for c in calls if f"FORK-TWO {name}" in c.prompt]
        assert forks and all(f"PARENT-ONE {name}" in texts(c.history) for c in forks), name  # the parent's history
        later = [c for c in calls if f"PARENT-THREE {name}" in c.prompt]
        assert later and all(f"PARENT-ONE {name}" in texts(c.history) for c in later), name  # its own, resumed
        assert all("FORK-TWO" not in texts(c.history) for c in later), name  # not the fork's
        assert (tmp_path / "ws" / name / "fork" / "forked-here").exists(), name  # its own sandbox, from its cwd
        assert not (tmp_path / "ws" / name / "parent" / "from-fork").exists(), name  # not its parent's
    kept = worker_root / "homes" / "sandboxed-fork" / result.run_id
    assert sorted(path.name for path in kept.iterdir() if not path.name.startswith(".")) == sorted(
        f"{name}-{who}" for name in CLIS for who in ("parent", "fork")
    )  # one home an agent, the fork's made by the fork activity
    assert not list((kept / KEPT_FORKS_NAME).iterdir())  # every copy taken out placed


@pytest.mark.needs("pi")
async def test_a_fork_of_a_fork_shares_the_parents_sandbox_of_wf_sandboxes_on_temporal(
    temporal_address: str, tmp_path: Path
) -> None:
    """pi names a fork's session by its file in the home it was made in: the fork's turns, on a worker,
    resume it in the fork's own kept home; a fork of that fork goes on from both histories."""
    (tmp_path / "ws").mkdir()
    async with ScriptedModel(script) as model:
        runtime = Runtime(harness="pi", command=(find_cli("pi"),), model="fake/fake-model", env=pi_env(model, tmp_path / "home"))

        @workflow(name="shared-fork", description="A fork, and its fork, in the parent's sandbox.")
        async def flow(wf):  # type: ignore[no-untyped-def]
            box = await wf.sandboxes.open("box", cwd="ws", write=["."])
            parent = await wf.agents.open("parent", runtime=runtime, sandbox=box)
            await parent.run("PARENT-ONE. Answer done.", timeout=90)
            child = await parent.fork("child")
            await child.run("FORK-TWO child. Answer done.", timeout=90)
            grandchild = await child.fork("grandchild")
            last = await grandchild.run("GRANDCHILD-THREE. Answer done.", timeout=90)
            return [child.sandbox == parent.sandbox, grandchild.sandbox == parent.sandbox,
                    last.value if last.answered else last.outcome.reason]

        engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}",
                                worker_root=tmp_path / "w")
        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path, engine=engine)
    assert result.outcome == "completed", result.reason
    assert result.value == [True, True, "done"]
    calls = [r.conversation for r in model.requests if r.conversation is not None]
    last = [c for c in calls if "GRANDCHILD-THREE" in c.prompt]
    assert last and all("PARENT-ONE" in texts(c.history) and "FORK-TWO" in texts(c.history) for c in last)
    assert (tmp_path / "ws" / "forked-here").exists()  # the child wrote the sandbox's cwd, as its parent may
    kept = tmp_path / "w" / "homes" / "shared-fork" / result.run_id
    assert sorted(path.name for path in kept.iterdir()) == [KEPT_FORKS_NAME, "child", "grandchild", "parent"]


@pytest.mark.needs("claude")
async def test_a_continued_run_forks_its_sandboxed_agent_again_into_a_new_home(temporal_address: str, tmp_path: Path) -> None:
    """`awf continue` keeps the run's id, so the fork, asked again, finds its home of the attempt before:
    that one is set aside, and the fork resumes the new copy of its parent's session, which its
    second attempt's turn went on."""
    (tmp_path / "ws").mkdir()
    ready = tmp_path / "ready"
    async with ScriptedModel(script) as model:
        runtime = Runtime(harness="claude", command=(find_cli("claude"),), env=claude_env(model, tmp_path / "home"))

        @workflow(name="sandboxed-refork", description="A sandboxed agent's turn, a fork of it, a failure.")
        async def refork(wf):  # type: ignore[no-untyped-def]
            agent = await wf.agents.open("a", runtime=runtime, sandbox={"cwd": "ws"})
            said = "PARENT-AGAIN" if ready.exists() else "PARENT-ONE"  # the continue runs it again: no stage
            told = (await agent.run(f"{said}. Answer done.", timeout=90)).value
            fork = await agent.fork("alt")
            forked = await fork.run("FORK-TWO. Answer done.", timeout=90)
            if not ready.exists():
                raise RuntimeError("not ready yet")
            return [told, forked.value if forked.answered else forked.outcome.reason]

        engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
        first = await agentswf.run(refork, run_root=tmp_path / "runs", cwd=tmp_path, engine=engine)
        assert first.outcome == "failed" and "not ready yet" in (first.reason or ""), first.reason
        ready.touch()
        again = await agentswf.run(refork, run_root=tmp_path / "runs", continue_from=first.run_id, engine=engine)
    assert again.outcome == "completed" and again.value == ["done", "done"], again.reason
    forks = [r.conversation for r in model.requests
             if r.conversation and "FORK-TWO" in r.conversation.prompt and not r.conversation.tool_results]
    assert len(forks) == 2  # the fork's turn in each attempt
    # a new copy each time: the parent's history, and of the fork's turns only this one's prompt (claude's
    # history ends with it, its fork's /usage in the same message)
    assert all("PARENT-ONE" in texts(c.history) and texts(c.history).count("FORK-TWO") <= 1 for c in forks)
    assert "PARENT-AGAIN" in texts(forks[-1].history)  # the continue's: its parent's session as it went on
    kept = tmp_path / "w" / "homes" / "sandboxed-refork" / first.run_id
    assert len([path for path in kept.iterdir() if path.name.startswith(REPLACED_PREFIX)]) == 1  # the first attempt's fork
