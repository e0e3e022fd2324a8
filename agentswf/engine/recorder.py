"""The Recorder: the one actor that writes a run's directory.

Everything that happens in a run reaches disk through its mailbox, so the record has
one writer and a single order. Writes that fsync run in a worker thread so the event
loop never waits on the disk.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any

import anyio
import msgspec
import structlog

from ..actors import Actor, handler
from ..progress import progress
from .records import RECORD_VERSION, LineLog, encode, write_private, write_whole

_log = structlog.get_logger("agentswf.recorder")
RECORDER_THREADS = 4  # worker threads for whole-file writes (each fsyncs)


class RunStarted(msgspec.Struct, frozen=True):
    run_id: str
    workflow: str
    args: Any
    cwd: str
    started_at: float
    control: str  # the run's operator socket, while it lives
    replay_of: str | None = None


class CallOpened(msgspec.Struct, frozen=True):
    call_id: str
    agent: str
    n: int
    prompt: str
    schema: Any
    deadline_at: float | None


class CandidateSeen(msgspec.Struct, frozen=True):
    call_id: str
    at: float
    args: list[str]
    input: str | None
    accepted: bool
    error: str | None = None


class ResultAccepted(msgspec.Struct, frozen=True):
    call_id: str
    value: Any


class TurnEnded(msgspec.Struct, frozen=True):
    turn: Any  # engine.outcomes.Turn


class Logged(msgspec.Struct, frozen=True):
    at: float
    message: str
    fields: dict[str, Any]


class ToolCalled(msgspec.Struct, frozen=True, kw_only=True):
    """One tool call, its input redacted, and how it ended."""

    call_id: str
    turn_call_id: str
    agent: str
    tool: str
    input: Any
    outcome: str
    result: Any = None
    error: str = ""
    code: str = ""
    attempts: int = 0
    approval: Any = None
    started_at: float
    ended_at: float


class ApprovalDecided(msgspec.Struct, frozen=True):
    call_id: str
    tool: str
    agent: str
    decision: Any
    at: float


class MessageSent(msgspec.Struct, frozen=True):
    mail: Any  # switchboard.Mail
    route: str
    read: str  # when the sender was told the peer reads it


class MessageRead(msgspec.Struct, frozen=True):
    message_id: str
    by: str
    at: float


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


class ConnectionRefused(msgspec.Struct, frozen=True):
    """A process refused on one of the run's sockets for who it is, and what it ran."""

    at: float
    socket: str  # "agent <key>" or "operator"
    pid: int | None
    command: list[str]
    reason: str


class RunEnded(msgspec.Struct, frozen=True):
    outcome: str
    reason: str | None
    value: Any
    started_at: float
    ended_at: float
    where: str | None = None  # a failed run's line: `file:line, in name`
    traceback: str | None = None  # a failed run's whole traceback


class Recorder(Actor):
    """Writes the record; a disk that fails it (full, gone read-only) is logged, never a crash of the run.

    What couldn't be written is counted in `failures` and the run ends failed for it
    (`RecordGaps`). What an acknowledgement depends on is asked, not told, and answers
    True once on disk: an accepted answer, a tool call, a message sent or read. So
    nothing is acknowledged that isn't on disk (see records.py for the policy).
    """

    def __init__(self, run_dir: Path, logs: LogLines | None = None) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.lines = logs or LogLines()
        self._logs: dict[Path, LineLog] = {}
        self.failures = 0
        self._first_failure = ""
        # Its own threads: the Recorder never waits on a pool a handler or a test can fill.
        self._threads = anyio.CapacityLimiter(RECORDER_THREADS)

    async def on_start(self) -> None:
        self.start_soon(self._watch_log_lines)

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

    def _append(self, path: Path, record: Any) -> bool:
        try:
            log = self._logs.get(path)
            if log is None:
                log = self._logs[path] = LineLog(path)
            log.append(record)
            return True
        except OSError as error:
            return self._failed(path, error)

    def _close(self, path: Path) -> None:
        log = self._logs.pop(path, None)
        if log is not None:
            try:
                log.close()
            except OSError as error:
                self._failed(path, error)

    async def on_stop(self) -> None:
        self._write_log_lines()
        for path in list(self._logs):
            self._close(path)

    def _call_dir(self, call_id: str) -> Path:
        return self.run_dir / "calls" / call_id

    async def _write(self, path: Path, record: Any, *, exclusive: bool = False) -> bool:
        data = encode({"version": RECORD_VERSION, **record})
        try:
            await anyio.to_thread.run_sync(
                lambda: write_whole(path, data, exclusive=exclusive), limiter=self._threads
            )
            return True
        except OSError as error:
            return self._failed(path, error)

    def _write_log_lines(self) -> None:
        for line in self.lines.take():
            self._append(self.run_dir / "log.jsonl", line)

    @handler
    async def run_started(self, msg: RunStarted) -> None:
        gitignore = self.run_dir.parent.parent / ".gitignore"
        if not gitignore.exists():
            try:
                write_private(gitignore, b"*\n")
            except OSError as error:
                self._failed(gitignore, error)
        await self._write(self.run_dir / "run.json", msgspec.structs.asdict(msg))

    @handler
    async def call_opened(self, msg: CallOpened) -> None:
        progress("agentswf.turns", "turn started", agent=msg.agent, turn=msg.n, call=msg.call_id)
        await self._write(self._call_dir(msg.call_id) / "call.json", msgspec.structs.asdict(msg))

    @handler
    def candidate_seen(self, msg: CandidateSeen) -> None:
        self._append(self._call_dir(msg.call_id) / "candidates.jsonl", msg)

    @handler
    async def result_accepted(self, msg: ResultAccepted) -> bool:
        """True once the accepted answer is on disk."""
        return await self._write(self._call_dir(msg.call_id) / "result.json", {"value": msg.value}, exclusive=True)

    @handler
    def turn_ended(self, msg: TurnEnded) -> None:
        turn = msg.turn
        progress("agentswf.turns", "turn ended", agent=turn.agent, turn=turn.n, call=turn.call_id, outcome=turn.outcome.kind)
        self._append(self.run_dir / "turns.jsonl", turn)
        self._close(self._call_dir(turn.call_id) / "candidates.jsonl")  # its turn is over: no fd stays open

    @handler
    def logged(self, msg: Logged) -> None:
        self._write_log_lines()  # wf.log's earlier lines first
        self._append(self.run_dir / "log.jsonl", msg)

    @handler
    def logs_waiting(self, msg: _LogsWaiting) -> None:
        self._write_log_lines()

    @handler
    def tool_called(self, msg: ToolCalled) -> bool:
        """True once the call's line is written."""
        return self._append(self.run_dir / "tools.jsonl", msg)

    @handler
    def approval_decided(self, msg: ApprovalDecided) -> bool:
        return self._append(self.run_dir / "approvals.jsonl", msg)

    @handler
    def message_sent(self, msg: MessageSent) -> bool:
        """True once the message's "sent" line is written."""
        return self._append(self.run_dir / "messages.jsonl", {"event": "sent", **msgspec.structs.asdict(msg)})

    @handler
    def message_read(self, msg: MessageRead) -> bool:
        return self._append(self.run_dir / "messages.jsonl", {"event": "read", **msgspec.structs.asdict(msg)})

    @handler
    def connection_refused(self, msg: ConnectionRefused) -> None:
        self._append(self.run_dir / "refusals.jsonl", msg)

    @handler
    def record_gaps(self, msg: RecordGaps) -> str | None:
        self._write_log_lines()
        if not self.failures:
            return None
        writes = "1 write" if self.failures == 1 else f"{self.failures} writes"
        return f"the run's record is incomplete: {writes} to it failed, the first {self._first_failure}"

    @handler
    async def run_ended(self, msg: RunEnded) -> bool:
        """True once output.json is on disk."""
        self._write_log_lines()
        return await self._write(self.run_dir / "output.json", msgspec.structs.asdict(msg))
