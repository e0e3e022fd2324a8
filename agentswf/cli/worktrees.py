"""`awf worktrees [RUN] [--clean]`: the worktrees runs left (a run killed with -9 leaves all of
its own), and removing those in which nothing changed; plus the closing lines of `awf run`.

A live run's worktrees are listed and never touched: the run holds a lock while it lives,
and `--clean` takes it before it changes anything. What `--clean` removes is decided as the run
itself would have at its end (agentswf.workflow.worktrees.decide), except that keep="always"
no longer holds an unchanged one; one with commits or uncommitted changes is never removed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TextIO

from ..engine.record.layout import DEFAULT_RUN_ROOT, find_run
from ..workflow.worktrees import (
    SUBMODULES_KEEP,
    WORKTREES_DIR,
    GitFailed,
    Manifest,
    Worktree,
    WorktreeEnd,
    decide,
    drop_if_empty,
    end_of,
    hold_lock,
    inspect,
    load_manifest,
    run_is_live,
    run_worktrees,
    write_manifest,
)
from .failures import EXIT_USAGE
from .shown import shown


def closing_lines(ends: Iterable[WorktreeEnd]) -> list[str]:
    """`awf run`'s lines for the worktrees it kept (those removed need no word)."""
    return [
        shown(f"awf: worktree {end.name} {end.state.replace('-', ' ')} ({end.reason}): {end.path}  branch {end.branch}")
        for end in ends
        if end.kept
    ]


def as_json(ends: Iterable[WorktreeEnd]) -> list[dict[str, Any]]:
    """`awf run --json`'s `worktrees`: every worktree's end, paths as text."""
    return [{**vars(end), "path": str(end.path)} for end in ends]


def _manifests(run_dir: Path) -> list[Manifest]:
    """The run's manifests that can be read; each that can't is named on standard error, and left alone."""
    found = []
    for path in sorted((run_dir / WORKTREES_DIR).glob("*.json")):
        loaded = load_manifest(path)
        if isinstance(loaded, str):
            print(shown(f"awf: {path} is not read: {loaded}; left as it is"), file=sys.stderr)
        else:
            found.append(loaded)
    return found


def _runs(root: Path, run: str | None) -> list[Path] | str:
    """The run directories to look at, or what is wrong with `run`."""
    if run is not None:
        found = find_run(root, run)
        return [found] if found is not None else f"no record of run {run!r} under {root}"
    return sorted({path.parent.parent for path in root.glob(f"*/*/{WORKTREES_DIR}/*.json")})


def _status(worktree: Worktree) -> tuple[str, str] | None:
    """How a worktree of a run that is over stands, or None when nothing of it is left."""
    seen = inspect(worktree)
    if seen.place == "gone" and seen.tip != worktree.base:
        return None  # no directory, no entry in git; a branch with commits is a branch like any other
    plan = decide(worktree.keep, seen, worktree.base, cleaning=True)
    if plan.state == "removed":
        return "clean", f"{plan.reason} (--clean removes it)"
    if plan.state == "branch-kept":
        return "changed", f"{plan.reason} (--clean removes the directory; the branch stays)"
    return ("kept" if plan.reason == SUBMODULES_KEEP else "changed"), plan.reason


def _line(run_dir: Path, worktree: Worktree, status: str, detail: str) -> str:
    head = shown(f"{run_dir.name}  {worktree.name}  {status}: {detail}")
    return f"{head}\n    {shown(f'{worktree.path}  branch {worktree.branch}')}"


def command_worktrees(options: argparse.Namespace) -> int:
    out = sys.stdout  # as it is now: a caller may have put another in its place
    root = Path(options.run_root) if options.run_root else DEFAULT_RUN_ROOT
    runs = _runs(root, options.run)
    if isinstance(runs, str):
        print(f"awf: {runs}", file=sys.stderr)
        return EXIT_USAGE
    listed = 0
    for run_dir in runs:
        directory = run_dir / WORKTREES_DIR
        manifests = _manifests(run_dir)
        if run_is_live(directory):
            for manifest in manifests:
                print(_line(run_dir, manifest.worktree, "live", "its run is still running"), file=out)
                listed += 1
            continue
        lock = hold_lock(directory) if options.clean and manifests else None
        if options.clean and manifests and lock is None:
            print(shown(f"awf: run {run_dir.name} took its worktrees back meanwhile; left alone"), file=sys.stderr)
            continue
        try:
            for manifest in manifests:
                listed += _one(run_dir, manifest, options.clean, out)
        finally:
            if lock is not None:
                os.close(lock)
    if not listed:
        print(f"awf: no worktrees under {root}", file=sys.stderr)
    return 0


def _one(run_dir: Path, manifest: Manifest, clean: bool, out: TextIO) -> int:
    if manifest.ended is not None and manifest.ended.state == "removed":
        return 0  # removed, with its branch: what stands at its path or in its place in git now is another's
    worktree = manifest.worktree
    try:
        status = _status(worktree)
    except (GitFailed, OSError) as error:  # no git, a repository moved away: listed, never touched
        status = ("changed", f"it couldn't be checked ({error}); left as it is")
    if status is None:
        return 0
    if not clean:
        print(_line(run_dir, worktree, *status), file=out)
        return 1
    end = end_of(worktree, cleaning=True)
    drop_if_empty(run_worktrees(run_dir))
    try:
        write_manifest(run_dir / WORKTREES_DIR, Manifest(worktree, "ended", end))
    except OSError as error:
        print(shown(f"awf: {worktree.name}'s manifest couldn't be written: {error}"), file=sys.stderr)
    print(_line(run_dir, worktree, end.state.replace("-", " "), end.reason), file=out)
    return 1


def add_parsers(commands: Any) -> None:
    """`awf worktrees`, on awf's subcommands."""
    parser = commands.add_parser("worktrees", help="list the worktrees runs left; --clean removes the unchanged ones")
    parser.add_argument("run", nargs="?", help="a run's id or directory (default: every run)")
    parser.add_argument("--clean", action="store_true", help="remove those of ended runs in which nothing changed")
    parser.add_argument("--run-root", help=f"where records are (default {DEFAULT_RUN_ROOT})")
    parser.set_defaults(handler=command_worktrees)
