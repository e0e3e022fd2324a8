"""The run's record on disk: its layout, and reading and writing it safely.

    <run root>/                      .awf/runs by default (awf run --run-root moves it)
      .gitignore                     `*`: records stay out of the project's history
      <workflow>/<run id>/
        run.json                     what the run was started with
        turns.jsonl                  one line per ended turn: agent, call id, outcome
        log.jsonl                    wf.log lines
        tools.jsonl                  every tool call: who, input (redacted), result or error, timing
        approvals.jsonl              every decision on a call that needed approval
        messages.jsonl               every message between agents and people: sent, then read
        refusals.jsonl               every process refused on the run's sockets for who it is
        sessions.jsonl               every agent an attempt opened, and the session it resumed
                                     (the attempt's record: engine/record/attempts.py)
        calls/<call id>/
          call.json                  the turn's prompt, schema and deadline
          candidates.jsonl           every answer handed in, accepted or not, and why
          result.json                the accepted answer (created once, exclusively)
        output.json                  how the run ended, and its value; when the workflow raised,
                                     `where` (file:line) and its whole `traceback`
        temporal.json                a run on Temporal's: its workflow id, address, namespace,
                                     task queue (`TEMPORAL_FILE`)

Private: every directory the record creates is 0700 and every file 0600, whatever the
umask (an agent's prompt, its launcher path and call id are nobody else's business).

Durability, before which acknowledgement:
- an accepted answer's result.json is written whole (temp file, fsync, link, fsync of the
  directory) before `wfa result` is told it was accepted;
- a tool call's line in tools.jsonl, and a message's "sent" line in messages.jsonl, are
  written (write(2) returned, so they survive `kill -9` of the run, not a power cut) before
  `wfa tool` gets its answer and before `wfa send`/`reply` and the workflow are told the
  message was sent; a mail's "read" line before the mail is handed to its reader; an answer's
  line in candidates.jsonl before it is refused or accepted; a turn's line before the
  workflow gets the turn; a turn's call.json (written whole, not yet fsynced: see below)
  before its `CallOpened` ask is answered, so before any answer of that turn is recorded;
- an agent's line in sessions.jsonl (the harness it opened on, which `awf continue` resumes its
  session on) is told as the agent opens, and nothing waits for it; it is written before any
  line of that agent's turns: told before the agent exists, it is in the Recorder's mailbox
  ahead of the agent's first call.json ask (its turns' and candidates' lines go through `Appends`
  only once that ask is answered; before, as an operation's first, through the mailbox behind
  it), and a batch writes sessions.jsonl before its other files. So a turns.jsonl that names an agent's session names it with its sessions line, after
  `kill -9` too; a line lost with no turn of its agent written loses nothing to resume (the
  next attempt opens the agent afresh and says why);
- what can't be written is answered `internal-error` (a tool call "may have run"; a message
  wasn't sent; an answer wasn't accepted) and the run ends `failed`: its record is incomplete.

Batches: the Recorder takes what is queued in its mailbox and appends it as one batch, one
write(2) per file, and answers each ask in the batch once its file's write returned (so no ask
waits longer than the batch it is in); a batch is written when an ask waits on it and nothing
more is queued, once it holds `BATCH_MAX_BYTES`, and otherwise (told lines no acknowledgement
depends on, such as wf.log's) within `recorder.BATCH_WAIT_SECONDS`. A line asked through the
Recorder's `Appends` (as the broker asks a tool call's, and an agent its candidates' and turns')
with nothing queued in the Recorder's mailbox is handled in its asker's task (a write-through
ask, still a message in the mailbox trace): one write(2), synchronously, after whatever the
batch holds.
A file's lines keep the order they were sent in. A failed write is cut back off whole and
fails every ask with a line in it.

Fsync, when (group commit): appended lines are fsynced (with the directory of a file they
created) at most `GROUP_COMMIT_SECONDS` after the first one that isn't, at every turn's end
and at the run's end (the Recorder's stop), one fsync a file however many lines it took, a
commit's fsyncs in one worker-thread hop for each `SYNC_FDS_AT_ONCE` files; nobody's
acknowledgement waits for it but the run's end (output.json is written after it). A file
removed under the run (`rm -rf`, `git clean`, or replaced by a rename over it) is found gone by
the commit (it opens each file by its path, and checks the run's open logs' link counts), which
counts it failed (the lines written to it since are lost) and starts it afresh at its next line.
call.json (written as the turn opens) and usage.json
(rewritten by the commit after turns ended, before its fsyncs) are held as the appends are: written
whole on the loop's thread (temp file, one write, rename: a reader and `kill -9` of the run
find the old file or the new one, never a torn one), no fsync and no thread hop of their own,
and fsynced by that same group commit, with their directories (a call's, and `calls/`'s entry
for it): so by a turn's end's commit its call.json and the usage.json counting it are on disk
through a power cut too. run.json, result.json and output.json are fsynced as they are written
(temp file, fsync, rename or link, fsync of the directory), beside the appends: an agent's
whole write doesn't hold up another agent's lines. The result.json files queued while others
are being written are written together (`write_wholes_synced`), each written and fsynced as
above before its own ask is answered: two thread hops for many agents' files, not one each.
A worker thread makes only the fsync calls (`fsync_each`); a file's other syscalls are made on
the loop's thread, where they cost what they cost, without a hand-off of the GIL each.
A failed append leaves a log whole lines; a failed whole write leaves no temp file. Logs are read back skipping a torn last line (from a
run killed mid-write). Only the Recorder writes here: its actor, whose write-through handlers an
`Appends` asker may run, on the event loop's one thread, so the record has one writer and one order.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import msgspec

RECORD_VERSION = 1
DEFAULT_RUN_ROOT = Path(".awf") / "runs"
TEMPORAL_FILE = "temporal.json"  # in a Temporal run's record: where its workflow is (temporal/engine.py writes it)
_encoder = msgspec.json.Encoder()
GROUP_COMMIT_SECONDS = 1.0  # the longest an appended line waits for its fsync
BATCH_MAX_BYTES = 1 << 20  # a batch is written once it holds this much, even with more queued
MAX_READ_BYTES = 1 << 30  # of a record file read at once: a long run's tools.jsonl is some MiB; a sparse file an agent grew, any size


def new_run_id(now: float | None = None) -> str:
    """Local time to the second and four hex digits, e.g. `20261129-153207-a7f3`."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return f"{stamp}-{secrets.token_hex(2)}"


RUN_ID_DRAWS = 8
"""Run ids drawn for a new run before giving up: runs of one workflow started in the same
second share the stamp, and four hex digits alone clash often when many start at once."""


def make_run_record_dir(workflow_dir: Path) -> tuple[str, Path]:
    """A new run's id and its record directory in `workflow_dir` (made 0700): an id another
    run already has is drawn again, so two runs never share a record."""
    for _ in range(RUN_ID_DRAWS):
        run_id = new_run_id()
        try:
            make_private_dirs(workflow_dir / run_id, exist_ok=False)
        except FileExistsError:
            continue
        return run_id, workflow_dir / run_id
    raise FileExistsError(errno.EEXIST, f"the {RUN_ID_DRAWS} run ids drawn were all taken", str(workflow_dir))


encode: Callable[[Any], bytes] = _encoder.encode
"""A value as the record's JSON (the encoder's own method: no frame of ours on the hottest path)."""


PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def make_private_dirs(path: Path, *, exist_ok: bool = True) -> None:
    """Create `path` and any missing parents, each new one 0700 whatever the umask.

    Directories that already exist (a run root the user chose, say) are left as they are.
    """
    if exist_ok:  # most often only `path` is new (a call's directory) or nothing is: one mkdir, no lookups
        try:
            os.mkdir(path, PRIVATE_DIR_MODE)
        except FileExistsError:
            return
        except FileNotFoundError:
            pass  # a parent is missing too: made below
        else:
            os.chmod(path, PRIVATE_DIR_MODE)  # the umask may have taken bits the mode asked for
            return
    missing: list[Path] = []
    here = path
    while not here.exists():
        missing.append(here)
        here = here.parent
    if not missing and not exist_ok:
        raise FileExistsError(f"{path} exists")
    for directory in reversed(missing):
        try:
            directory.mkdir(PRIVATE_DIR_MODE)
        except FileExistsError:
            if directory == path and not exist_ok:
                raise
            continue  # made meanwhile by someone else: theirs, not ours to change
        directory.chmod(PRIVATE_DIR_MODE)  # the umask may have taken bits the mode asked for


def _open_private(path: Path, flags: int) -> int:
    """`path` opened (made 0600 if new) without waiting on it: a FIFO, a device or a link an agent
    put in its place is refused (OSError), never written to (a full pipe would block the loop's thread)."""
    fd = os.open(path, flags | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW, PRIVATE_FILE_MODE)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file: something else was put in its place", str(path))
        os.fchmod(fd, PRIVATE_FILE_MODE)  # exact, whatever the umask (or an older file) had
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_all(fd: int, data: bytes) -> None:
    written = os.write(fd, data)
    if written < len(data):  # a short write (a signal, a full disk): the rest, until it raises
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view) :]


def write_private(path: Path, data: bytes) -> None:
    """Write a small file whole (0600), without the temp file and fsyncs of `write_whole`."""
    make_private_dirs(path.parent)
    fd = _open_private(path, os.O_WRONLY | os.O_TRUNC)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def _temp_beside(path: Path) -> Path:
    """A fresh temp file's name in `path`'s directory (made private if new), for a rename over `path`."""
    make_private_dirs(path.parent)
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")


class _Staged:
    """A whole file on its way: its temp file written and open, not yet fsynced or in place."""

    __slots__ = ("path", "temp", "fd", "exclusive")

    def __init__(self, path: Path, temp: Path, fd: int, exclusive: bool) -> None:
        self.path, self.temp, self.fd, self.exclusive = path, temp, fd, exclusive


def _stage(path: Path, data: bytes, exclusive: bool) -> _Staged:
    """`data` in a new temp file beside `path`, left open (for its fsync); nothing left of it on failure."""
    temp = _temp_beside(path)
    fd = _open_private(temp, os.O_WRONLY | os.O_EXCL)
    try:
        _write_all(fd, data)
    except BaseException:
        os.close(fd)
        temp.unlink(missing_ok=True)
        raise
    return _Staged(path, temp, fd, exclusive)


def _placed(staged: _Staged) -> OSError | None:
    """The temp file put at its path (renamed over it, or linked where it must be new); why it couldn't be."""
    try:
        if staged.exclusive:
            os.link(staged.temp, staged.path)
        else:
            os.replace(staged.temp, staged.path)
    except OSError as error:
        return error
    return None


def write_replacing(path: Path, data: bytes) -> None:
    """Write `path` whole without an fsync: temp file, one write, rename over `path`.

    A reader, and a run killed mid-way (`kill -9`), finds the old file or the new one, never
    a torn one; the caller fsyncs it later (the group commit). On failure the temp file is
    removed and `path` is as it was.
    """
    staged = _stage(path, data, exclusive=False)
    os.close(staged.fd)
    error = _placed(staged)
    if error is not None:
        staged.temp.unlink(missing_ok=True)
        raise error


def write_whole(path: Path, data: bytes, *, exclusive: bool = False) -> None:
    """Write `path` whole: temp file, fsync, rename (or link, failing if it exists), fsync of the directory.

    On any failure (a full disk, say) the temp file is removed and `path` is as it was.
    """
    staged = _stage(path, data, exclusive)
    try:
        try:
            os.fsync(staged.fd)
        finally:
            os.close(staged.fd)
        error = _placed(staged)
        if error is not None:
            raise error
    finally:
        staged.temp.unlink(missing_ok=True)
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


class LineLog:
    """An append-only JSON-lines file (0600), opened by its one writer while it needs it.

    On first use a torn last line (from a run that died mid-write) is ended, so the
    next record starts on a line of its own. Each batch of lines is one unbuffered write:
    when it fails (a full disk) the file is cut back to where it was, so no later line is
    glued to a torn one, and the error is raised. `created` says the file was new (its
    directory's entry needs an fsync of its own).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.created = False
        self._fd: int | None = None
        self._size = 0

    def _open(self) -> int:
        make_private_dirs(self.path.parent)
        fd = _open_private(self.path, os.O_RDWR | os.O_APPEND)
        try:
            size = os.fstat(fd).st_size
            if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
                _write_all(fd, b"\n")
                size += 1
        except BaseException:
            os.close(fd)
            raise
        self._fd, self._size, self.created = fd, size, size == 0
        return fd

    def write(self, data: bytes) -> None:
        """Append `data`, whole lines each ending in a newline, in one write."""
        fd = self._fd if self._fd is not None else self._open()
        try:
            _write_all(fd, data)
        except OSError:
            try:
                os.ftruncate(fd, self._size)
            except OSError:
                pass  # what is torn is skipped by read_lines, and the next open ends the line
            raise
        self._size += len(data)

    def gone(self) -> FileNotFoundError | None:
        """Why the file it holds open is no longer its path's (removed, or replaced by a rename
        over it), or None: what it wrote there since went to no record. One fstat, made by the
        group commit, not a write."""
        if self._fd is None or os.fstat(self._fd).st_nlink > 0:
            return None
        return removed_under_the_run(str(self.path))

    def append(self, record: Any) -> None:
        self.write(encode(record) + b"\n")

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


SYNC_FDS_AT_ONCE = 16
"""Descriptors held open at once for one worker thread's fsyncs (`fsync_all`, `write_wholes_synced`):
a commit of thousands of files takes a hop for each 16, never thousands of fds (the run's fd
limit is shared with its agents' sockets); a hop costs about what a file's hand-offs did."""


def fsync_each(fds: Sequence[int]) -> list[OSError | None]:
    """fsync each of `fds`; for each, the error that failed it, or None.

    The one thing a worker thread does for the record: every other syscall of a file (open, write,
    link, close) is made on the loop's thread, as the appends are. Each syscall in a thread hands
    the GIL to the loop's thread and takes it back, two context switches while the loop is busy;
    at a dozen syscalls a file they cost more than the syscalls (issue 10: 98 futex calls an
    agent, a tenth of its CPU), at one a file they don't.
    """
    errors: list[OSError | None] = []
    for fd in fds:
        try:
            os.fsync(fd)
            errors.append(None)
        except OSError as error:
            errors.append(error)
    return errors


FsyncEach = Callable[[Sequence[int]], Awaitable[list[OSError | None]]]
"""`fsync_each` run where it doesn't block the loop (the Recorder's: in one of its threads)."""


def removed_under_the_run(path: str) -> FileNotFoundError:
    """A record file found gone by the group commit (`rm -rf`, `git clean`, a rename over it)."""
    return FileNotFoundError(errno.ENOENT, "the record's file was removed while the run wrote to it", path)


def _open_to_sync(path: str) -> int:
    """`path` opened for its fsync, without waiting on it and not through a symbolic link: a FIFO
    or a link put in its place (a link to a file on a mount that never answers would hold the
    loop's thread) is refused; every file and directory the record fsyncs is one it made."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW)
    except FileNotFoundError:  # removed under the run (rm -rf, git clean): what was written since is lost
        raise removed_under_the_run(path) from None
    try:
        if not stat.S_ISREG(mode := os.fstat(fd).st_mode) and not stat.S_ISDIR(mode):
            raise OSError(errno.EINVAL, "not a regular file or a directory: something else was put in its place", path)
    except BaseException:
        os.close(fd)
        raise
    return fd


async def fsync_all(paths: Iterable[str], fsync: FsyncEach) -> list[tuple[Path, OSError]]:
    """fsync each of `paths` (a file, or a directory for the entries made in it), `SYNC_FDS_AT_ONCE`
    at a time, opened and closed on the caller's thread; the ones that failed, and why."""
    failed: list[tuple[Path, OSError]] = []
    pending = list(paths)
    for start in range(0, len(pending), SYNC_FDS_AT_ONCE):
        opened: list[tuple[str, int]] = []
        try:
            for path in pending[start : start + SYNC_FDS_AT_ONCE]:
                try:
                    opened.append((path, _open_to_sync(path)))
                except OSError as error:
                    failed.append((Path(path), error))
            errors = await fsync([fd for _, fd in opened])
        finally:
            for _, fd in opened:
                os.close(fd)
        failed.extend((Path(path), error) for (path, _), error in zip(opened, errors, strict=True) if error is not None)
    return failed


async def write_wholes_synced(files: Sequence[tuple[Path, bytes, bool]], fsync: FsyncEach) -> list[OSError | None]:
    """`write_whole` each of `files` (path, data, exclusive), `SYNC_FDS_AT_ONCE` at a time: written
    here, their fsyncs and then their directories' in `fsync`'s thread, two hops for all of them;
    for each, the error that failed it, or None. What failed leaves no temp file and its path as it was."""
    errors: list[OSError | None] = []
    for start in range(0, len(files), SYNC_FDS_AT_ONCE):
        errors += await _write_synced(files[start : start + SYNC_FDS_AT_ONCE], fsync)
    return errors


async def _write_synced(files: Sequence[tuple[Path, bytes, bool]], fsync: FsyncEach) -> list[OSError | None]:
    errors: list[OSError | None] = [None] * len(files)
    staged: dict[int, _Staged] = {}
    try:
        for n, (path, data, exclusive) in enumerate(files):
            try:
                staged[n] = _stage(path, data, exclusive)
            except OSError as failed:
                errors[n] = failed
        synced = await fsync([each.fd for each in staged.values()]) if staged else []
        for (n, each), fsync_error in zip(list(staged.items()), synced, strict=True):
            os.close(each.fd)
            each.fd = -1
            errors[n] = fsync_error if fsync_error is not None else _placed(each)
    finally:
        for each in staged.values():
            if each.fd >= 0:
                os.close(each.fd)
            each.temp.unlink(missing_ok=True)
    placed = {n: str(each.path.parent) for n, each in staged.items() if errors[n] is None}
    failed_dirs = {str(path): error for path, error in await fsync_all(set(placed.values()), fsync)}
    for n, directory in placed.items():
        errors[n] = failed_dirs.get(directory)
    return errors


def sync_paths(paths: Iterable[str]) -> list[tuple[Path, OSError]]:
    """fsync each of `paths` (a file, or a directory for the entries made in it) on this thread;
    the ones that failed, and why."""
    failed: list[tuple[Path, OSError]] = []
    for path in paths:
        try:
            fd = _open_to_sync(path)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as error:
            failed.append((Path(path), error))
    return failed


class GroupCommit:
    """When the appended lines are next fsynced: a pure rule over the clock's readings.

    A sync is due `interval_s` after the first line that isn't synced, or at once when one
    is asked for (a turn's end, the run's end); never while nothing waits for one.
    """

    def __init__(self, interval_s: float = GROUP_COMMIT_SECONDS) -> None:
        self.interval_s = interval_s
        self.unsynced_since: float | None = None
        self.asked = False

    def appended(self, now: float) -> None:
        if self.unsynced_since is None:
            self.unsynced_since = now

    def ask(self) -> None:
        """A turn ended: sync what is written as soon as possible."""
        self.asked = self.unsynced_since is not None

    def due_in(self, now: float) -> float | None:
        """Seconds until a sync is due (0: now), or None while nothing is unsynced."""
        if self.unsynced_since is None:
            return None
        if self.asked:
            return 0.0
        return max(0.0, self.unsynced_since + self.interval_s - now)

    def syncing(self) -> None:
        """A sync of everything appended so far has begun."""
        self.unsynced_since = None
        self.asked = False


def append_line(path: Path, record: Any) -> None:
    """Append one JSON line to `path` (opening and closing it)."""
    log = LineLog(path)
    try:
        log.append(record)
    finally:
        log.close()


def read_lines(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a JSON-lines file, skipping any line that is torn or not an object."""
    try:
        data = regular_bytes(path)
    except FileNotFoundError:
        return
    for raw in (data or b"").splitlines():
        try:
            record = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            continue
        if isinstance(record, dict):
            yield record


def read_json(path: Path) -> Any:
    data = regular_bytes(path)
    if data is None:
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return msgspec.json.decode(data)


def regular_bytes(path: Path, offset: int = 0, limit: int = MAX_READ_BYTES) -> bytes | None:
    """The bytes of the regular file `path` from `offset`, None for anything else: the record can be
    written by an agent, and a FIFO put there would block its reader for good, a device never end.

    More than `limit` bytes there raise OSError (EFBIG), never read: an agent can grow a file of the
    record to gigabytes (`truncate -s 8G`, no disk spent), which read whole would take its reader's
    memory (`awf ls`, or the live view in the run's own process)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        found = os.fstat(descriptor)
        if not stat.S_ISREG(found.st_mode):
            return None
        size = max(0, found.st_size - offset)
        if size > limit:
            raise OSError(errno.EFBIG, f"more than {limit} bytes to read: no record file is that large", str(path))
        with os.fdopen(descriptor, "rb", closefd=False) as file:
            file.seek(offset)
            return file.read(size)  # what is there as it is opened; lines appended since are read next time
    finally:
        os.close(descriptor)


def find_run(run_root: Path, run: str | None) -> Path | None:
    """A run's directory: by path, by id (or `<workflow>/<id>`), or the latest if `run` is None."""
    if run is not None:
        direct = Path(run)
        if (direct / "run.json").exists():
            return direct
        if (run_root / run / "run.json").exists():
            return run_root / run
        matches = sorted(run_root.glob(f"*/{run}"))
        return matches[0] if len(matches) == 1 else None
    runs = [path.parent for path in run_root.glob("*/*/run.json")]
    if not runs:
        return None
    return max(runs, key=lambda path: (path / "run.json").stat().st_mtime_ns)
