"""What can't be a worktree is refused with a DefinitionError that says why, before anything
is made: a bad name or keep, no repository, no commits, a base that doesn't resolve, a branch
that exists, no git or an old one. Real git."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentswf import DefinitionError, Workflow
from agentswf.workflow.worktrees import RunWorktrees

from .kit import branches, git, make_repo, registered, run_in, snapshot

pytestmark = pytest.mark.anyio


async def refused(cwd: Path, make, match: str) -> None:  # type: ignore[no-untyped-def]
    """`make(wf)` raises DefinitionError matching `match` in a run in `cwd`; nothing is left made."""

    async def attempt(wf: Workflow) -> str:
        with pytest.raises(DefinitionError, match=match):
            make(wf)
        return "refused"

    result = await run_in(cwd, attempt)
    assert result.value == "refused", result.reason
    assert result.worktrees == ()


@pytest.mark.parametrize("name", ["", "..", "a/b", "a..b", ".x", "-x", "x.lock", "x.", "a b", "a:b", "x" * 65, 5])
async def test_a_name_that_cant_be_a_directory_and_a_branch_is_refused(tmp_path: Path, name: object) -> None:
    await refused(make_repo(tmp_path), lambda wf: wf.worktree(name), "is not a worktree's name")


async def test_keep_and_base_are_checked(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    await refused(repo, lambda wf: wf.worktree("w", keep="sometimes"), "keep is one of on-change, always, never")
    await refused(repo, lambda wf: wf.worktree("w", base="--orphan"), "base must name a commit")
    await refused(repo, lambda wf: wf.worktree("w", base="no-such-branch"), "'no-such-branch' is not a commit")
    await refused(repo, lambda wf: wf.worktree("w", base="HEAD:README"), "is not a commit")  # a blob


async def test_the_same_name_with_other_arguments_is_refused(tmp_path: Path) -> None:
    def twice(wf: Workflow) -> None:
        wf.worktree("w")
        wf.worktree("w", base="main~1")

    async def attempt(wf: Workflow) -> None:
        with pytest.raises(DefinitionError, match="was made with base='HEAD'"):
            twice(wf)

    result = await run_in(make_repo(tmp_path), attempt)
    assert [end.state for end in result.worktrees] == ["removed"]


async def test_no_repository_and_no_commits_are_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    await refused(plain, lambda wf: wf.worktree("w"), "to be in a git working tree")
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    await refused(empty, lambda wf: wf.worktree("w"), "has no commits yet; commit first")


async def test_a_branch_that_exists_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)

    def taken(wf: Workflow) -> None:
        git(repo, "branch", f"awf/{wf.run_id}/taken", "main~1")
        wf.worktree("taken")

    await refused(repo, taken, "exists already; it is left as it is")
    [mine] = [name for name in branches(repo) if name.endswith("/taken")]
    assert git(repo, "rev-parse", mine) == git(repo, "rev-parse", "main~1")


async def test_a_branch_git_cant_make_fails_the_add_and_leaves_nothing(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    before = snapshot(repo)

    def blocked(wf: Workflow) -> None:
        git(repo, "branch", f"awf/{wf.run_id}")  # a file where git needs a directory of refs
        wf.worktree("w")

    await refused(repo, blocked, "git worktree add failed")
    assert registered(repo) == []

    def after_failing(wf: Workflow) -> None:
        with pytest.raises(DefinitionError):
            blocked(wf)
        wf.worktree("w")

    await refused(repo, after_failing, "failed to be made earlier in this run; use another name")
    assert snapshot(repo) == before


async def test_no_git_or_an_old_git_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo(tmp_path)
    old = tmp_path / "old-git"
    old.mkdir()
    (old / "git").write_text("#!/bin/sh\necho 'git version 2.9.5'\n")
    (old / "git").chmod(0o755)
    monkeypatch.setenv("PATH", str(old))
    await refused(repo, lambda wf: wf.worktree("w"), r"needs git 2.17 or newer, not 'git version 2.9.5'")
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    await refused(repo, lambda wf: wf.worktree("w"), "needs git: git is not installed")


def test_nothing_is_made_once_the_run_has_ended(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    worktrees = RunWorktrees(run_id="r", run_dir=tmp_path / "run", cwd=repo)
    assert worktrees.finish() == []
    with pytest.raises(DefinitionError, match="the run has ended"):
        worktrees.make("late")
