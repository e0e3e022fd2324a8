"""A continued run goes on in the worktree its earlier attempt kept: the agent finds its work
there, on the same branch, instead of the attempt failing on a branch that exists."""

from __future__ import annotations

from pathlib import Path

import agentswf
from agentswf import workflow
from agentswf.engine.record.layout import read_lines

from .kit import git, make_repo

AGENT = 'echo more >> work.txt; test -e "$OK" || exit 1; printf done | "$WFA" result "$WFA_CALL_ID"'


def _flow(base: str):
    @workflow(name="goes-on", description="An agent that works in a worktree and fails until told it may finish.")
    async def goes_on(wf):
        path = wf.worktree("fixer", base=base)
        agent = await wf.agents.open("fixer", runtime=f"shell:{AGENT}", cwd=path)
        turn = await agent.run("Work.")
        if not turn.answered:
            wf.stop("not yet")
        return turn.value

    return goes_on


async def test_a_continued_run_goes_on_in_the_worktree_its_earlier_attempt_kept(tmp_path, monkeypatch):
    repo = make_repo(tmp_path)
    ok = tmp_path / "ok"
    monkeypatch.setenv("OK", str(ok))
    root = tmp_path / "runs"
    first = await agentswf.run(_flow("HEAD"), cwd=repo, run_root=root, env={"OK": str(ok)})
    assert first.outcome == "stopped"
    [kept] = first.worktrees
    assert kept.state == "kept" and (kept.path / "work.txt").read_text() == "more\n"

    ok.touch()
    again = await agentswf.run(_flow("HEAD"), cwd=repo, run_root=root, continue_from=first.run_id, env={"OK": str(ok)})
    assert again.outcome == "completed", again.reason
    [end] = again.worktrees
    assert (end.path, end.branch) == (kept.path, kept.branch)
    assert (Path(end.path) / "work.txt").read_text() == "more\nmore\n"  # the first attempt's work is there
    assert kept.branch in git(repo, "branch", "--list", kept.branch)
    said = [line["message"] for line in read_lines(again.run_dir / "log.jsonl") if line["message"].startswith("worktree ")]
    assert [said.count("worktree made"), said.count("worktree reused")] == [1, 1]  # made by the first attempt only


async def test_a_continued_run_that_asks_another_base_is_refused(tmp_path):
    repo = make_repo(tmp_path)
    root = tmp_path / "runs"
    first = await agentswf.run(_flow("HEAD"), cwd=repo, run_root=root, env={"OK": str(tmp_path / "never")})
    assert first.outcome == "stopped"
    again = await agentswf.run(_flow("HEAD~1"), cwd=repo, run_root=root, continue_from=first.run_id)
    assert again.outcome == "failed"
    assert "DefinitionError: worktree fixer: an earlier attempt of this run kept it with base='HEAD'" in (again.reason or "")
