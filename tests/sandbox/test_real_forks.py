"""A sandboxed agent forks, for real: claude, codex (its app-server) and pi, offline.

The CLI's fork runs in the parent's sandbox, with the parent's home (where its session is); the
copy is moved into the fork's own home, so the fork's turn resumes the parent's history while the
parent's home keeps only its own session, unchanged. A fork of an agent given a spec of its own
is in a sandbox of its own, from its cwd: given another cwd, it writes there and not the parent's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import msgspec
import pytest

import agentswf
from agentswf import Runtime, workflow
from agentswf.testing.models import Conversation, ScriptedModel, Shell, Text, claude_env, codex_env, find_cli, pi_env

from ..clis import CLIS, TAUGHT, needs_clis, real_runtimes
from .kit import needs_bwrap

pytestmark = [pytest.mark.anyio, needs_bwrap, needs_clis]
SESSIONS = (".claude/projects", ".codex/sessions", ".pi/agent/sessions")  # where each CLI keeps them, in a home


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    verdict: Literal["approve", "reject"]


@pytest.fixture(params=["asyncio"])
def anyio_backend(request):
    return request.param  # three real CLIs in sandboxes: once, on asyncio, is enough


def script(conv: Conversation):
    wfa, call = TAUGHT.search(conv.prompt).groups()  # type: ignore[union-attr]
    if conv.tool_results:
        return Text("Done.")
    if "FORK-TWO" in conv.prompt:  # the fork writes its own cwd, and tries its parent's
        return Shell(f"touch forked-here; touch ../parent/from-fork 2>/dev/null; {wfa} result {call} --verdict approve")
    return Shell(f"{wfa} result {call} --verdict approve")


def sessions(home: Path) -> dict[str, bytes]:
    """Every session file in a sandboxed agent's home, by its path there."""
    return {
        str(path.relative_to(home)): path.read_bytes()
        for place in SESSIONS for path in sorted((home / place).rglob("*")) if path.is_file()
    }


def texts(history: tuple) -> str:
    return msgspec.json.encode(list(history)).decode()


async def test_each_cli_forks_in_its_sandbox_the_fork_resumes_the_history_and_the_parent_is_unchanged(tmp_path: Path):
    for name in CLIS:
        for where in ("parent", "fork"):
            (tmp_path / name / where).mkdir(parents=True)
    async with ScriptedModel(script) as model:
        homes = tmp_path / "homes"
        runtimes = real_runtimes(model, homes)

        @workflow(name="sandboxed-fork", description="Each CLI forked in its sandbox.")
        async def flow(wf):
            async def one(name: str):
                parent = await wf.agents.open(
                    f"{name}-parent", runtime=runtimes[name], cwd=f"{name}/parent", sandbox={"write": ["."]}
                )
                first = await parent.run(f"PARENT-ONE {name} review it.", schema=Verdict, timeout=90)
                assert parent.launcher is not None
                home = parent.launcher.parent / "home"
                before = sessions(home)
                fork = await parent.fork(f"{name}-fork", cwd=f"{name}/fork")
                unchanged = sessions(home) == before  # the copy moved out, the parent's session as it was
                forked = await fork.run(f"FORK-TWO {name} review it.", schema=Verdict, timeout=90)
                later = await parent.run(f"PARENT-THREE {name} review it.", schema=Verdict, timeout=90)
                own = fork.sandbox is not parent.sandbox and fork.sandbox.spec.write == ((tmp_path / name / "fork").resolve(),)
                return [first.answered, unchanged, forked.answered or forked.outcome, forked.session != first.session, later.answered,
                        own, len(before)]

            return dict(zip(CLIS, await wf.parallel(CLIS, one)))

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    calls = [r.conversation for r in model.requests if r.conversation is not None]
    for name in CLIS:
        *flags, files = result.value[name]
        assert flags == [True] * 6 and files >= 1, (name, flags, files)
        forks = [c for c in calls if f"FORK-TWO {name}" in c.prompt]
        assert forks and all(f"PARENT-ONE {name}" in texts(c.history) for c in forks), name  # the parent's history
        later = [c for c in calls if f"PARENT-THREE {name}" in c.prompt]
        assert later and all("FORK-TWO" not in texts(c.history) for c in later), name
        assert (tmp_path / name / "fork" / "forked-here").exists(), name  # its own cwd, written
        assert not (tmp_path / name / "parent" / "from-fork").exists(), name  # its parent's, not


@pytest.mark.parametrize("cli", ["codex", "pi"])  # codex's copy goes on from its parent's rollout; pi's is named by its file
async def test_a_fork_shares_a_sandbox_of_wf_sandboxes_and_a_fork_of_the_fork_resumes_both_histories(tmp_path: Path, cli):
    (tmp_path / "ws").mkdir()
    async with ScriptedModel(script) as model:
        env = {"codex": codex_env, "pi": pi_env}[cli](model, tmp_path / "home")
        runtime = Runtime(harness=cli, command=(find_cli(cli),), env=env, model="fake/fake-model" if cli == "pi" else None)

        @workflow(name="shared-fork", description="A fork, and its fork, in the parent's sandbox.")
        async def flow(wf):
            box = await wf.sandboxes.open("box", cwd="ws", write=["."])
            parent = await wf.agents.open("parent", runtime=runtime, sandbox=box)
            await parent.run("PARENT-ONE review it.", schema=Verdict, timeout=90)
            child = await parent.fork("child")
            await child.run("FORK-TWO child review it.", schema=Verdict, timeout=90)
            grandchild = await child.fork("grandchild")
            last = await grandchild.run("GRANDCHILD-THREE review it.", schema=Verdict, timeout=90)
            return [child.sandbox is box, grandchild.sandbox is box, last.answered or last.outcome]

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    assert result.value == [True, True, True]
    calls = [r.conversation for r in model.requests if r.conversation is not None]
    last = [c for c in calls if "GRANDCHILD-THREE" in c.prompt]
    assert last and all("PARENT-ONE" in texts(c.history) and "FORK-TWO" in texts(c.history) for c in last)
    assert (tmp_path / "ws" / "forked-here").exists()  # the child wrote the sandbox's cwd, as its parent may


async def test_a_fork_in_the_runs_sandbox_is_in_it_from_its_own_cwd(tmp_path: Path):
    from agentswf.sandbox.spec import RunSandboxFile

    for where in ("parent", "fork"):
        (tmp_path / "claude" / where).mkdir(parents=True)
    async with ScriptedModel(script) as model:
        runtime = Runtime(harness="claude", command=(find_cli("claude"),), env=claude_env(model, tmp_path / "home"))

        @workflow(name="run-sandbox-fork", description="A fork in the run's sandbox.")
        async def flow(wf):
            parent = await wf.agents.open("parent", runtime=runtime, cwd="claude/parent")
            await parent.run("PARENT-ONE claude review it.", schema=Verdict, timeout=90)
            fork = await parent.fork("fork", cwd="claude/fork")
            forked = await fork.run("FORK-TWO claude review it.", schema=Verdict, timeout=90)
            return [forked.answered or forked.outcome, [str(path) for path in fork.sandbox.spec.write]]

        run_box = RunSandboxFile(write=(".",))
        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path, sandbox=run_box)
    assert result.outcome == "completed", result.reason
    assert result.value == [True, [str((tmp_path / "claude" / "fork").resolve())]]  # "." is the fork's cwd
    calls = [r.conversation for r in model.requests if r.conversation is not None]
    forks = [c for c in calls if "FORK-TWO" in c.prompt]
    assert forks and all("PARENT-ONE" in texts(c.history) for c in forks)
    assert (tmp_path / "claude" / "fork" / "forked-here").exists()
    assert not (tmp_path / "claude" / "parent" / "from-fork").exists()
