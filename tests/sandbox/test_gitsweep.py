"""The git sweep's parts (`sandbox.gitsweep`): its decisions, the reads it bounds, and the states
attempts that overlap in a repository share (the attacks are in tests/security/test_review4_gitsweep)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agentswf.errors import HarnessError, SandboxRefused
from agentswf.sandbox import gitsweep
from agentswf.sandbox.gitsweep import (
    MAX_MODULE_GIT_DIRECTORIES,
    MAX_POINTER_BYTES,
    NOT_A_FILE,
    OVERSIZED,
    GitState,
    Sweeps,
    module_directories,
    read_state,
    repairs,
)
from agentswf.sandbox.runner import git_controls, unseen_git
from agentswf.sandbox.spec import ResolvedSpec

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git isn't installed")
GIT = ["git", "-c", "user.name=a", "-c", "user.email=a@b"]


def _repo(path: Path) -> Path:
    path.mkdir(parents=True)
    subprocess.run([*GIT, "-C", str(path), "init", "-q"], check=True)
    subprocess.run([*GIT, "-C", str(path), "commit", "-q", "--allow-empty", "-m", "start"], check=True)
    return path


@needs_git
def test_attempts_that_overlap_share_the_first_ones_state_and_the_last_sweeps(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    repository = (repo / ".git", repo)
    sweeps = Sweeps()
    [first] = sweeps.begin([repository])
    (repo / ".git" / "commondir").write_text("/elsewhere\n")  # the first attempt's agent
    [second] = sweeps.begin([repository])
    assert second is first  # not what the first attempt left
    assert sweeps.end([repository]) == [] and (repo / ".git" / "commondir").exists()  # the second still runs
    [line] = sweeps.end([repository])
    assert "commondir was made in the sandbox" in line and not (repo / ".git" / "commondir").exists(), line
    [third] = sweeps.begin([repository])  # none runs: a state of its own, read now
    assert third is not first
    assert sweeps.end([repository]) == []


@needs_git
def test_an_attempt_refused_in_one_repository_is_in_none(tmp_path: Path) -> None:
    ours, full = _repo(tmp_path / "ours"), _repo(tmp_path / "full")
    for number in range(MAX_MODULE_GIT_DIRECTORIES + 1):
        (full / ".git" / "modules" / f"d{number}").mkdir(parents=True)
        (full / ".git" / "modules" / f"d{number}" / "HEAD").write_text("ref: refs/heads/main\n")
    sweeps = Sweeps()
    with pytest.raises(SandboxRefused, match=f"more than {MAX_MODULE_GIT_DIRECTORIES} git directories"):
        sweeps.begin([(ours / ".git", ours), (full / ".git", full)])
    sweeps.begin([(ours / ".git", ours)])
    (ours / ".git" / "commondir").write_text("/elsewhere\n")
    assert len(sweeps.end([(ours / ".git", ours)])) == 1  # its only attempt ended: swept


def test_an_oversized_pointer_is_removed_wherever_it_is_found() -> None:
    path, repository = Path("/r/.git/commondir"), (Path("/r/.git"), Path("/r"))

    def undo(was: bytes | None, now: bytes | None) -> dict[Path, bytes | None]:
        return dict(repairs(GitState({path: was}, {repository: frozenset()}), GitState({path: now}, {})).pointers)

    assert undo(OVERSIZED, OVERSIZED) == {path: None}  # there before: no git's, planted all the same
    assert undo(OVERSIZED, None) == {}
    assert undo(b"../..\n", OVERSIZED) == {path: b"../..\n"}
    assert undo(NOT_A_FILE, OVERSIZED) == {}  # a directory before: nothing to put back


def test_a_pointer_is_read_up_to_its_cap(tmp_path: Path) -> None:
    read = gitsweep._read_pointer
    (tmp_path / "full").write_bytes(b"x" * MAX_POINTER_BYTES)
    (tmp_path / "over").write_bytes(b"x" * (MAX_POINTER_BYTES + 1))
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dangling").symlink_to(tmp_path / "nothing")
    assert read(tmp_path / "full") == b"x" * MAX_POINTER_BYTES
    assert read(tmp_path / "over") == OVERSIZED
    assert read(tmp_path / "fifo") == NOT_A_FILE and read(tmp_path / "dangling") == NOT_A_FILE
    assert read(tmp_path / "nothing") is None


def test_moving_aside_takes_no_name_that_is_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drawn = iter(["taken", "free"])
    monkeypatch.setattr(gitsweep.secrets, "token_hex", lambda _size: next(drawn))
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("the agent's\n")
    (tmp_path / ".git.taken.moved").symlink_to(tmp_path / "elsewhere")
    aside = gitsweep._move_aside(tmp_path / ".git")
    assert aside == tmp_path / ".git.free.moved" and (aside / "config").read_text() == "the agent's\n"
    assert not (tmp_path / ".git").exists() and not (tmp_path / "elsewhere").exists()


def test_module_directories_count_git_directories_not_their_refs_and_logs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A submodule's git directory with thousands of branches (`dependabot/pip/<name>/<version>`)
    and their reflogs is one git directory: its data isn't walked. Past MAX_MODULE_GIT_DIRECTORIES
    git directories, or MAX_MODULE_DIRECTORIES directories in all, it is refused, saying what it
    counted and never to remove a submodule's data."""
    git = tmp_path / ".git"
    busy = git / "modules" / "busy"
    for where in ("refs/remotes/origin", "logs/refs/remotes/origin"):
        for number in range(3000):
            (busy / where / "dependabot" / "pip" / f"package-{number}").mkdir(parents=True)
    (busy / "objects" / "ab").mkdir(parents=True)
    (busy / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "modules" / "lib" / "inner" / "modules" / "deeper").mkdir(parents=True)  # a name with a slash, nested
    for module in ("lib/inner", "lib/inner/modules/deeper"):
        (git / "modules" / module / "config").write_text("")
    found = sorted(path.relative_to(git / "modules").as_posix() for path in module_directories(git))
    assert found == ["busy", "lib", "lib/inner", "lib/inner/modules", "lib/inner/modules/deeper"]
    for number in range(MAX_MODULE_GIT_DIRECTORIES - 3):  # with busy, lib/inner and deeper: all it holds
        (git / "modules" / f"m{number}").mkdir()
        (git / "modules" / f"m{number}" / "HEAD").write_text("ref: refs/heads/main\n")
    assert len(module_directories(git)) == MAX_MODULE_GIT_DIRECTORIES + 2  # and lib, lib/inner/modules
    (git / "modules" / "one-more").mkdir()
    (git / "modules" / "one-more" / "config").write_text("")
    with pytest.raises(SandboxRefused) as refused:
        module_directories(git)
    message = str(refused.value)
    assert isinstance(refused.value, HarnessError) and str(git / "modules") in message
    assert f"more than {MAX_MODULE_GIT_DIRECTORIES} git directories" in message and "remove" not in message
    monkeypatch.setattr(gitsweep, "MAX_MODULE_DIRECTORIES", 10)
    with pytest.raises(SandboxRefused, match="more than 10 directories that are no git directory's data"):
        module_directories(git)


@needs_git
def test_read_state_refuses_more_submodules_than_it_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gitsweep, "MAX_SUBMODULES", 1)
    repo = _repo(tmp_path / "repo")
    for name in ("one", "two"):
        _repo(repo / name)
        subprocess.run([*GIT, "-C", str(repo), "add", name], check=True, capture_output=True)
    with pytest.raises(SandboxRefused, match="more than 1 submodules"):
        read_state(repo / ".git", repo)


@needs_git
def test_a_submodules_git_directory_is_read_through_its_checkout(tmp_path: Path) -> None:
    """Its `.git` directory, or the one its `.git` file names (relative to the checkout)."""
    repo = _repo(tmp_path / "repo")
    own, named = _repo(repo / "own"), _repo(repo / "named")
    subprocess.run([*GIT, "-C", str(repo), "add", "own", "named"], check=True, capture_output=True)
    (repo / ".git" / "modules").mkdir()
    shutil.move(named / ".git", repo / ".git" / "modules" / "named")
    (named / ".git").write_text("gitdir: ../.git/modules/named\n")
    state = read_state(repo / ".git", repo)
    assert state.submodules == [repo / ".git" / "modules" / "named", own / ".git"]


def test_git_controls_hold_every_modules_directory_and_a_submodules_own_git_directory(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    headless = repo / ".git" / "modules" / "sub"  # its HEAD removed by an agent
    own = repo / "other" / ".git"  # a submodule checked out with its own git directory
    for git in (repo / ".git", headless, own):
        (git / "objects").mkdir(parents=True)
        (git / "refs").mkdir()
        (git / "config").write_text("")
    spec = ResolvedSpec(repo, (), (repo,), ())
    assert git_controls(spec, repo, [own]) == [
        repo / ".git" / "config", repo / ".git" / "config.worktree", repo / ".git" / "hooks",
        headless / "config", headless / "config.worktree", headless / "hooks",
        own / "config", own / "config.worktree", own / "hooks",
    ]  # fmt: skip


def test_git_controls_hold_a_per_worktree_config_made_empty_where_there_is_none(tmp_path: Path) -> None:
    """`config.worktree` (read where extensions.worktreeConfig is on): the repository's, a
    submodule's, a submodule's own `.git`'s; one there is held as it is, never written; none is
    made where git sees no git directory (a directory of refs with a HEAD: it would be a broken
    ref). The linked worktrees' (the repository's and the submodule's) are held with their whole
    `worktrees` directory, one mount however many there are, and nothing is made in them."""
    repo = tmp_path / "repo"
    git = repo / ".git"
    module, own = git / "modules" / "sub", repo / "own" / ".git"
    linked = (git / "worktrees" / "wt", module / "worktrees" / "w")
    for directory in (git, module, own):
        (directory / "objects").mkdir(parents=True)
        (directory / "refs" / "remotes" / "origin").mkdir(parents=True)
        (directory / "refs" / "remotes" / "origin" / "HEAD").write_text("ref: refs/remotes/origin/main\n")
        (directory / "refs" / "heads").mkdir()
        (directory / "refs" / "heads" / "config").write_text("0" * 40 + "\n")  # a branch named config
    for directory in linked:
        directory.mkdir(parents=True)
        (directory / "commondir").write_text("../..\n")
    for directory in (git, module, own, *linked):
        (directory / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "config.worktree").write_text("[core]\n\tsparseCheckout = true\n")
    held = git_controls(ResolvedSpec(repo, (), (repo,), ()), repo, [own])
    for directory in (git, module, own):
        assert directory / "config.worktree" in held, directory
    assert git / "worktrees" in held and module / "worktrees" in held
    assert not any(directory in path.parents for directory in linked for path in held), held
    assert (git / "config.worktree").read_text() == "[core]\n\tsparseCheckout = true\n"
    assert (own / "config.worktree").read_bytes() == b""
    assert sorted(path.name for path in linked[0].iterdir()) == ["HEAD", "commondir"]  # nothing made in them
    assert [path.name for path in (module / "refs" / "remotes" / "origin").iterdir()] == ["HEAD"]
    assert [path.name for path in (module / "refs" / "heads").iterdir()] == ["config"]


def test_why_git_cant_run_in_a_sandbox_is_found_where_it_can_not(tmp_path: Path) -> None:
    """`unseen_git`: a linked worktree's git directory, or a repository's top above the sandbox's
    cwd, outside what the sandbox reads or writes, is named; where git would run, nothing is."""
    repo, linked, plain = tmp_path / "repo", tmp_path / "linked", tmp_path / "plain"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    subprocess.run(["git", "-C", str(repo), "worktree", "add", "-q", "-b", "w", str(linked)], check=True)
    (repo / "sub").mkdir()
    plain.mkdir()
    common = (repo / ".git").resolve()

    def spec(cwd: Path, read: tuple[Path, ...] = ()) -> ResolvedSpec:
        return ResolvedSpec(cwd.resolve(), tuple(path.resolve() for path in read), (cwd.resolve(),), ())

    said = unseen_git(spec(linked), linked)
    assert said is not None and f"its git directory {common / 'worktrees' / 'linked'} is not" in said
    assert f"add {common} to the sandbox's read" in said
    assert unseen_git(spec(linked, (repo / ".git",)), linked) is None  # both its git directory and the common one shown
    assert unseen_git(spec(repo), repo) is None  # a repository's own .git is in its top
    said = unseen_git(spec(repo / "sub"), repo / "sub")
    assert said is not None and f"its git directory {common} is not" in said
    assert unseen_git(spec(plain), plain) is None  # in no repository: nothing to say
