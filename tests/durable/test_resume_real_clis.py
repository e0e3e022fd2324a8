"""A continued stage's agents resume their native sessions: claude, codex and pi for real (the CLIs
from npm, offline, against a scripted model), and the model sees the earlier attempt's history.

Skipped, saying where it looked, when the CLIs aren't installed (`.ci/run` installs them).
"""

from __future__ import annotations

import pytest

import agentswf
from agentswf import Runtime, workflow
from agentswf.engine.record.attempts import read_attempts, read_sessions, read_stages
from agentswf.testing.models import (
    Conversation,
    ScriptedModel,
    Shell,
    Text,
    claude_env,
    find_cli,
)

from ..clis import CLIS, TAUGHT, needs_clis, real_runtimes

pytestmark = [
    pytest.mark.anyio,
    needs_clis,
]

REMEMBERED = "PINEAPPLE-7"  # said in attempt 1's turn; attempt 2's model request must carry it


def script(conv: Conversation):
    found = TAUGHT.search(conv.prompt)
    if found is None or conv.tool_results:
        return Text("Finished.")
    wfa, call = found.groups()
    return Shell(f"{wfa} result {call} done")


@pytest.fixture(params=["asyncio"])
def anyio_backend(request):
    return request.param


async def test_a_continued_stage_resumes_its_agents_native_sessions(tmp_path):
    fail = tmp_path / "fail"
    fail.touch()
    async with ScriptedModel(script) as model:
        homes = tmp_path / "homes"
        runtimes = real_runtimes(model, homes)

        @workflow(name="resume", description="A stage of three CLIs that fails after their first turns.")
        async def flow(wf):
            agents = {name: await wf.agents.open(name, runtime=runtimes[name]) for name in CLIS}

            async def review() -> dict:
                async def first(name: str) -> bool:
                    return (await agents[name].run(f"Remember {REMEMBERED}. Answer done.", id="first", timeout=90)).answered

                async def second(name: str) -> str:
                    return (await agents[name].run("What did I ask you to remember? Answer done.", timeout=90)).value

                assert all(await wf.parallel(CLIS, first))
                if fail.exists():
                    raise RuntimeError("the review broke after the first turns")
                return dict(zip(CLIS, await wf.parallel(CLIS, second)))

            return await wf.stage("review", review)

        failed = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
        assert failed.outcome == "failed" and "the review broke" in failed.reason
        before = len(model.requests)
        fail.unlink()
        done = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path, continue_from=failed.run_id)
    assert done.outcome == "completed", done.reason
    assert done.value == {name: "done" for name in CLIS}
    later = [r for r in model.requests[before:] if r.conversation and "What did I ask" in r.conversation.prompt]
    assert {r.dialect for r in later} == {"anthropic", "responses", "chat"}
    # resumed: each CLI's request in attempt 2 carries attempt 1's conversation
    assert all(any(REMEMBERED in str(item) for item in r.conversation.history) for r in later)
    assert read_attempts(done.run_dir)[1].reused_turns == len(CLIS)  # the id'd first turns: given back, not run
    review = read_stages(done.run_dir)["review"]  # the stage's record: its agents' sessions, its usage
    assert {(record.agent, record.harness) for record in review.sessions} == {(name, name) for name in CLIS}
    assert all(record.session for record in review.sessions) and review.usage is not None and review.turns == len(CLIS)
    opened = [line for line in read_sessions(done.run_dir) if line["attempt"] == 2]
    assert {line["agent"] for line in opened if line.get("resumed")} == set(CLIS), opened
    # what a CLI reports on resume as its session's running total, less what attempt 1's turns took:
    # each resumed turn counts its own two model requests, as the turn before it did, not the session's
    by_attempt = {(turn.agent, turn.attempt): turn.usage for turn in done.usage.by_turn}
    for name in CLIS:
        first, second = by_attempt[(name, 1)], by_attempt[(name, 2)]
        assert first is not None and second is not None, name
        assert (second.input_tokens, second.output_tokens, second.cost_usd) == (
            first.input_tokens, first.output_tokens, first.cost_usd
        ), name


async def test_an_agent_whose_turns_were_given_back_forks_from_its_resumed_session(tmp_path):
    """In a continued run, an agent whose only turn was in a stage given back has had no turn of this
    attempt, but its session has that turn: it forks, and the fork's turn carries that history."""
    fail = tmp_path / "fail"
    fail.touch()
    async with ScriptedModel(script) as model:
        runtime = Runtime(harness="claude", command=(find_cli("claude"),), env=claude_env(model, tmp_path / "home"))

        @workflow(name="fork-resumed", description="A stage's turn, then a fork in a stage that fails once.")
        async def flow(wf):
            agent = await wf.agents.open("a", runtime=runtime)

            async def learn() -> bool:
                return (await agent.run(f"Remember {REMEMBERED}. Answer done.", timeout=90)).answered

            async def branch() -> str:
                if fail.exists():
                    raise RuntimeError("the branch broke before its fork")
                fork = await agent.fork("b")
                return (await fork.run("What did I ask you to remember? Answer done.", timeout=90)).value

            assert await wf.stage("learn", learn)
            return await wf.stage("branch", branch)

        failed = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
        assert failed.outcome == "failed" and "the branch broke" in failed.reason
        fail.unlink()
        before = len(model.requests)
        done = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path, continue_from=failed.run_id)
    assert done.outcome == "completed" and done.value == "done", done.reason
    later = [r for r in model.requests[before:] if r.conversation and "What did I ask" in r.conversation.prompt]
    assert later and all(any(REMEMBERED in str(item) for item in r.conversation.history) for r in later)
