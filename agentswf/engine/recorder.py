"""The Recorder: the one actor that writes a run's directory.

Everything that happens in a run reaches disk through its mailbox, so the record has
one writer and a single order. Writes that fsync run in a worker thread so the event
loop never waits on the disk.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import msgspec
import structlog

from ..actors import Actor, handler
from ..progress import progress
from .records import RECORD_VERSION, LineLog, encode, write_whole

_log = structlog.get_logger("agentswf.recorder")


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

    What couldn't be written is counted in `failures`; an accepted answer that couldn't be
    recorded is not accepted (its ask answers False), so nothing is taken that isn't on disk.
    """

    def __init__(self, run_dir: Path) -> None:
        super().__init__()
        self.run_dir = run_dir
        self._logs: dict[Path, LineLog] = {}
        self.failures = 0

    def _failed(self, path: Path, error: OSError) -> bool:
        self.failures += 1
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

    async def on_stop(self) -> None:
        for log in self._logs.values():
            try:
                log.close()
            except OSError as error:
                self._failed(log.path, error)

    def _call_dir(self, call_id: str) -> Path:
        return self.run_dir / "calls" / call_id

    async def _write(self, path: Path, record: Any, *, exclusive: bool = False) -> bool:
        data = encode({"version": RECORD_VERSION, **record})
        try:
            await anyio.to_thread.run_sync(lambda: write_whole(path, data, exclusive=exclusive))
            return True
        except OSError as error:
            return self._failed(path, error)

    @handler
    async def run_started(self, msg: RunStarted) -> None:
        gitignore = self.run_dir.parent.parent / ".gitignore"
        if not gitignore.exists():
            gitignore.parent.mkdir(parents=True, exist_ok=True)
            gitignore.write_text("*\n")
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

    @handler
    def logged(self, msg: Logged) -> None:
        self._append(self.run_dir / "log.jsonl", msg)

    @handler
    def tool_called(self, msg: ToolCalled) -> None:
        self._append(self.run_dir / "tools.jsonl", msg)

    @handler
    def approval_decided(self, msg: ApprovalDecided) -> None:
        self._append(self.run_dir / "approvals.jsonl", msg)

    @handler
    def message_sent(self, msg: MessageSent) -> None:
        self._append(self.run_dir / "messages.jsonl", {"event": "sent", **msgspec.structs.asdict(msg)})

    @handler
    def message_read(self, msg: MessageRead) -> None:
        self._append(self.run_dir / "messages.jsonl", {"event": "read", **msgspec.structs.asdict(msg)})

    @handler
    def connection_refused(self, msg: ConnectionRefused) -> None:
        self._append(self.run_dir / "refusals.jsonl", msg)

    @handler
    async def run_ended(self, msg: RunEnded) -> None:
        await self._write(self.run_dir / "output.json", msgspec.structs.asdict(msg))
