"""What an agent (or the world) can do to a worktree, and how the run's end copes: a worktree
deleted, moved, replaced by a symlink, stripped of its .git; submodules; git's variables in
the run's environment; two runs at once. Nothing with work in it is removed, and the user's
tree and index stay byte-for-byte as they were."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import anyio
import pytest

import agentswf
from agentswf import Workflow
from agentswf.workflow.worktrees import SUBMODULES_KEEP

from .kit import agent, branches, git, make_repo, registered, run_in, run_manifest, snapshot

pytestmark = pytest.mark.anyio


async def one_agent(repo: Path, tmp_path: Path, body: str) -> agentswf.RunResult:
    async def work(wf: Workflow) -> str:
        opened = await wf.agents.open("a", runtime=agent(tmp_path, "a", body), cwd=wf.worktree("w"))
        return (await opened.run("Work.")).outcome.kind

    result = await run_in(repo, work)
    assert result.value == "answered", result.reason
    return result


@pytest.mark.parametrize(
    ("body", "state", "reason", "branch_kept"),
    [
        ('cd / && rm -rf "$OLDPWD"', "removed", "its directory was deleted; nothing was committed", False),
        (
            'git commit -q --allow-empty -m mine && cd / && rm -rf "$OLDPWD"',
            "branch-kept",
            "its directory was deleted; 1 commit on its branch",
            True,
        ),
    ],
)
async def test_a_worktree_the_agent_deleted_leaves_git_clean_and_its_commits_on_its_branch(
    tmp_path: Path, body: str, state: str, reason: str, branch_kept: bool
) -> None:
    repo = make_repo(tmp_path)
    before = snapshot(repo)
    [end] = (await one_agent(repo, tmp_path, body)).worktrees
    assert (end.state, end.reason) == (state, reason)
    assert registered(repo) == []  # git's entry for it is gone too
    assert (end.branch in branches(repo)) == branch_kept
    assert snapshot(repo) == before


async def test_a_worktree_the_agent_moved_is_kept_where_it_went(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    body = 'git worktree unlock "$PWD" && git worktree move "$PWD" "$OUT/moved"'
    [end] = (await one_agent(repo, tmp_path, body)).worktrees
    assert (end.state, end.reason) == ("kept", f"it was moved to {tmp_path / 'moved'}; left as it is")
    assert registered(repo) == [str(tmp_path / "moved")]
    assert end.branch in branches(repo)


@pytest.mark.parametrize(
    "body",
    [
        "echo mine > work.txt && rm .git",  # no longer a worktree: git would find the user's repository above it
        'echo "gitdir: $(git rev-parse --git-common-dir)" > .git',  # pointed at the user's repository
        'here="$PWD" && cd / && rm -rf "$here" && ln -s "$OUT/repo" "$here"',  # the user's repository, by a symlink
    ],
)
async def test_a_worktree_replaced_by_something_else_is_left_alone(tmp_path: Path, body: str) -> None:
    repo = make_repo(tmp_path)
    before = snapshot(repo)
    [end] = (await one_agent(repo, tmp_path, body)).worktrees
    assert end.state == "kept" and "something else is at its path" in end.reason
    assert snapshot(repo) == before  # nothing read it as the user's repository, nothing removed it


async def test_a_worktree_with_populated_submodules_is_kept_not_forced(tmp_path: Path) -> None:
    library = make_repo(tmp_path, "library")
    git(library, "stash", "-u", "-q")  # its own uncommitted work, away: a submodule is checked out from a commit
    repo = make_repo(tmp_path)
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "lib")
    git(repo, "commit", "-qm", "a submodule")
    before = snapshot(repo)
    body = "git -c protocol.file.allow=always submodule update --init -q && test -f lib/README"
    [end] = (await one_agent(repo, tmp_path, body)).worktrees
    assert (end.state, end.reason) == ("kept", SUBMODULES_KEEP)  # git won't remove it: said before it is tried
    assert (end.path / "lib" / "README").exists()
    assert snapshot(repo) == before


async def test_gits_variables_in_the_runs_environment_dont_reach_the_users_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path)
    before = snapshot(repo)
    # As in a git hook: without dropping these, `git worktree add` checks the base out into the user's tree.
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(repo))
    monkeypatch.setenv("GIT_INDEX_FILE", str(repo / ".git" / "index"))
    [end] = (await one_agent(repo, tmp_path, 'cat README > "$OUT/seen"')).worktrees
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_WORK_TREE")
    monkeypatch.delenv("GIT_INDEX_FILE")
    assert (tmp_path / "seen").read_text() == "hello\n"  # the base's README, checked out in the worktree
    assert end.state == "removed"
    assert snapshot(repo) == before


async def test_two_runs_at_once_in_one_repository_get_their_own_worktrees(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    results: list[agentswf.RunResult] = []

    async def commits(wf: Workflow) -> None:
        opened = await wf.agents.open(
            "a", runtime=agent(tmp_path, "a", 'echo "$PWD" > mine && git add mine && git commit -qm mine'), cwd=wf.worktree("w")
        )
        await opened.run("Work.")

    async def one() -> None:
        results.append(await run_in(repo, commits))

    async with anyio.create_task_group() as group:
        group.start_soon(one)
        group.start_soon(one)
    ends = [end for result in results for end in result.worktrees]
    assert [end.state for end in ends] == ["kept", "kept"]
    assert ends[0].branch != ends[1].branch and ends[0].path != ends[1].path
    for end in ends:
        assert git(repo, "show", f"{end.branch}:mine").strip() == str(end.path)


async def test_commits_on_a_detached_head_keep_the_worktree_even_with_keep_never(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)

    async def detached(wf: Workflow) -> None:
        body = "git checkout -q --detach && git commit -q --allow-empty -m 'on no branch'"
        opened = await wf.agents.open("a", runtime=agent(tmp_path, "a", body), cwd=wf.worktree("w", keep="never"))
        await opened.run("Work.")

    [end] = (await run_in(repo, detached)).worktrees
    assert end.state == "kept" and "holds commits its branch doesn't" in end.reason
    assert git(end.path, "log", "-1", "--format=%s").strip() == "on no branch"  # the commit only its HEAD holds


def test_a_manifest_written_over_to_name_another_branch_or_path_is_not_read(tmp_path: Path) -> None:
    from agentswf.workflow.worktrees import Manifest, Worktree, read_manifest, write_manifest

    directory = tmp_path / "20261201-090020-fc66" / "worktrees"
    directory.mkdir(parents=True)
    own = Worktree(
        "fixer", directory / "fixer", "awf/20261201-090020-fc66/fixer", "0" * 40, "on-change",
        tmp_path, tmp_path / ".git" / "worktrees" / "fixer", tmp_path / ".git", "HEAD", "20261201-090020-fc66",
    )  # fmt: skip
    write_manifest(directory, Manifest(own, "made"))
    assert read_manifest(directory / "fixer.json") == Manifest(own, "made")
    for forged in (
        replace(own, branch="main"),  # --clean would delete the user's branch
        replace(own, path=tmp_path),  # or remove another directory
        replace(own, run_id="another-run"),
    ):
        write_manifest(directory, Manifest(forged, "ended"))
        assert read_manifest(directory / "fixer.json") is None


@pytest.mark.parametrize("shape", ["over the cap", "a symbolic link"])
def test_a_manifest_over_the_cap_or_through_a_link_is_not_read_and_is_named(tmp_path: Path, shape: str) -> None:
    """An unsandboxed agent writes a manifest of gigabytes (its reader would hold it all) or links
    one to a file elsewhere: neither is read, whatever it says, and `awf worktrees` says why."""
    import subprocess
    import sys

    from agentswf.workflow.worktrees import MAX_MANIFEST_BYTES, read_manifest

    directory, _ = run_manifest(tmp_path)
    runs = tmp_path / "runs"
    manifest = directory / "w.json"
    if shape == "over the cap":  # still the manifest to a decoder: JSON allows the spaces after it
        with manifest.open("a") as file:
            file.write(" " * MAX_MANIFEST_BYTES)
        expected = f"over {MAX_MANIFEST_BYTES} bytes"
    else:
        manifest.rename(tmp_path / "elsewhere.json")
        manifest.symlink_to(tmp_path / "elsewhere.json")
        expected = "not a regular file"
    assert read_manifest(manifest) is None
    done = subprocess.run(
        [sys.executable, "-m", "agentswf", "worktrees", "--run-root", str(runs)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert f"{manifest} is not read: {expected}" in done.stderr and done.stdout == "", (done.stdout, done.stderr)


@pytest.mark.parametrize("swapped_in", ["a file over the cap", "a symbolic link"])
def test_a_git_file_swapped_after_it_was_checked_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swapped_in: str
) -> None:
    """An agent replaces a worktree's `.git` file just as the run opens it (after any check made
    by path): what is read is what was opened, never more than MAX_LINK_BYTES, never through a link."""
    import os

    from agentswf.workflow import worktrees

    link, elsewhere = tmp_path / ".git", tmp_path / "elsewhere"
    link.write_text("gitdir: /the/real/one\n")
    elsewhere.write_text("gitdir: /the/agents\n")
    real_open = os.open

    def swap_then_open(path, *args, **kwargs):  # the agent wins the race to the open
        if Path(path) == link and link.read_text() == "gitdir: /the/real/one\n":
            link.unlink()
            if swapped_in == "a symbolic link":
                link.symlink_to(elsewhere)
            else:
                link.write_text("gitdir: /the/agents" + " " * (4 * worktrees.MAX_LINK_BYTES))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", swap_then_open)
    assert worktrees.read_link(link) is None
