"""A fork's copy of a sandboxed agent's session, moved from its parent's home into its own.

A sandboxed agent's CLI keeps its sessions in the agent's home in the sandbox (`homes.py`). The
CLI's own fork (claude's `--fork-session`, codex's `thread/fork`, pi's `--fork`) is run where the
session is, in the parent's sandbox with the parent's home; the copy it writes there is then
taken out (`take_copy`), into the parent's agent directory (read-only inside its sandbox), and
put into the fork's home when the fork's home is made, at its first attempt (`place_copy`). The
parent's home is left as it was, and each agent keeps a home of its own. Each CLI's `Layout` says
where the copy is, what it goes on from (codex 0.171's copy holds only what is new, and reads the
rest from its source's rollout, copied along), and what of it names the fork's cwd (pi's header).

The parent's home is the agent's to write: what is read there is hostile. Only the files where
the CLI keeps the session are taken, found and opened without following a symbolic link (a link
planted there would have the fork's home take a file of yours), each a regular file of at most
`MAX_SESSION_BYTES`, at most `MAX_COPIED_FILES` a session and `MAX_SOURCES` sessions deep, the
search reading at most `MAX_SCANNED_ENTRIES` names.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ..harnesses.base import is_session_id

MAX_SESSION_BYTES = 256 * 1024 * 1024  # of one file of the copy: a long session's transcript, with room
MAX_COPIED_FILES = 4  # the files of one session: each CLI writes one
MAX_SOURCES = 16  # sessions a copy's history goes on from, one from the other (a fork of a fork of …)
MAX_FIRST_LINE_BYTES = 1024 * 1024  # of a file of the copy, read for the session it goes on from
MAX_SCANNED_ENTRIES = 10_000  # names read in the home's directories, looking for one session's files
COPY_CHUNK_BYTES = 1024 * 1024
DIRECTORY_MODE = 0o700
FILE_MODE = 0o600
WILDCARDS = frozenset("*?[")
_OPEN_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO in its place doesn't block


class CopyRefused(Exception):
    """The copy can't be taken out of the parent's home: the message says why."""


def _claude(session: str, home: Path) -> str | None:
    return f".claude/projects/*/{session}.jsonl" if is_session_id(session) else None


def _codex(session: str, home: Path) -> str | None:
    return f".codex/sessions/*/*/*/rollout-*-{session}.jsonl" if is_session_id(session) else None


def _pi(session: str, home: Path) -> str | None:
    """pi names a fork's session by its file, in the home it was made in."""
    try:
        relative = PurePosixPath(os.path.normpath(session)).relative_to(home)
    except ValueError:
        return None
    parts = relative.parts
    if not parts or any(part in ("..", ".") or WILDCARDS & set(part) for part in parts) or not is_session_id(parts[-1]):
        return None
    return str(relative)


def _codex_source(first: bytes) -> str | None:
    """The thread a codex rollout's history goes on from (`forked_from_id` of its `session_meta`, its first
    line): codex 0.171's fork writes only what is new and reads the rest from its source's rollout."""
    try:
        meta = json.loads(first)
    except (ValueError, RecursionError):  # RecursionError: a line nested deeper than Python's json reads
        return None
    payload = meta.get("payload") if isinstance(meta, dict) and meta.get("type") == "session_meta" else None
    source = payload.get("forked_from_id") if isinstance(payload, dict) else None
    return source if is_session_id(source) else None


def _pi_header(first: bytes, cwd: Path) -> bytes | None:
    """pi's session header (its first line) naming `cwd` as the session's: pi resumes no session whose
    cwd is missing, and a fork in a sandbox of its own doesn't see its parent's (pi's own fork writes
    the header anew, with the fork's cwd, as here). None where the line is no header."""
    try:
        header = json.loads(first)
    except (ValueError, RecursionError):
        return None
    if not isinstance(header, dict) or header.get("type") != "session":
        return None
    header["cwd"] = str(cwd)
    return json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True, slots=True)
class Layout:
    """Where a CLI keeps a session in its home: `files(session, home)`, a pattern relative to the home
    (`*` one name) of the session's file, None for what is no session of it; `source(first line)`, the
    session whose file a copy's history goes on from (None: the copy holds it all); and `header(first
    line, cwd)`, the copy's first line for a fork working in `cwd` (None: as it is)."""

    files: Callable[[str, Path], str | None]
    source: Callable[[bytes], str | None] | None = None
    header: Callable[[bytes, Path], bytes | None] | None = None


SESSION_FILES: dict[str, Layout] = {
    "claude": Layout(_claude), "codex": Layout(_codex, source=_codex_source), "pi": Layout(_pi, header=_pi_header),
}
"""Each CLI whose fork a sandbox moves into the fork's home."""


def forkable(harness: str) -> bool:
    """Whether a sandboxed agent of `harness` can be forked: where its CLI keeps a session is known."""
    return harness in SESSION_FILES


@dataclass(frozen=True, slots=True)
class Staged:
    """A fork's copy of `harness`'s session, taken out of the parent's home `home` into `directory`: the
    copy's `files` and its `sources`' (the sessions its history goes on from), relative to a home."""

    harness: str
    directory: Path
    files: tuple[str, ...]
    sources: tuple[str, ...]
    home: Path

    def session(self, session: str, home: Path) -> str:
        """`session` as the fork's home `home` names it: pi's, a file, named in the parent's home."""
        prefix = f"{self.home}{os.sep}"
        return f"{home}{os.sep}{session.removeprefix(prefix)}" if session.startswith(prefix) else session


def take_copy(harness: str, session: str, home: Path, staging: Path) -> Staged:
    """Move the files of `session` (the copy the CLI `harness` just made in the parent's `home`) to
    `staging` (new), and copy those of the sessions its history goes on from (codex's: the parent's,
    at most MAX_SOURCES deep), refusing what isn't a session's regular file; CopyRefused says why."""
    layout = SESSION_FILES.get(harness)
    pattern = layout.files(session, home) if layout is not None else None
    if layout is None or pattern is None:
        raise CopyRefused(f"{harness} named {session!r}, which is no session of its in the sandbox's home")
    home_fd = os.open(home, _OPEN_DIRECTORY)
    taken: list[tuple[str, ...]] = []
    moved = 0
    try:
        os.mkdir(staging, DIRECTORY_MODE)
        try:
            for _depth in range(MAX_SOURCES + 1):
                found = _found(home_fd, session, pattern)
                for parts in found:
                    if parts not in taken:
                        _take(home_fd, parts, staging)
                        taken.append(parts)
                moved = moved or len(taken)
                first = _first_line(staging.joinpath(*found[0]))
                source = layout.source(first) if layout.source is not None else None
                pattern = layout.files(source, home) if source is not None else None
                if source is None or pattern is None:
                    break
                session = source
            else:
                raise CopyRefused(f"session {session}'s history goes on from more than {MAX_SOURCES} others")
            for parts in taken[:moved]:  # the copy's own, out of the parent's home; a source is the parent's too
                _remove(home_fd, parts)
        except (CopyRefused, OSError):  # OSError: a directory swapped for a link as it was searched
            shutil.rmtree(staging, ignore_errors=True)
            raise
    finally:
        os.close(home_fd)
    named = tuple(str(PurePosixPath(*parts)) for parts in taken)
    return Staged(harness, staging, named[:moved], named[moved:], home)


def _found(home: int, session: str, pattern: str) -> list[tuple[str, ...]]:
    """The files in `home` of `session`, as its `pattern` finds them: one at least, at most MAX_COPIED_FILES."""
    found = sorted(_matching(home, PurePosixPath(pattern).parts, (), [MAX_SCANNED_ENTRIES]))
    if not found:
        raise CopyRefused(f"no file of session {session} is in the sandbox's home ({pattern})")
    if len(found) > MAX_COPIED_FILES:
        raise CopyRefused(f"more than {MAX_COPIED_FILES} files in the sandbox's home match session {session}'s {pattern}")
    return found


def _first_line(path: Path) -> bytes:
    """The start of a staged file's first line: at most MAX_FIRST_LINE_BYTES (the file is ours; what it says isn't)."""
    with open(path, "rb") as file:
        return file.read(MAX_FIRST_LINE_BYTES).split(b"\n", 1)[0]


def _matching(directory: int, pattern: tuple[str, ...], at: tuple[str, ...], left: list[int]) -> Iterator[tuple[str, ...]]:
    """The paths under the directory `directory` (at `at`) matching `pattern`, one part a name: a
    directory only where it is one (no link), the last a regular file. `left` is how many more
    names the whole search may read (MAX_SCANNED_ENTRIES at its start)."""
    first, rest = pattern[0], pattern[1:]
    names = [first]
    if WILDCARDS & set(first):
        with os.scandir(directory) as entries:
            names = []
            for entry in entries:
                left[0] -= 1
                if left[0] < 0:
                    raise CopyRefused(f"the sandbox's home holds more than {MAX_SCANNED_ENTRIES} names where the copy is looked for")
                if fnmatch.fnmatchcase(entry.name, first):
                    names.append(entry.name)
    for name in sorted(names):
        try:
            mode = os.stat(name, dir_fd=directory, follow_symlinks=False).st_mode
        except OSError:
            continue
        if rest and stat.S_ISDIR(mode):
            inner = os.open(name, _OPEN_DIRECTORY, dir_fd=directory)
            try:
                yield from _matching(inner, rest, (*at, name), left)
            finally:
                os.close(inner)
        elif not rest and stat.S_ISREG(mode):
            yield (*at, name)


def _walk(home: int, parts: tuple[str, ...]) -> list[int]:
    """The directories of `parts` under `home`, each opened without following a link: their descriptors."""
    directories: list[int] = []
    try:
        for name in parts[:-1]:
            directories.append(os.open(name, _OPEN_DIRECTORY, dir_fd=directories[-1] if directories else home))
    except OSError:
        for descriptor in directories:
            os.close(descriptor)
        raise
    return directories


def _take(home: int, parts: tuple[str, ...], staging: Path) -> None:
    """Copy the regular file at `parts` under `home` (no link followed) into `staging`."""
    named = PurePosixPath(*parts)
    try:
        directories = _walk(home, parts)
        try:
            source = os.open(parts[-1], _OPEN_FILE, dir_fd=directories[-1] if directories else home)
            try:
                status = os.fstat(source)
                if not stat.S_ISREG(status.st_mode):
                    raise CopyRefused(f"{named} in the sandbox's home is not a regular file")
                if status.st_size > MAX_SESSION_BYTES:
                    raise CopyRefused(f"{named} in the sandbox's home is over {MAX_SESSION_BYTES:,} bytes")
                target = staging.joinpath(*parts)
                target.parent.mkdir(DIRECTORY_MODE, parents=True, exist_ok=True)
                _copy(source, target, str(named))
            finally:
                os.close(source)
        finally:
            for descriptor in directories:
                os.close(descriptor)
    except OSError as error:
        raise CopyRefused(f"{named} in the sandbox's home can't be read: {error.strerror or error}") from None


def _remove(home: int, parts: tuple[str, ...]) -> None:
    """Remove the file at `parts` under `home`, no link followed on the way."""
    try:
        directories = _walk(home, parts)
        try:
            os.unlink(parts[-1], dir_fd=directories[-1] if directories else home)
        finally:
            for descriptor in directories:
                os.close(descriptor)
    except OSError as error:
        raise CopyRefused(f"{PurePosixPath(*parts)} in the sandbox's home can't be removed: {error.strerror or error}") from None


def _copy(source: int, target: Path, named: str) -> None:
    """At most MAX_SESSION_BYTES of `source` into the new file `target`: a file still growing is refused."""
    written = 0
    out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    try:
        while chunk := os.read(source, COPY_CHUNK_BYTES):
            written += len(chunk)
            if written > MAX_SESSION_BYTES:
                raise CopyRefused(f"{named} in the sandbox's home is over {MAX_SESSION_BYTES:,} bytes")
            view = memoryview(chunk)
            while view:
                view = view[os.write(out, view):]
    finally:
        os.close(out)


def place_copy(staged: Staged, home: Path, cwd: Path) -> None:
    """Put the copy `staged` into the fork's new `home`, as the parent's home held it, for a fork working
    in `cwd` (its first line made anew where the CLI's layout says so); its staging removed."""
    header = SESSION_FILES[staged.harness].header
    for relative in (*staged.files, *staged.sources):
        target = home / relative
        target.parent.mkdir(DIRECTORY_MODE, parents=True, exist_ok=True)
        source = staged.directory / relative
        if header is not None and relative in staged.files:
            _rewrite_first_line(source, lambda first: header(first, cwd))
        os.rename(source, target)
    shutil.rmtree(staged.directory, ignore_errors=True)


def _rewrite_first_line(path: Path, made: Callable[[bytes], bytes | None]) -> None:
    """The staged file `path` with its first line as `made` makes it of the old one (None: left as it is,
    as is a file whose first line is longer than MAX_FIRST_LINE_BYTES)."""
    with open(path, "rb") as old:
        first, newline, rest = old.read(MAX_FIRST_LINE_BYTES + 1).partition(b"\n")
        line = made(first) if newline else None
        if line is None:
            return
        fresh = path.with_name(path.name + ".new")
        with open(fresh, "xb") as new:
            new.write(line + newline + rest)
            shutil.copyfileobj(old, new, COPY_CHUNK_BYTES)
    os.replace(fresh, path)
