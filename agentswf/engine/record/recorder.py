"""The Recorder: the one actor that writes a run's directory.

Everything that happens in a run reaches disk as a message to it, so the record has one
writer and a single order, and a run's mailbox trace shows every line. Lines queued in its
mailbox are appended in batches, one write per file for whatever was queued, and each ask is
answered when its batch is written; a line asked through `Appends` (a write-through ask,
`ActorRef.ask_inline`) with nothing queued ahead of it is handled in its asker's task, at
once, one write, with no schedule point; call.json and
usage.json are written whole on the loop's thread as the lines are, unsynced; fsyncs (run.json,
result.json and output.json, and the group commit of the lines, call.json and usage.json) run in
the Recorder's own threads beside the batches, so neither the event loop nor another agent's
lines wait on them. Those threads make the fsync calls and nothing else (`records.fsync_each`).
See layout.py for the policy.
"""

from __future__ import annotations

import typing
from collections import deque
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec
import structlog

from ...actors import Actor, ActorRef, Reply, handler, write_through
from ...actors.backend import current_time
from ...actors.mailbox import Mailbox
from ...progress import progress
from ..accounting import Ledger
from ..clock import in_real_time, virtual
from ..outcomes import Turn
from .attempts import SESSIONS_FILE
from .layout import (
    BATCH_MAX_BYTES,
    GROUP_COMMIT_SECONDS,
    RECORD_VERSION,
    GroupCommit,
    LineLog,
    encode,
    fsync_all,
    fsync_each,
    write_private,
    write_replacing,
    write_wholes_synced,
)
from .lines import (
    ATTEMPTS_FILE,
    ApprovalDecided,
    AttemptOutput,
    CallOpened,
    CandidateSeen,
    CliUsed,
    ConnectionRefused,
    Line,
    Logged,
    MessageRead,
    MessageSent,
    ResultAccepted,
    RunEnded,
    RunStarted,
    SessionOpened,
    ToolCalled,
    TurnEnded,
)

_log = structlog.get_logger("agentswf.recorder")
BATCH_WAIT_SECONDS = 0.001  # the longest a batch no ask is waiting on is held for more lines
RECORDER_THREADS = 4  # worker threads for whole-file writes and group commits (each fsyncs)
_RUN_LOGS = ("turns", "log", "tools", "approvals", "messages", "refusals")


























class RecordGaps(msgspec.Struct, frozen=True):
    """Asked at the run's end: why the record is incomplete, or None when every write held."""


class _LogsWaiting(msgspec.Struct, frozen=True):
    """Told by the Recorder to itself: wf.log lines wait in its LogLines."""


class LogLines:
    """wf.log's lines on their way to the Recorder.

    `put` never waits and never fails, however busy the Recorder is: wf.log is a plain
    function, and its caller is the workflow's own code, not an agent, so the backlog is
    the workflow's to bound. The Recorder takes every waiting line at once, in order.
    """

    def __init__(self) -> None:
        self._lines: deque[Logged] = deque()
        self._waiting = anyio.Event()

    def put(self, line: Logged) -> None:
        self._lines.append(line)
        self._waiting.set()

    def take(self) -> list[Logged]:
        lines = list(self._lines)
        self._lines.clear()
        return lines

    async def wait(self) -> None:
        await self._waiting.wait()
        self._waiting = anyio.Event()


class Appends:
    """The Recorder's write-through asks: `await appends.ask(ToolCalled(...))` is
    `recorder.ask_inline` of the same line, so it answers as the Recorder's ask does (True
    once the line is written, False when it couldn't be; None for a turn's or a candidate's
    line) and is a mailbox event in the run's trace.

    With nothing queued in the Recorder's mailbox the line is handled in the asker's task,
    at once, even while a whole-file handler of the Recorder awaits its fsync (its line
    handlers are write-through): one write(2), after whatever lines the Recorder's batch
    holds, and no schedule point, where a schedule point alone cost more than the plain
    loop's encode and write together (issue 10). Behind queued messages it waits its turn in
    the mailbox, so the record keeps the mailbox's one order. Before the Recorder has started
    an ask waits for it; once it has stopped, an ask is `ActorStopped`. A message whose record
    isn't one appended line is a TypeError.
    """

    def __init__(self) -> None:
        self._ref: ActorRef | None = None  # the Recorder's, once it has started
        self._opened = anyio.Event()

    def ask(self, message: Any) -> Awaitable[bool | None]:
        """`recorder.ask_inline(message)`, to await (the awaitable itself: no frame of its own)."""
        if type(message) not in _LINES:
            raise TypeError(f"{type(message).__name__} is not a line the Recorder appends")
        ref = self._ref
        if ref is None:
            return self._ask_once_opened(message)
        return ref.ask_inline(message)

    async def _ask_once_opened(self, message: Any) -> bool | None:
        await self._opened.wait()  # the Recorder hasn't started yet
        assert self._ref is not None
        return await self._ref.ask_inline(message)  # type: ignore[no-any-return]

    def open(self, ref: ActorRef) -> None:
        """The Recorder has started: asks go to `ref`."""
        self._ref = ref
        self._opened.set()






_LINES: frozenset[type] = frozenset(typing.get_args(Line))


def disk_waits() -> tuple[float, float]:
    """A run's Recorder's batch wait and group-commit interval: BATCH_WAIT_SECONDS and
    GROUP_COMMIT_SECONDS, and none on a virtual clock. They are the disk's times, which pass in
    real time; on a virtual clock each wait would be a jump of it (a tenth of a second of real
    idleness, agentswf.testing.clock) for nothing the run decides by; at once is no less durable."""
    return (0.0, 0.0) if virtual() else (BATCH_WAIT_SECONDS, GROUP_COMMIT_SECONDS)


class Recorder(Actor):
    """Writes the record; a disk that fails it (full, gone read-only) is logged, never a crash of the run.

    What couldn't be written is counted in `failures` and the run ends failed for it
    (`RecordGaps`). What an acknowledgement depends on is asked, not told, and answered
    True once on disk: an accepted answer, a tool call, a message sent or read. So
    nothing is acknowledged that isn't on disk (see layout.py for the policy).

    A line's handler (write-through: see `Appends`) writes it at once when it is asked and
    nothing else waits to be written; otherwise it queues the line (and its ask's reply) in
    the batch, written when the mailbox is empty or the batch is full, or first thing by the
    next line asked. The run's own logs
    stay open for the run (six fds at most); a call's candidates.jsonl is opened for its
    batch and closed after it, so no fd stays with an agent.
    """

    _mailbox: Mailbox  # its own, to see whether more is queued for the batch

    def __init__(
        self,
        run_dir: Path,
        logs: LogLines | None = None,
        appends: Appends | None = None,
        ledger: Ledger | None = None,
        batch_wait_seconds: float = BATCH_WAIT_SECONDS,
        group_commit_seconds: float = GROUP_COMMIT_SECONDS,
    ) -> None:
        """`batch_wait_seconds` and `group_commit_seconds`: how long a batch is held and lines go
        unsynced at most (a run's are `disk_waits()`)."""
        super().__init__()
        self.run_dir = run_dir
        self.ledger = ledger or Ledger()  # what the run spent, written to usage.json as turns end
        self._usage_stale = False  # the ledger has turns usage.json doesn't
        self.lines = logs or LogLines()
        self.appends = appends or Appends()
        self.failures = 0
        self._first_failure = ""
        self._logs = {str(run_dir / f"{name}.jsonl"): LineLog(run_dir / f"{name}.jsonl") for name in _RUN_LOGS}
        self._turns, self._log, self._tools, self._approvals, self._messages, self._refusals = self._logs
        self._sessions = str(run_dir / SESSIONS_FILE)
        self._run_json: dict[str, Any] | None = None  # as written, to write again naming a CLI more
        self._calls = str(run_dir / "calls")
        self._batch: dict[str, list[bytes]] = {}  # file -> its lines (each ending in a newline) waiting for the batch's write
        self._batch_replies: dict[str, list[tuple[Reply, bool]]] = {}  # file -> (ask, answered True/False)
        self._batch_bytes = 0
        self._batch_ends_turn = False
        self._batch_held = anyio.Event()  # a batch is held for more lines
        self._unsynced: set[str] = set()  # files (and directories) written since the last group commit
        self._batch_wait_s = batch_wait_seconds
        self._commit = GroupCommit(group_commit_seconds)
        self._commit_wanted = anyio.Event()
        self._syncing: anyio.Event | None = None  # set once the group commit under way is done
        self._whole_writes = 0  # fsynced whole-file writes (result.json) under way
        self._whole_queue: list[tuple[Path, bytes, bool, Reply]] = []  # queued for `_write_wholes`
        self._whole_writers = 0  # tasks of `_write_wholes` running (one thread each at most)
        self._whole_written = anyio.Event()
        # Its own threads: the Recorder never waits on a pool a handler or a test can fill.
        self._threads = anyio.CapacityLimiter(RECORDER_THREADS)

    async def on_start(self) -> None:
        self._mailbox = self._cell.mailbox
        self.start_soon(self._watch_log_lines)
        self.start_soon(self._group_commits)
        self.start_soon(self._held_batches)
        self.appends.open(self.ref)

    async def _watch_log_lines(self) -> None:
        while True:
            await self.lines.wait()
            await self.ref.tell(_LogsWaiting())

    def _failed(self, path: Path, error: OSError) -> bool:
        self.failures += 1
        where = path.relative_to(self.run_dir) if path.is_relative_to(self.run_dir) else path
        self._first_failure = self._first_failure or f"{where}: {error.strerror or error}"
        _log.error("the run's record could not be written", path=str(path), error=str(error))
        return False

    # Batches of appended lines ------------------------------------------------------

    def _line(self, msg: Any) -> tuple[str, Any, bool]:
        """Where an appended message's line goes, its record, and whether its ask is answered True/False (else None)."""
        kind = type(msg)
        if kind is ToolCalled:
            return self._tools, msg, True
        if kind is MessageSent:
            return self._messages, {"event": "sent", **msgspec.structs.asdict(msg)}, True
        if kind is MessageRead:
            return self._messages, {"event": "read", **msgspec.structs.asdict(msg)}, True
        if kind is ApprovalDecided:
            return self._approvals, msg, True
        if kind is CandidateSeen:
            return f"{self._calls}/{msg.call_id}/candidates.jsonl", msg, False
        if kind is AttemptOutput:
            return f"{self._calls}/{msg.call_id}/{ATTEMPTS_FILE}", msg, False
        if kind is TurnEnded:
            turn = msg.turn
            progress("agentswf.turns", "turn ended", agent=turn.agent, turn=turn.n, call=turn.call_id,
                     outcome=turn.outcome.kind)
            self._batch_ends_turn = True  # what is written by the end of this batch is fsynced at once
            self._account(turn)
            return self._turns, turn, False
        if kind is Logged:
            return self._log, msg, False
        if kind is ConnectionRefused:
            return self._refusals, msg, False
        raise TypeError(f"{kind.__name__} is not a line the Recorder appends")

    @write_through
    def line(self, msg: Line) -> bool | None:
        """A message whose record is one appended line: written now if it is asked and nothing
        is queued for the batch nor in the mailbox (what `_done` would do, at once); else queued
        in the batch, its ask answered when the batch is written. Answered True once written
        (False if it couldn't be) for a tool call, a message sent or read and an approval;
        None for the rest. Write-through (`Appends`): it touches only the batch and the logs,
        which no handler holds across an await."""
        if type(msg) is Logged:
            self._take_log_lines()  # wf.log's earlier lines first
        if self._batch or not self.asked_alone():
            self._queue_line(msg, self.defer())
            self._done()
            return None
        path, record, answer = self._line(msg)
        written = self._write_lines(path, encode(record) + b"\n")
        if self._batch_ends_turn:
            self._turn_written()
        return written if answer else None

    def _queue_line(self, msg: Any, reply: Reply | None) -> str:
        path, record, answer = self._line(msg)
        self._queue_data(path, encode(record) + b"\n")
        if reply is not None and reply.pending:
            replies = self._batch_replies.get(path)
            if replies is None:
                replies = self._batch_replies[path] = []
            replies.append((reply, answer))
        return path

    def _queue_data(self, path: str, data: bytes) -> None:
        """Queue whole lines for `path` in the batch."""
        lines = self._batch.get(path)
        if lines is None:
            lines = self._batch[path] = []
        lines.append(data)
        self._batch_bytes += len(data)

    def _done(self) -> None:
        """A handler is done: write the batch if it is full, or an ask waits on it and nothing more is queued.

        A batch nobody waits on (told lines only), or one whose next messages were
        withdrawn (their askers gave up), is written the batch wait later at most.
        """
        if not self._batch:
            return
        if self._batch_bytes >= BATCH_MAX_BYTES or (self._batch_replies and not self._mailbox.depth):
            self._write_batch()
        else:
            self._batch_held.set()

    async def _held_batches(self) -> None:
        while True:
            await self._batch_held.wait()
            await anyio.sleep(self._batch_wait_s)
            self._batch_held = anyio.Event()
            self._write_batch()

    def _write_batch(self) -> set[str]:
        """Write the batch, one write per file, and answer its asks; the files whose write failed."""
        batch, self._batch = self._batch, {}
        replies, self._batch_replies = self._batch_replies, {}
        failed: set[str] = set()
        self._batch_bytes = 0
        try:
            for path, lines in batch.items():
                written = self._write_lines(path, b"".join(lines))
                if not written:
                    failed.add(path)
                for reply, answer in replies.get(path, ()):
                    reply.set(written if answer else None)
        except Exception as error:  # not the disk's (that is `failed`): no ask of the batch is told it was written
            for file_replies in replies.values():
                for reply, _ in file_replies:
                    reply.fail(error)
            raise
        if self._batch_ends_turn:
            self._turn_written()
        return failed

    def _turn_written(self) -> None:
        """A turn's line is written: the group commit fsyncs it (and all before it) at once."""
        self._batch_ends_turn = False
        self._commit.ask()
        self._commit_wanted.set()

    def _write_lines(self, path: str, data: bytes) -> bool:
        log = self._logs.get(path)
        kept = log is not None
        if log is None:
            log = LineLog(Path(path))  # a call's candidates.jsonl: open only for this write
        try:
            try:
                log.write(data)
            finally:
                if not kept:
                    log.close()
        except OSError as error:
            return self._failed(log.path, error)
        self._unsynced.add(path)
        if log.created:
            log.created = False
            self._unsynced.add(str(log.path.parent))
        if self._commit.unsynced_since is None:  # the first unsynced line: the group commit's clock starts
            self._commit.appended(current_time())
            self._commit_wanted.set()
        return True

    def _write_unsynced(self, path: Path, record: Any, now: float, *dirs: str) -> bool:
        """Write `path` whole on the loop's thread, unsynced: the group commit fsyncs it, its
        directory and `dirs` (record/layout.py)."""
        try:
            write_replacing(path, encode({"version": RECORD_VERSION, **record}))
        except OSError as error:
            return self._failed(path, error)
        self._unsynced.update((str(path), str(path.parent), *dirs))
        if self._commit.unsynced_since is None:
            self._commit_wanted.set()  # the first unsynced write: the group commit's clock starts
        self._commit.appended(now)
        return True

    def _take_log_lines(self) -> None:
        for line in self.lines.take():
            self._queue_line(line, None)

    # Group commit -------------------------------------------------------------------

    async def _group_commits(self) -> None:
        """fsync what was appended, as `GroupCommit` says when (record/layout.py)."""
        while True:
            wait = self._commit.due_in(anyio.current_time())
            if wait is None or wait > 0:
                with anyio.move_on_after(wait if wait is not None else float("inf")):
                    await self._commit_wanted.wait()
                self._commit_wanted = anyio.Event()
                continue
            await self._sync()

    async def _sync(self) -> None:
        """fsync what is written, after the commit under way (if any): once it returns, every
        failure of what was written before it is counted (`RecordGaps`, output.json after it)."""
        while self._syncing is not None:
            await self._syncing.wait()
        if self._usage_stale:  # turns ended since the last commit: usage.json counts them before it is fsynced
            self._usage_stale = False
            self._write_unsynced(self.run_dir / "usage.json", self.ledger.record(), current_time())
        self._commit.syncing()
        paths, self._unsynced = self._unsynced, set()
        # a run log replaced by a rename over it opens fine by its path, but isn't the file written to
        failed: list[tuple[Path, OSError]] = [(log.path, gone) for name, log in self._logs.items() if name in paths and (gone := log.gone()) is not None]
        paths.difference_update(str(path) for path, _ in failed)
        if paths:
            self._syncing = synced = anyio.Event()
            try:
                failed += await fsync_all(paths, self._fsync)
            finally:
                self._syncing = None
                synced.set()
        for path, error in failed:  # counted before anything else runs: no await since the fsyncs
            self._failed(path, error)
            log = self._logs.get(str(path))
            if log is not None:  # removed or replaced under the run: its next line starts the file afresh
                log.close()

    async def _settle(self) -> None:
        """Everything asked so far on disk and fsynced: the batch, the whole files, the appends."""
        self._take_log_lines()
        self._write_batch()
        while self._whole_writes:
            await self._whole_written.wait()
        await self._sync()

    async def on_stop(self) -> None:
        self._take_log_lines()
        self._write_batch()
        for log in self._logs.values():
            try:
                log.close()
            except OSError as error:
                self._failed(log.path, error)
        if self._unsynced or self._usage_stale:  # the run's end: what is written is fsynced (a run stopped before its output.json)
            await self._sync()

    # Whole files --------------------------------------------------------------------

    def _call_dir(self, call_id: str) -> Path:
        return self.run_dir / "calls" / call_id

    async def _write(self, path: Path, record: Any, *, exclusive: bool = False) -> bool:
        return await self._write_data(path, encode({"version": RECORD_VERSION, **record}), exclusive=exclusive)

    async def _write_data(self, path: Path, data: bytes, *, exclusive: bool = False) -> bool:
        (error,) = await write_wholes_synced([(path, data, exclusive)], self._fsync)
        return True if error is None else self._failed(path, error)

    async def _fsync(self, fds: Sequence[int]) -> list[OSError | None]:
        """fsync `fds` in one of the Recorder's own threads: only that, the rest of a file's syscalls
        stay on the loop's thread (records.fsync_each says why)."""
        return await in_real_time(lambda: fsync_each(fds), limiter=self._threads)

    def _write_beside(self, path: Path, record: Any, *, exclusive: bool = False) -> None:
        """Queue `path` to be written whole beside the Recorder's other work, answering the ask
        being handled when it is on disk.

        The Recorder goes on with other messages meanwhile: one agent's fsyncs don't hold
        up another's lines. The record is encoded here, so what can't be fails this ask
        (and the Recorder goes on), not the task.
        """
        data = encode({"version": RECORD_VERSION, **record})
        self._whole_queue.append((path, data, exclusive, self.defer()))
        self._whole_writes += 1
        if self._whole_writers < RECORDER_THREADS:
            self._whole_writers += 1
            self.start_soon(self._write_wholes)

    async def _write_wholes(self) -> None:
        """Write what is queued whole, all of it in one worker thread's turn, until nothing is."""
        try:
            while self._whole_queue:
                files, self._whole_queue = self._whole_queue, []
                try:
                    errors = await write_wholes_synced(
                        [(path, data, exclusive) for path, data, exclusive, _ in files], self._fsync
                    )
                    for (path, _, _, reply), error in zip(files, errors, strict=True):
                        reply.set(True if error is None else self._failed(path, error))
                finally:
                    self._whole_writes -= len(files)
                    if not self._whole_writes:
                        self._whole_written.set()
                        self._whole_written = anyio.Event()
        finally:
            self._whole_writers -= 1

    # Handlers -----------------------------------------------------------------------

    @handler
    async def run_started(self, msg: RunStarted) -> None:
        gitignore = self.run_dir.parent.parent / ".gitignore"
        if not gitignore.exists():
            try:
                write_private(gitignore, b"*\n")
            except OSError as error:
                self._failed(gitignore, error)
        self._run_json = msgspec.structs.asdict(msg)
        await self._write(self.run_dir / "run.json", self._run_json)
        self._done()

    @handler
    async def cli_used(self, msg: CliUsed) -> None:
        """run.json again, its `clis` naming one more executable: once for each the run uses, a few a run."""
        if self._run_json is None:
            return  # a run that recorded no start (a look-ahead's scratch record)
        self._run_json["clis"] = [*self._run_json.get("clis", []), msgspec.structs.asdict(msg)]
        await self._write(self.run_dir / "run.json", self._run_json)
        self._done()

    @handler
    def call_opened(self, msg: CallOpened) -> bool:
        """True once call.json is written (fsynced by the next group commit: a turn's end at the latest)."""
        progress("agentswf.turns", "turn started", agent=msg.agent, turn=msg.n, call=msg.call_id)
        written = self._write_unsynced(self._call_dir(msg.call_id) / "call.json", msgspec.structs.asdict(msg),
                                       anyio.current_time(), self._calls, str(self.run_dir))
        self._done()
        return written

    @handler
    def result_accepted(self, msg: ResultAccepted) -> None:
        """Answered True once the accepted answer is on disk."""
        self._write_beside(self._call_dir(msg.call_id) / "result.json", {"value": msg.value}, exclusive=True)
        self._done()

    def _account(self, turn: Turn[Any]) -> None:
        """The turn in the ledger (however its line was asked); the next group commit rewrites usage.json."""
        self.ledger.add(turn)
        self._usage_stale = True

    @handler
    def logs_waiting(self, msg: _LogsWaiting) -> None:
        self._take_log_lines()
        self._done()

    @handler
    def session_opened(self, msg: SessionOpened) -> None:
        """Its line goes ahead of the batch's other files: told before its agent opens, it is
        queued before any line of the agent's turns, so written before any (record/layout.py)."""
        if self._sessions not in self._batch:
            self._batch = {self._sessions: [], **self._batch}
        self._queue_data(self._sessions, encode(msg) + b"\n")
        self._done()

    @handler
    async def record_gaps(self, msg: RecordGaps) -> str | None:
        await self._settle()
        if not self.failures:
            return None
        writes = "1 write" if self.failures == 1 else f"{self.failures} writes"
        return f"the run's record is incomplete: {writes} to it failed, the first {self._first_failure}"

    @handler
    async def run_ended(self, msg: RunEnded) -> bool:
        """True once output.json is on disk, after everything before it is fsynced."""
        await self._settle()
        return await self._write(self.run_dir / "output.json", msgspec.structs.asdict(msg))
