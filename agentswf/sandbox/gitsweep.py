"""What a sandboxed agent left in a repository it may write that your next `git status` would
obey, undone as each of its attempts ends.

A repository's `.git/config` and `.git/hooks` are held read-only in the sandbox (`runner.git_controls`),
but git reads commands from other places the agent can write, and a mount can't hold a file
that isn't there yet:

- `.git/commondir` (and a linked worktree's `.git/worktrees/<name>/commondir`) names the
  directory git takes config and hooks from: one the agent made, with a `core.fsmonitor` of
  its own, runs it in your next `git status`;
- a submodule (a gitlink in the index) whose checkout holds a repository: `git status` runs a
  `git status` in it, with that repository's config. The agent can make one (`git init sub`,
  `git add sub`).

So before an attempt the run reads each repository's `commondir` files and the submodules of
its index (`read_state`); after it, with every process of the attempt gone (the sandbox's pid
namespace ends with it), a `commondir` made or changed is put back as it was, and a submodule
added is taken out of the index (`update-index --force-remove`: its directory and its
commits stay where they are, shown as untracked), each logged in the run's record
(`repairs`, a pure decision). While an attempt runs, your git in that repository is still
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
NOT_A_FILE = b"\0"  # a commondir's bytes where something else is there (a FIFO, a directory, unreadable)


@dataclass(frozen=True, slots=True)
class GitState:
    """What of a repository a sandboxed agent may write decides which config your git reads:
    each `commondir` file's bytes (None: not there), and the submodules in its index."""

    commondirs: Mapping[Path, bytes | None]
    gitlinks: frozenset[str]


@dataclass(frozen=True, slots=True)
class Repairs:
    """What to undo: each `commondir` to put back (its bytes before, None: removed), each
    submodule to take out of the index."""

    commondirs: Mapping[Path, bytes | None]
    gitlinks: tuple[str, ...]


def repairs(before: GitState, after: GitState) -> Repairs:
    """What of `after` differs from `before` and could make git read the agent's config."""
    paths = set(before.commondirs) | set(after.commondirs)
    changed = {
        path: before.commondirs.get(path)
        for path in sorted(paths)
        if before.commondirs.get(path) != after.commondirs.get(path)
    }
    return Repairs(changed, tuple(sorted(after.gitlinks - before.gitlinks)))


def _commondir_paths(git_dir: Path) -> list[Path]:
    """Every `commondir` git could read for the repository: its own, and its linked worktrees'."""
    paths = [git_dir / "commondir"]
    try:
        with os.scandir(git_dir / "worktrees") as entries:
            paths += [Path(entry.path) / "commondir" for entry in entries if entry.is_dir(follow_symlinks=False)]
    except OSError:
        pass  # no linked worktrees
    return paths


def _read_commondir(path: Path) -> bytes | None:
    if not os.path.lexists(path):
        return None
    try:
        found = regular_bytes(path)
    except OSError:
        return NOT_A_FILE
    return NOT_A_FILE if found is None else found


def _put_back(path: Path, was: bytes | None) -> None:
    """`path` as it was: what is there now moved aside (a directory) or removed, never written
    through (a symlink the agent put there), then `was` written anew, if it was there."""
    if os.path.isdir(path) and not os.path.islink(path):
        os.rename(path, path.with_name(f"{path.name}.{os.getpid()}.moved"))
    elif os.path.lexists(path):
        os.unlink(path)
    if was is not None:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(descriptor, "wb") as file:
            file.write(was)


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


def _commondirs(git_dir: Path) -> dict[Path, bytes | None]:
    return {path: _read_commondir(path) for path in _commondir_paths(git_dir)}


def read_state(git_dir: Path, top: Path) -> GitState:
    """The repository at `top`, its git directory `git_dir`, as `repairs` compares it."""
    return GitState(_commondirs(git_dir), _gitlinks(git_dir, top))


def sweep(git_dir: Path, top: Path, before: GitState) -> list[str]:
    """Undo what `repairs` finds since `before` (the `commondir` files first: the index is read
    after); a line for the run's record for each thing undone."""
    done = []
    for path, was in repairs(before, GitState(_commondirs(git_dir), before.gitlinks)).commondirs.items():
        try:
            _put_back(path, was)
        except OSError as error:
            done.append(f"{path} was changed in the sandbox and could not be put back ({error.strerror}): don't run git there")
            continue
        done.append(f"{path} was {'made' if was is None else 'changed'} in the sandbox: put back as it was")
    for link in repairs(before, GitState(before.commondirs, _gitlinks(git_dir, top))).gitlinks:
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
