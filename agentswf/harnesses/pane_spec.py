"""What a pane needs to know of one CLI's TUI (`TuiSpec`), and finding a session a TUI named itself.

Each CLI's spec is measured against its pinned version (pane.py: claude; pane_codex.py;
pane_pi.py): the screens it shows before it takes input and the option that gets past
each (never an update), what it shows while busy, blocked or logged out, how a prompt is
put in, and the command line that starts or resumes it. codex and pi choose their own
session ids; the session a pane's first prompt started is found afterwards, as the one
session file (written since the pane started) that carries the turn's call id.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .base import is_session_id
from .cli import CliHarness
from .regular import read_regular

SESSION_FILES_SCANNED = 50  # at most, newest first, when looking for the session a prompt started
SESSION_SCAN_BYTES = 4 * 1024 * 1024  # read at most this much of one session file
SESSION_CLOCK_SLACK_SECONDS = 2.0  # a file written this long before the pane started still counts
_SESSION_FILE = re.compile(r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$")

Launch = Callable[[CliHarness, "str | None"], "tuple[list[str], str | None]"]
"""(the CLI, the session to resume or None) -> (the TUI's argv, the session id it runs, if known now)."""

SessionStore = Callable[[Mapping[str, str]], "tuple[Path, str]"]
"""The agent's env -> (the directory the CLI keeps its session files in, the glob that finds them)."""


@dataclass(frozen=True, slots=True)
class StartupScreen:
    """A screen a TUI shows before it takes input, and the option that gets past it."""

    marker: str  # text only this screen shows
    choice: str  # the label of the option to pick (the menu's cursor line starts with it)


@dataclass(frozen=True, slots=True)
class TuiSpec:
    """How one CLI's TUI is driven in a pane: measured against its pinned version."""

    startup: tuple[StartupScreen, ...]
    ready: tuple[str, ...]  # one of these on screen: it takes input
    busy: tuple[str, ...]  # one of these on screen: it is working
    blocked: tuple[str, ...]  # a prompt it can't get past on its own
    login: tuple[str, ...]  # it isn't logged in: the turn fails for good
    typed: bool  # prompts are typed key by key, not pasted
    confirms_delivery: bool  # a transcript says what it was sent and that the model got it
    launch: Launch
    cursor: str = "❯"  # what marks the selected line of its menus
    settle: float = 0.0  # seconds its ready screen must last: a startup screen may come up over it
    sessions: SessionStore | None = None  # its session files: where to find the one it chose, and its usage
    boxed: bool = False  # its input box is drawn between two rules, so what it holds can be read


def home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def session_file(directory: Path, pattern: str, session: str) -> Path | None:
    """The session file of `session` (a UUID in its name) under `directory`, if it is written yet."""
    if not is_session_id(session):
        return None
    try:
        return next((path for path in directory.glob(pattern) if path.name.endswith(f"{session}.jsonl")), None)
    except OSError:
        return None


def find_session(directory: Path, pattern: str, since: float, needle: str) -> str | None:
    """The id of the newest session file under `directory` matching `pattern`, written since
    `since` (wall clock), that holds `needle` (the turn's call id); None if there is none.

    The id is read from the file's name, and only as a UUID: a file an agent wrote there can
    at most name another session of its own CLI, never an option or a path."""
    if not needle:
        return None
    found: list[tuple[float, Path]] = []
    try:
        for path in directory.glob(pattern):
            try:
                written = path.stat().st_mtime
            except OSError:
                continue
            if written >= since - SESSION_CLOCK_SLACK_SECONDS and _SESSION_FILE.search(path.name):
                found.append((written, path))
    except OSError:
        return None
    wanted = needle.encode()
    for _, path in sorted(found, reverse=True)[:SESSION_FILES_SCANNED]:
        data = read_regular(path, SESSION_SCAN_BYTES)  # a FIFO an agent named as a session never blocks
        if data is not None and wanted in data:
            match = _SESSION_FILE.search(path.name)
            if match is not None and is_session_id(match.group(1)):
                return match.group(1)
    return None
