"""Progress lines (`wf.log`, tool calls a policy logs): shown by `awf run`, quiet when embedded.

A library should not print into the program that embeds it: the lines always go to the
run's record (log.jsonl), and to structlog only once `show_progress()` is called, as
`awf run` does. That switch is the process's, on purpose: it is the program's choice of where
its output goes, as `structlog.configure` is, made by the program's own call and never by a
run; and progress lines come from threads no run's context reaches (a sync tool handler's
worker, a Temporal worker's workflow threads), so a switch held per run or per context would
lose some of them.

`watch_runs` tells a watcher (the live view of `awf run`) each run started from where it was
called (the calling task and what it starts), with its record, which the watcher then reads on
its own; `watch_endings` tells one each such run whose record says how it ended (`awf run` may
leave then, after Ctrl-C's grace, past a teardown a tool handler holds). Watchers are held in
a context variable, not by the process: two runs started from two tasks, each watching, are
each told of their own run only.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import structlog

RunWatcher = Callable[[str, Path], None]
EndingWatcher = Callable[[str, str], None]

_shown = False
_hidden_sources: frozenset[str] = frozenset()
_run_watchers: ContextVar[tuple[RunWatcher, ...]] = ContextVar("agentswf_run_watchers", default=())
_ending_watchers: ContextVar[tuple[EndingWatcher, ...]] = ContextVar("agentswf_ending_watchers", default=())


def show_progress(on: bool = True, *, except_sources: Collection[str] = ()) -> None:
    """Send progress lines to structlog (as configured) as well as to the run's record,
    but those of `except_sources` (whose lines a watcher prints from the record instead)."""
    global _shown, _hidden_sources
    _shown = on
    _hidden_sources = frozenset(except_sources)


def progress(source: str, message: str, **fields: Any) -> None:
    if _shown and source not in _hidden_sources:
        structlog.get_logger(source).info(message, **fields)


def watch_runs(watcher: RunWatcher) -> Callable[[], None]:
    """Call `watcher(run_id, record_dir)` as each run started from this context starts; returns its
    remover (to be called in the same context)."""
    return _watch(_run_watchers, watcher)


def watch_endings(watcher: EndingWatcher) -> Callable[[], None]:
    """Call `watcher(run_id, outcome)` as each run started from this context has recorded its
    ending; returns its remover (to be called in the same context)."""
    return _watch(_ending_watchers, watcher)


def _watch(watchers: ContextVar[tuple[Any, ...]], watcher: Any) -> Callable[[], None]:
    watchers.set((*watchers.get(), watcher))

    def remove() -> None:
        watchers.set(tuple(held for held in watchers.get() if held is not watcher))

    return remove


def run_started(run_id: str, record_dir: Path, **fields: Any) -> None:
    """The run's first progress line, and its record to every watcher."""
    progress("agentswf.run", "run started", run_id=run_id, record=str(record_dir), **fields)
    for watcher in _run_watchers.get():
        watcher(run_id, record_dir)


def run_recorded(run_id: str, outcome: str) -> None:
    """The run's ending is recorded (output.json and its attempt's record): only its teardown is left."""
    for watcher in _ending_watchers.get():
        watcher(run_id, outcome)
