"""What a sandboxed agent left in a repository it may write that your next `git status` would
obey, undone as each of its attempts ends.

A repository's `.git/config` and `.git/hooks` are held read-only in the sandbox (`runner.git_controls`),
but git reads commands from other places the agent can write, and a mount can't hold a file
that isn't there yet:

- `.git/commondir` (and a linked worktree's `.git/worktrees/<name>/commondir`, and a
  submodule's git directory's `.git/modules/<name>/commondir`) names the
  directory git takes config and hooks from: one the agent made, with a `core.fsmonitor` of
  its own, runs it in your next `git status`;
- a submodule (a gitlink in the index) whose checkout holds a repository: `git status` runs a
  `git status` in it, with that repository's config. The agent can make one (`git init sub`,
  `git add sub`), make a repository in the checkout of one that wasn't checked out, or point
  a checked-out one's `.git` file at a directory of its own.

So before an attempt the run reads each repository's `commondir` files, the submodules of
its index and their checkouts' `.git` (`read_state`); after it, with every process of the
attempt gone (the sandbox's pid namespace ends with it), each of those files made or changed
is put back as it was (a directory made there moved aside), and a submodule added is taken
out of the index (`update-index --force-remove`: its directory and its commits stay where
they are, shown as untracked), each logged in the run's record (`repairs`, a pure decision). While an attempt runs, your git in that repository is still
exposed: run it where a sandbox writes only between turns, or after the run.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..engine.records import regular_bytes
from ..workflow.worktrees import GitFailed, pinned_git

GITLINK_MODE = "160000"  # an index entry's mode for a submodule
NOT_A_FILE = b"\0"  # a pointer's bytes where something else is there (a FIFO, a directory, unreadable)


@dataclass(frozen=True, slots=True)
class GitState:
    """What of a repository a sandboxed agent may write decides which config your git reads:
    the bytes of each file that names a git directory (`commondir` files, submodules' `.git`;
    None: not there), and the submodules in its index."""

    pointers: Mapping[Path, bytes | None]
    gitlinks: frozenset[str]


@dataclass(frozen=True, slots=True)
class Repairs:
    """What to undo: each pointer to put back (its bytes before, None: removed), each
    submodule to take out of the index."""

    pointers: Mapping[Path, bytes | None]
    gitlinks: tuple[str, ...]


def repairs(before: GitState, after: GitState) -> Repairs:
    """What of `after` differs from `before` and could make git read the agent's config; a
    pointer that wasn't a regular file before (a submodule's `.git` directory) can't be put back."""
    paths = set(before.pointers) | set(after.pointers)
    changed = {
        path: before.pointers.get(path)
        for path in sorted(paths)
        if before.pointers.get(path) != after.pointers.get(path) and before.pointers.get(path) != NOT_A_FILE
    }
    return Repairs(changed, tuple(sorted(after.gitlinks - before.gitlinks)))


MAX_SUBMODULE_GIT_DIRS = 256  # of one repository's `.git/modules`, held read-only as its own git directory is


def submodule_git_dirs(git: Path) -> list[Path]:
    """The git directories of the submodules of the repository whose git directory is `git`
    (`.git/modules/<name>`, a name may have slashes; a submodule's own in its `modules/`):
    your `git status` runs a status in each checked-out submodule, with its config. At most
    MAX_SUBMODULE_GIT_DIRS; only the `modules` directories are walked, not what a git directory holds."""
    found: list[Path] = []
    stack = [git / "modules"]
    while stack and len(found) < MAX_SUBMODULE_GIT_DIRS:
        try:
            with os.scandir(stack.pop()) as entries:
                directories = [Path(entry.path) for entry in entries if entry.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        for directory in sorted(directories):
            if (directory / "HEAD").is_file():  # a git directory: its own submodules are in its modules/
                found.append(directory)
                stack.append(directory / "modules")
            else:  # a part of a name with slashes
                stack.append(directory)
    return found[:MAX_SUBMODULE_GIT_DIRS]



def _commondir_paths(git_dir: Path) -> list[Path]:
    """Every `commondir` git could read for the repository: its own, its linked worktrees', and
    its submodules' git directories' (your `git status` runs a status in each, with its config)."""
    paths = []
    for directory in (git_dir, *submodule_git_dirs(git_dir)):
        paths.append(directory / "commondir")
        try:
            with os.scandir(directory / "worktrees") as entries:
                paths += [Path(entry.path) / "commondir" for entry in entries if entry.is_dir(follow_symlinks=False)]
        except OSError:
            pass  # no linked worktrees
    return paths


def _read_pointer(path: Path) -> bytes | None:
    if not os.path.lexists(path):
        return None
    try:
        found = regular_bytes(path)
    except OSError:
        return NOT_A_FILE
    return NOT_A_FILE if found is None else found


def _put_back(path: Path, was: bytes | None) -> str:
    """`path` as it was: what is there now moved aside (a directory) or removed, never written
    through (a symlink the agent put there), then `was` written anew, if it was there; what was done."""
    done = "put back as it was"
    if os.path.isdir(path) and not os.path.islink(path):
        aside = path.with_name(f"{path.name}.{os.getpid()}.moved")
        os.rename(path, aside)
        done = f"moved aside to {aside.name}" if was is None else f"put back as it was, the directory moved to {aside.name}"
    elif os.path.lexists(path):
        os.unlink(path)
    if was is not None:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(descriptor, "wb") as file:
            file.write(was)
    return done


def _index_git(git_dir: Path, top: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git `args` on the repository's index, reading none of its config (`worktrees.pinned_git`):
    its common directory may be the agent's until put back."""
    return pinned_git(git_dir, *args, cwd=top, check=False, worktree=(git_dir, top))


def _gitlinks(git_dir: Path, top: Path) -> frozenset[str]:
    try:
        listed = _index_git(git_dir, top, "ls-files", "--stage", "-z")
    except GitFailed:
        return frozenset()
    if listed.returncode != 0:
        return frozenset()
    entries = listed.stdout.split("\0")
    return frozenset(entry.split("\t", 1)[1] for entry in entries if entry.startswith(f"{GITLINK_MODE} ") and "\t" in entry)


def _checkout_links(top: Path, gitlinks: frozenset[str]) -> list[Path]:
    """Each submodule's `.git` in its checkout, where no symbolic link leads out of `top`
    (putting one back must not write where the agent points)."""
    return [top / link / ".git" for link in sorted(gitlinks) if os.path.realpath(top / link) == str(top / link)]


def read_state(git_dir: Path, top: Path) -> GitState:
    """The repository at `top`, its git directory `git_dir`, as `repairs` compares it."""
    gitlinks = _gitlinks(git_dir, top)
    paths = [*_commondir_paths(git_dir), *_checkout_links(top, gitlinks)]
    return GitState({path: _read_pointer(path) for path in paths}, gitlinks)


def sweep(git_dir: Path, top: Path, before: GitState) -> list[str]:
    """Undo what `repairs` finds since `before` (the `commondir` files first: the index is read
    after); a line for the run's record for each thing undone."""
    done = []
    paths = {*before.pointers, *_commondir_paths(git_dir)}
    now = GitState({path: _read_pointer(path) for path in paths}, before.gitlinks)
    for path, was in repairs(before, now).pointers.items():
        try:
            if os.path.realpath(path.parent) != str(path.parent):
                raise OSError(0, "a symbolic link leads elsewhere now")
            what = _put_back(path, was)
        except OSError as error:
            done.append(f"{path} was changed in the sandbox and could not be put back ({error.strerror}): don't run git there")
            continue
        done.append(f"{path} was {'made' if was is None else 'changed'} in the sandbox: {what}")
    for link in repairs(before, GitState(before.pointers, _gitlinks(git_dir, top))).gitlinks:
        try:
            removed = _index_git(git_dir, top, "update-index", "--force-remove", "--", link)
            reason = None if removed.returncode == 0 else removed.stderr.strip()
        except GitFailed as error:
            reason = str(error)
        if reason is None:
            done.append(f"submodule {link!r} was added to {top}'s index in the sandbox: taken out of the index, left on disk")
        else:
            done.append(
                f"submodule {link!r} was added to {top}'s index in the sandbox and is still there ({reason}): "
                "don't run git there"
            )
    return done
