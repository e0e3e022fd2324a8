"""What a sandboxed agent leaves in a repository it may write for your next `git status` to run,
undone as its attempt ends (`sandbox.gitsweep`): without a sandbox here, the agent's side played
by the test between `read_state` and `sweep` (test_review3_sandbox has the attacks in bwrap)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agentswf.sandbox.gitsweep import GitState, read_state, repairs, sweep

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git isn't installed")

GIT = ["git", "-c", "user.name=a", "-c", "user.email=a@b"]


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run([*GIT, "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env).stdout


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a").write_text("a\n")
    _git(repo, "add", "a")
    _git(repo, "commit", "-qm", "start")
    return repo


def test_a_commondir_made_is_removed_and_one_changed_put_back(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    git_dir = repo / ".git"
    (git_dir / "worktrees" / "w").mkdir(parents=True)
    (git_dir / "worktrees" / "w" / "commondir").write_bytes(b"../..\n")
    before = read_state(git_dir, repo)
    stash = tmp_path / "stash"
    shutil.copytree(git_dir, stash)
    (stash / "config").write_text(f"[core]\n\tfsmonitor = touch {tmp_path}/OWNED; false\n")
    (git_dir / "commondir").write_text(f"{stash}\n")
    (git_dir / "worktrees" / "w" / "commondir").unlink()
    (git_dir / "worktrees" / "w" / "commondir").symlink_to(tmp_path / "elsewhere")  # written through, it would make one
    lines = sweep(git_dir, repo, before)
    assert len(lines) == 2 and all("put back as it was" in line for line in lines), lines
    assert not (git_dir / "commondir").exists() and not (tmp_path / "elsewhere").exists()
    assert (git_dir / "worktrees" / "w" / "commondir").read_bytes() == b"../..\n"
    _git(repo, "status")
    assert not (tmp_path / "OWNED").exists()


def test_a_submodule_added_is_taken_out_of_the_index_and_left_on_disk(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before = read_state(repo / ".git", repo)
    sub = repo / "sub"
    sub.mkdir()
    _git(sub, "init", "-q")
    _git(sub, "commit", "-q", "--allow-empty", "-m", "sub")
    _git(sub, "config", "core.fsmonitor", f"touch {tmp_path}/OWNED; false")
    _git(repo, "add", "sub")
    assert read_state(repo / ".git", repo).gitlinks == {"sub"}
    [line] = sweep(repo / ".git", repo, before)
    assert "taken out of the index" in line, line
    assert read_state(repo / ".git", repo).gitlinks == frozenset() and (sub / ".git" / "config").exists()
    assert "?? sub/" in _git(repo, "status", "--porcelain")
    assert not (tmp_path / "OWNED").exists()


def test_nothing_changed_is_nothing_undone(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before = read_state(repo / ".git", repo)
    (repo / "b").write_text("the agent's work\n")
    _git(repo, "add", "b")
    assert sweep(repo / ".git", repo, before) == []
    assert "A  b" in _git(repo, "status", "--porcelain")


def test_repairs_undo_only_what_changed() -> None:
    one, two = Path("/r/.git/commondir"), Path("/r/.git/worktrees/w/commondir")
    before = GitState({one: None, two: b"../..\n"}, frozenset({"kept"}))
    after = GitState({one: b"/tmp/x\n", two: b"../..\n"}, frozenset({"kept", "new"}))
    undo = repairs(before, after)
    assert dict(undo.pointers) == {one: None} and undo.gitlinks == ("new",)
    assert repairs(after, after).pointers == {} and repairs(after, after).gitlinks == ()


def _with_submodule(tmp_path: Path) -> Path:
    lib = tmp_path / "lib"
    lib.mkdir()
    _git(lib, "init", "-q")
    _git(lib, "commit", "-q", "--allow-empty", "-m", "lib")
    repo = _repo(tmp_path)
    _git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "sub")
    _git(repo, "commit", "-qm", "with a submodule")
    return repo


def test_a_submodules_git_file_pointed_elsewhere_is_put_back(tmp_path: Path) -> None:
    repo = _with_submodule(tmp_path)
    link = repo / "sub" / ".git"
    was = link.read_bytes()
    before = read_state(repo / ".git", repo)
    mine = tmp_path / "mine"
    mine.mkdir()
    _git(mine, "init", "-q")
    _git(mine, "config", "core.fsmonitor", f"touch {tmp_path}/OWNED; false")
    link.write_text(f"gitdir: {mine}/.git\n")
    [line] = sweep(repo / ".git", repo, before)
    assert "put back as it was" in line and link.read_bytes() == was, line
    (repo / "sub" / "x").write_text("so that status looks inside\n")
    _git(repo, "status")
    assert not (tmp_path / "OWNED").exists()


def test_a_repository_made_in_a_submodules_empty_checkout_is_moved_aside(tmp_path: Path) -> None:
    repo = _with_submodule(tmp_path)
    _git(repo, "submodule", "deinit", "-q", "sub")  # not checked out: an empty directory
    before = read_state(repo / ".git", repo)
    _git(repo / "sub", "init", "-q")
    _git(repo / "sub", "config", "core.fsmonitor", f"touch {tmp_path}/OWNED; false")
    [line] = sweep(repo / ".git", repo, before)
    assert "moved aside" in line and not (repo / "sub" / ".git").exists(), line
    assert any(path.name.startswith(".git.") for path in (repo / "sub").iterdir())
    _git(repo, "status")
    assert not (tmp_path / "OWNED").exists()


def test_a_commondir_made_in_a_submodules_git_directory_is_removed(tmp_path: Path) -> None:
    """A submodule's git directory (`.git/modules/<name>`) is read by your `git status` too, and
    its `commondir` is not held read-only: one made there is swept as the repository's own."""
    repo = _repo(tmp_path)
    lib = tmp_path / "lib"
    lib.mkdir()
    _git(lib, "init", "-q")
    _git(lib, "commit", "-q", "--allow-empty", "-m", "lib")
    _git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "sub")
    _git(repo, "commit", "-qm", "with a submodule")
    modules = repo / ".git" / "modules" / "sub"
    before = read_state(repo / ".git", repo)
    stash = tmp_path / "stash"
    shutil.copytree(modules, stash)
    (stash / "config").write_text(f"[core]\n\tfsmonitor = touch {tmp_path}/OWNED; false\n")
    (modules / "commondir").write_text(f"{stash}\n")
    lines = sweep(repo / ".git", repo, before)
    assert lines and all("made in the sandbox" in line for line in lines), lines
    assert not (modules / "commondir").exists()
    (repo / "sub" / "x").write_text("changed, so that status looks inside\n")
    subprocess.run(["git", "-C", str(repo), "status"], capture_output=True, check=False)
    assert not (tmp_path / "OWNED").exists()
