"""What a sandboxed agent leaves in a repository it may write for your next `git status` to run,
undone as its attempt ends (`sandbox.gitsweep`): mostly without a sandbox, the agent's side played
by the test between `read_state` and `sweep` (test_review3_sandbox has the first attacks in bwrap);
those that need a run's attempts (overlapping, refused, held) in bwrap, on both backends."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tracemalloc
from pathlib import Path

import anyio
import pytest

import agentswf
from agentswf import workflow
from agentswf.sandbox.bwrap import BWRAP_MAX_ARGS, MAX_ARGV_BYTES
from agentswf.sandbox.gitsweep import (
    MAX_MODULE_DIRECTORIES,
    MAX_MODULE_GIT_DIRECTORIES,
    GitState,
    read_state,
    repairs,
    sweep,
)
from agentswf.sandbox.runner import git_controls
from agentswf.sandbox.spec import ResolvedSpec

from ..sandbox.kit import ANSWER, agent, needs_bwrap

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
    module = git_dir / "modules" / "m"
    module.mkdir(parents=True)
    (module / "commondir").write_bytes(b"../..\n")
    before = read_state(git_dir, repo)  # no linked worktree yet: any the agent makes is its own, read after
    stash = tmp_path / "stash"
    shutil.copytree(git_dir, stash)
    (stash / "config").write_text(f"[core]\n\tfsmonitor = touch {tmp_path}/OWNED; false\n")
    (git_dir / "commondir").write_text(f"{stash}\n")
    (module / "commondir").write_text(f"{stash}\n")
    (git_dir / "worktrees" / "w").mkdir(parents=True)
    (git_dir / "worktrees" / "w" / "commondir").symlink_to(tmp_path / "elsewhere")  # written through, it would make one
    lines = sweep(before)
    assert len(lines) == 3 and all("put back as it was" in line for line in lines), lines
    assert not (git_dir / "commondir").exists() and not (tmp_path / "elsewhere").exists()
    assert not os.path.lexists(git_dir / "worktrees" / "w" / "commondir")
    assert (module / "commondir").read_bytes() == b"../..\n"
    _git(repo, "status")
    assert not (tmp_path / "OWNED").exists()


def test_the_linked_worktrees_there_when_read_are_held_whole_and_not_read_one_by_one(tmp_path: Path) -> None:
    """`.git/worktrees` is read-only in the sandbox (one mount, `git_controls`): its entries, a
    thousand or none, can't change, so none is read before or after an attempt."""
    repo = _repo(tmp_path)
    git_dir = repo / ".git"
    for name in ("a", "b"):
        (git_dir / "worktrees" / name).mkdir(parents=True)
        (git_dir / "worktrees" / name / "commondir").write_bytes(b"../..\n")
    before = read_state(git_dir, repo)
    assert before.held == {git_dir / "worktrees"}
    assert list(before.pointers) == [git_dir / "commondir"]
    assert git_dir / "worktrees" in git_controls(ResolvedSpec(repo, (), (repo,), ()), repo)
    assert sweep(before) == []


def test_a_submodule_added_is_taken_out_of_the_index_and_left_on_disk(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before = read_state(repo / ".git", repo)
    sub = repo / "sub"
    sub.mkdir()
    _git(sub, "init", "-q")
    _git(sub, "commit", "-q", "--allow-empty", "-m", "sub")
    _git(sub, "config", "core.fsmonitor", f"touch {tmp_path}/OWNED; false")
    _git(repo, "add", "sub")
    assert read_state(repo / ".git", repo).gitlinks[repo / ".git", repo] == {"sub"}
    [line] = sweep(before)
    assert "taken out of the index" in line, line
    assert read_state(repo / ".git", repo).gitlinks == {(repo / ".git", repo): frozenset()}
    assert (sub / ".git" / "config").exists()
    assert "?? sub/" in _git(repo, "status", "--porcelain")
    assert not (tmp_path / "OWNED").exists()


def test_nothing_changed_is_nothing_undone(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before = read_state(repo / ".git", repo)
    (repo / "b").write_text("the agent's work\n")
    _git(repo, "add", "b")
    assert sweep(before) == []
    assert "A  b" in _git(repo, "status", "--porcelain")


def test_repairs_undo_only_what_changed() -> None:
    one, two = Path("/r/.git/commondir"), Path("/r/.git/worktrees/w/commondir")
    repository = (Path("/r/.git"), Path("/r"))
    before = GitState({one: None, two: b"../..\n"}, {repository: frozenset({"kept"})})
    after = GitState({one: b"/tmp/x\n", two: b"../..\n"}, {repository: frozenset({"kept", "new"})})
    undo = repairs(before, after)
    assert dict(undo.pointers) == {one: None} and undo.gitlinks == {repository: ("new",)}
    assert repairs(after, after).pointers == {} and repairs(after, after).gitlinks == {}


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
    [line] = sweep(before)
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
    [line] = sweep(before)
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
    lines = sweep(before)
    assert lines and all("made in the sandbox" in line for line in lines), lines
    assert not (modules / "commondir").exists()
    (repo / "sub" / "x").write_text("changed, so that status looks inside\n")
    subprocess.run(["git", "-C", str(repo), "status"], capture_output=True, check=False)
    assert not (tmp_path / "OWNED").exists()


def _fsmonitored(tmp_path: Path, git_dir: Path, name: str) -> Path:
    """A copy of `git_dir` whose config runs `touch OWNED` in a `git status`: what an agent points git at."""
    stash = tmp_path / name
    shutil.copytree(git_dir, stash, symlinks=True)
    (stash / "config").write_text(f"[core]\n\tfsmonitor = touch {tmp_path}/OWNED; false\n")
    return stash


def test_a_commondir_over_the_cap_is_removed_and_never_read_whole(tmp_path: Path) -> None:
    """A `commondir` git reads as a path (what follows its first NUL is nothing to git), padded
    past MAX_POINTER_BYTES: it is planted wherever it is found, and its bytes past that never read."""
    repo = _repo(tmp_path)
    stash = _fsmonitored(tmp_path, repo / ".git", "stash")
    commondir = repo / ".git" / "commondir"
    with commondir.open("wb") as file:
        file.write(f"{stash}\n".encode())
        file.truncate(64 * 1024 * 1024)  # sparse: no disk
    tracemalloc.start()
    try:
        before = read_state(repo / ".git", repo)
        _size, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1024 * 1024, peak
    [line] = sweep(before)
    assert "no git's" in line and not commondir.exists(), line
    _git(repo, "status")
    assert not (tmp_path / "OWNED").exists()


def test_a_name_to_move_aside_to_taken_in_advance_stops_nothing(tmp_path: Path) -> None:
    """The agent plants what a predictable name (the run's pid) would be: a symbolic link, a
    directory with something in it. Neither is written through, nor keeps its repository in place."""
    repo = _with_submodule(tmp_path)
    _git(repo, "submodule", "deinit", "-q", "sub")
    before = read_state(repo / ".git", repo)
    _git(repo / "sub", "init", "-q")
    _git(repo / "sub", "config", "core.fsmonitor", f"touch {tmp_path}/OWNED; false")
    (repo / "sub" / f".git.{os.getpid()}.moved").symlink_to(tmp_path / "elsewhere")
    (repo / "sub" / ".git.0.moved" / "full").mkdir(parents=True)
    [line] = sweep(before)
    assert "moved aside" in line and not (repo / "sub" / ".git").exists(), line
    assert not (tmp_path / "elsewhere").exists() and (repo / "sub" / ".git.0.moved" / "full").is_dir()
    _git(repo, "status")
    assert not (tmp_path / "OWNED").exists()


def _with_embedded(tmp_path: Path) -> Path:
    """A repository whose submodule `sub` is checked out with its own `.git` directory (`git add`
    of a repository inside: no `.git/modules/sub`)."""
    repo = _repo(tmp_path)
    (repo / "sub").mkdir()
    _git(repo / "sub", "init", "-q")
    _git(repo / "sub", "commit", "-q", "--allow-empty", "-m", "sub")
    _git(repo, "add", "sub")
    _git(repo, "commit", "-qm", "with a submodule of its own")
    return repo


def test_a_commondir_made_in_a_submodules_own_git_directory_is_removed(tmp_path: Path) -> None:
    repo = _with_embedded(tmp_path)
    before = read_state(repo / ".git", repo)
    stash = _fsmonitored(tmp_path, repo / "sub" / ".git", "stash")
    (repo / "sub" / ".git" / "commondir").write_text(f"{stash}\n")
    [line] = sweep(before)
    assert "made in the sandbox" in line and not (repo / "sub" / ".git" / "commondir").exists(), line
    (repo / "sub" / "x").write_text("changed, so that status looks inside\n")
    _git(repo, "status")
    assert not (tmp_path / "OWNED").exists()


def test_a_submodule_added_to_a_submodules_index_is_taken_out(tmp_path: Path) -> None:
    """Your `git status` runs one in each submodule, and that one in each of its own: a
    repository made in a submodule's checkout and added to its index runs its config in yours."""
    repo = _with_submodule(tmp_path)
    before = read_state(repo / ".git", repo)
    inner = repo / "sub" / "inner"
    inner.mkdir()
    _git(inner, "init", "-q")
    _git(inner, "commit", "-q", "--allow-empty", "-m", "inner")
    _git(inner, "config", "core.fsmonitor", f"touch {tmp_path}/OWNED; false")
    _git(repo / "sub", "add", "inner")
    [line] = sweep(before)
    assert f"added to {repo / 'sub'}'s index" in line and "taken out" in line, line
    (inner / "x").write_text("changed, so that status looks inside\n")
    _git(repo, "status")
    assert not (tmp_path / "OWNED").exists()


# Through a run, in bwrap: the agent's side is its shell.

async def _run(tmp_path: Path, fn) -> agentswf.RunResult:
    definition = workflow(name="sbx", description="Sandboxed writers of one repository.")(fn)
    result = await agentswf.run(definition, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    return result


async def _refused(tmp_path: Path, repo: Path, *, timeout: float) -> tuple[str, str]:
    """A sandboxed turn in `repo` that should never begin: its outcome's kind and reason, once
    checked that the agent's command didn't run."""
    token = secrets.token_hex(4)

    async def fn(wf):
        box = await wf.sandboxes.open("box", cwd="ws/repo", write=["."])
        a = await wf.agents.open("a", runtime=agent(repo, "a", "touch RAN\n" + ANSWER, token), sandbox=box)
        turn = await a.run("Work.", timeout=timeout)
        return [turn.outcome.kind, turn.outcome.reason]

    kind, reason = (await _run(tmp_path, fn)).value
    assert not (repo / "RAN").exists()
    return kind, reason


def _workspace(tmp_path: Path, make) -> Path:
    """`make(tmp_path)`'s repository, moved to ws/repo (the sandbox's cwd)."""
    repo = make(tmp_path)
    (tmp_path / "ws").mkdir()
    return Path(shutil.move(repo, tmp_path / "ws" / "repo"))


PLANT_AND_WAIT = """\
    cp -r .git "$PWD/.stash" && git config -f .stash/config core.fsmonitor "touch $OWNED; false"
    echo "$PWD/.stash" >.git/commondir && say "COMMONDIR SET" && touch PLANTED
    for _ in $(seq 400); do [ -e B_STARTED ] && break; sleep 0.05; done
"""
WAIT_FOR_A = """\
    touch B_STARTED
    for _ in $(seq 400); do [ -e A_DONE ] && break; sleep 0.05; done
    say "A done: $(test -e A_DONE && echo yes)"
"""


@pytest.mark.anyio
@needs_bwrap
async def test_attempts_that_overlap_put_back_what_was_there_before_the_first(tmp_path: Path) -> None:
    """Agent a plants a `commondir`, agent b begins while a runs, a ends, then b: b's "before"
    would be a's `commondir`, put back as b ended."""
    repo = _workspace(tmp_path, _repo)
    owned, token = tmp_path / "OWNED", secrets.token_hex(4)

    async def fn(wf):
        box = await wf.sandboxes.open("box", cwd="ws/repo", write=["."])
        a = await wf.agents.open("a", runtime=agent(repo, "a", PLANT_AND_WAIT + ANSWER, token, OWNED=str(owned)), sandbox=box)
        b = await wf.agents.open("b", runtime=agent(repo, "b", WAIT_FOR_A + ANSWER, token), sandbox=box)
        said: dict[str, str] = {}

        async def first() -> None:
            said["a"] = (await a.run("Plant.", timeout=30)).value
            (repo / "A_DONE").write_text("")

        async with anyio.create_task_group() as group:
            group.start_soon(first)
            with anyio.fail_after(30):
                while not (repo / "PLANTED").exists():
                    await anyio.sleep(0.05)
            said["b"] = (await b.run("Wait.", timeout=30)).value
        return said

    result = await _run(tmp_path, fn)
    assert result.value == {"a": "COMMONDIR SET", "b": "A done: yes"}, result.value
    assert not (repo / ".git" / "commondir").exists()
    subprocess.run(["git", "-C", str(repo), "status"], capture_output=True, timeout=30, check=False)
    assert not owned.exists()


REMOVE_HEAD = """\
    mv .git/modules/sub/HEAD .head-was && say "HEAD REMOVED"
"""
SET_CONFIG_PUT_HEAD_BACK = """\
    git config -f .git/modules/sub/config core.fsmonitor "touch $OWNED; false" 2>/dev/null && say "CONFIG SET" || say "config: read-only"
    echo "touch $OWNED" >.git/modules/sub/hooks/post-checkout 2>/dev/null && say "HOOK SET" || say "hooks: read-only"
    mv .head-was .git/modules/sub/HEAD
"""


def _with_submodule_not_checked_out(tmp_path: Path) -> Path:
    repo = _with_submodule(tmp_path)
    _git(repo, "submodule", "deinit", "-q", "sub")  # its git directory stays in .git/modules
    return repo


@pytest.mark.anyio
@needs_bwrap
async def test_a_submodules_config_and_hooks_stay_held_once_its_head_is_removed(tmp_path: Path) -> None:
    """A submodule not checked out: nothing leads to its git directory but its name in
    `.git/modules`, and your next `git submodule update` checks it out with its config and hooks."""
    repo = _workspace(tmp_path, _with_submodule_not_checked_out)
    owned, token = tmp_path / "OWNED", secrets.token_hex(4)

    async def fn(wf):
        box = await wf.sandboxes.open("box", cwd="ws/repo", write=["."])
        a = await wf.agents.open("a", runtime=agent(repo, "a", REMOVE_HEAD + ANSWER, token), sandbox=box)
        b = await wf.agents.open("b", runtime=agent(repo, "b", SET_CONFIG_PUT_HEAD_BACK + ANSWER, token, OWNED=str(owned)), sandbox=box)
        return [(await a.run("Remove.", timeout=20)).value, (await b.run("Set.", timeout=20)).value]

    result = await _run(tmp_path, fn)
    _git(repo, "submodule", "update", "--init", "-q")
    _git(repo, "status")
    assert (repo / "sub" / ".git").is_file()  # checked out: its config and hooks were read
    assert result.value == ["HEAD REMOVED", "config: read-only\nhooks: read-only"] and not owned.exists(), result.value


@pytest.mark.anyio
@needs_bwrap
async def test_a_modules_directory_too_full_to_hold_refuses_the_attempt(tmp_path: Path) -> None:
    """More directories in `.git/modules` than the sandbox holds (decoys an agent made): the
    attempt is refused, the turn failed saying why, never begun with some of them not held."""
    repo = _workspace(tmp_path, _with_submodule)
    for number in range(MAX_MODULE_GIT_DIRECTORIES):  # and the submodule's own: one more
        (repo / ".git" / "modules" / f"decoy{number}").mkdir()
        (repo / ".git" / "modules" / f"decoy{number}" / "config").write_text("")
    kind, reason = await _refused(tmp_path, repo, timeout=20)
    assert kind == "failed" and f"more than {MAX_MODULE_GIT_DIRECTORIES} git directories" in reason, reason


OWN_GIT_DIRECTORY = """\
    git -C sub config core.fsmonitor "touch $OWNED; false" 2>/dev/null && say "CONFIG SET" || say "config: read-only"
    echo "touch $OWNED" >sub/.git/hooks/post-checkout 2>/dev/null && say "HOOK SET" || say "hooks: read-only"
    cp -r sub/.git "$PWD/.stash" && git config -f .stash/config core.fsmonitor "touch $OWNED; false"
    echo "$PWD/.stash" >sub/.git/commondir && say "COMMONDIR SET"
"""


@pytest.mark.anyio
@needs_bwrap
async def test_a_submodule_checked_out_with_its_own_git_directory_is_held_and_swept(tmp_path: Path) -> None:
    repo = _workspace(tmp_path, _with_embedded)
    owned, token = tmp_path / "OWNED", secrets.token_hex(4)

    async def fn(wf):
        box = await wf.sandboxes.open("box", cwd="ws/repo", write=["."])
        a = await wf.agents.open("a", runtime=agent(repo, "a", OWN_GIT_DIRECTORY + ANSWER, token, OWNED=str(owned)), sandbox=box)
        return (await a.run("Work.", timeout=20)).value

    result = await _run(tmp_path, fn)
    (repo / "sub" / "x").write_text("changed, so that status looks inside\n")
    subprocess.run(["git", "-C", str(repo), "status"], capture_output=True, timeout=30, check=False)
    assert result.value.split("\n") == ["config: read-only", "hooks: read-only", "COMMONDIR SET"], result.value
    assert not (repo / "sub" / ".git" / "commondir").exists() and not owned.exists()


SET_WORKTREE_CONFIG = """\
    git config -f "$FILE" core.fsmonitor "touch $OWNED; false" 2>/dev/null && say "SET" || say "read-only"
"""
WORKTREE_CONFIGS = {  # where git reads a `config.worktree` (extensions.worktreeConfig on), and where your git status runs
    "repository": (".git/config.worktree", "."),  # `git sparse-checkout init` made it
    "linked worktree": (".git/worktrees/wt/config.worktree", "../../wt"),
    "submodule": (".git/modules/sub/config.worktree", "."),
}


@pytest.mark.anyio
@needs_bwrap
@pytest.mark.parametrize("place", sorted(WORKTREE_CONFIGS))
async def test_a_per_worktree_config_is_held_read_only(tmp_path: Path, place: str) -> None:
    """With `extensions.worktreeConfig` on (a sparse checkout's), git reads `config.worktree` in
    the repository's git directory, a linked worktree's and a submodule's: there or not, it is held."""
    repo = _workspace(tmp_path, _with_submodule)
    _git(repo, "sparse-checkout", "init")  # turns the extension on, and writes .git/config.worktree
    _git(repo, "worktree", "add", "-q", str(tmp_path / "wt"))
    _git(repo / "sub", "config", "extensions.worktreeConfig", "true")
    planted, status_in = WORKTREE_CONFIGS[place]
    owned, token = tmp_path / "OWNED", secrets.token_hex(4)

    async def fn(wf):
        box = await wf.sandboxes.open("box", cwd="ws/repo", write=["."])
        runtime = agent(repo, "a", SET_WORKTREE_CONFIG + ANSWER, token, OWNED=str(owned), FILE=planted)
        return (await (await wf.agents.open("a", runtime=runtime, sandbox=box)).run("Work.", timeout=20)).value

    result = await _run(tmp_path, fn)
    (repo / "sub" / "x").write_text("changed, so that status looks inside\n")
    subprocess.run(["git", "-C", str(repo / status_in), "status"], capture_output=True, timeout=30, check=False)
    assert not owned.exists(), "OWNED"
    assert result.value == "read-only", result.value


def _decoys(modules: Path, shape: str) -> None:
    """Directories an agent made in `.git/modules`, no more git directories than it holds, each
    with a config and hooks to hold: so many, and so deep, that their mounts are more arguments
    than bubblewrap takes, or their paths more bytes than the sandbox starts."""
    if shape == "many":
        count, levels = MAX_MODULE_GIT_DIRECTORIES - 1, 4  # and the submodule's; config, hooks, an anchor a level
        assert count * (levels + 2) * 3 > BWRAP_MAX_ARGS
    else:
        count, levels = 64, 16  # a path of 16 names of 200 bytes, mounted at each level: 64 × 17 × 2 × 3 KiB
        assert count * (levels + 2) * 2 * levels * 200 > MAX_ARGV_BYTES
    assert count * levels < MAX_MODULE_DIRECTORIES
    for number in range(count):
        deepest = modules.joinpath(f"decoy{number}", *["x" * 200] * (levels - 1))
        (deepest / "hooks").mkdir(parents=True)
        (deepest / "config").write_text("")


@pytest.mark.anyio
@needs_bwrap
@pytest.mark.parametrize("shape", ["many", "deep"])
async def test_more_git_controls_than_bubblewrap_takes_refuse_the_attempt_saying_why(tmp_path: Path, shape: str) -> None:
    """Each held config and hooks is a mount of bubblewrap's: past what it (or exec) takes, the
    attempt is refused saying what is held and where to look, not failed in bubblewrap's words."""
    repo = _workspace(tmp_path, _with_submodule)
    _decoys(repo / ".git" / "modules", shape)
    kind, reason = await _refused(tmp_path, repo, timeout=60)
    assert kind == "failed" and "the sandbox won't start" in reason and ".git/modules" in reason, reason


PLANT_HOOK = """\
    mkdir -p "$DEST" && printf '#!/bin/sh\\ntouch %s\\n' "$OWNED" >"$DEST/pre-commit" && chmod +x "$DEST/pre-commit" && touch RAN
"""
PLANT_CONFIG = """\
    git config -f "$DEST" core.fsmonitor "touch $OWNED; false" && touch RAN
"""


@pytest.mark.anyio
@needs_bwrap
@pytest.mark.parametrize("control", ["hooks", "config.worktree"])
@pytest.mark.parametrize("target", ["missing", "there"])
async def test_a_git_control_through_a_symbolic_link_refuses_the_attempt(tmp_path: Path, control: str, target: str) -> None:
    """`.git/hooks` or `.git/config.worktree` a symbolic link into the working tree: a mount
    holds what a link names, only if it is there, and never the link, which lies in `.git` where
    the sandbox writes. Missing, the agent makes it; there, it replaces the link: either way its
    hook or fsmonitor would run in your next `git commit` or `git status`. Refused, saying why."""
    repo = _workspace(tmp_path, _repo)
    _git(repo, "config", "core.repositoryformatversion", "1")
    _git(repo, "config", "extensions.worktreeConfig", "true")
    link, named = repo / ".git" / control, repo / f"elsewhere-{control}"
    if control == "hooks":
        shutil.rmtree(link)
    link.unlink(missing_ok=True)
    link.symlink_to(os.path.relpath(named, link.parent))
    if target == "there":
        named.mkdir() if control == "hooks" else named.write_text("")
    owned, token = tmp_path / "OWNED", secrets.token_hex(4)
    body = (f"rm .git/{control}\n" if target == "there" else "") + (PLANT_HOOK if control == "hooks" else PLANT_CONFIG)
    dest = named if target == "missing" else link

    async def fn(wf):
        box = await wf.sandboxes.open("box", cwd="ws/repo", write=["."])
        runtime = agent(repo, "a", body + ANSWER, token, OWNED=str(owned), DEST=str(dest))
        turn = await (await wf.agents.open("a", runtime=runtime, sandbox=box)).run("Work.", timeout=20)
        return [turn.outcome.kind, turn.outcome.reason]

    result = await _run(tmp_path, fn)
    _git(repo, "status")
    _git(repo, "commit", "-q", "--allow-empty", "-m", "yours")
    kind, reason = result.value
    assert not owned.exists(), f"the agent's hook or fsmonitor ran in your git (its turn: {result.value})"
    assert kind == "failed" and f"{link} can't be held read-only" in reason, result.value
    assert not (repo / "RAN").exists()


SUBMODULE_CONFIGS = """\
    git -c user.name=a -c user.email=b commit -q --allow-empty -m mine && say committed
    for module in sub copy7; do
        { echo x >> .git/modules/$module/config; } 2>/dev/null && say "$module: CONFIG WRITTEN"
    done
"""


@pytest.mark.anyio
@needs_bwrap
async def test_a_submodule_with_thousands_of_branches_among_two_hundred_is_held_and_works(tmp_path: Path) -> None:
    """`.git/modules` counts git directories, not what is in them: a submodule of 3,000 remote
    branches (`dependabot/pip/<package>/<version>`) and their reflogs, among 200 submodules' git
    directories, is held and a sandboxed turn writing the superproject works, their configs read-only."""
    repo = _workspace(tmp_path, _with_submodule)
    module = repo / ".git" / "modules" / "sub"
    for number in range(199):
        shutil.copytree(module, repo / ".git" / "modules" / f"copy{number}")
    head = _git(module, "rev-parse", "HEAD").strip()
    branches = "".join(f"create refs/remotes/origin/dependabot/pip/package-{i}/1.0 {head}\n" for i in range(3000))
    subprocess.run(["git", "--git-dir", str(module), "update-ref", "--stdin"], input=branches, text=True, check=True)
    assert sum(1 for _ in (module / "logs" / "refs" / "remotes").rglob("*")) > 3000  # their reflogs too
    token = secrets.token_hex(4)

    async def fn(wf):
        box = await wf.sandboxes.open("box", cwd="ws/repo", write=["."])
        a = await wf.agents.open("a", runtime=agent(repo, "a", SUBMODULE_CONFIGS + ANSWER, token), sandbox=box)
        turn = await a.run("Work.", timeout=120)
        return turn.value if turn.answered else turn.outcome.reason

    result = await _run(tmp_path, fn)
    assert result.value == "committed", result.value
