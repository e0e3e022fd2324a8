"""The record's lines: what the Recorder appends to a run's logs and writes whole, and what they
hold (an approval's request and decision). Pure data, so that the turn, the rules and a reader of
a record take them without the Recorder, its actor kernel or its event loop."""

from __future__ import annotations

from typing import Any

import msgspec

from ..mail.words import Mail
from ..outcomes import Turn


class ApprovalRequest(msgspec.Struct, frozen=True):
    """A tool call waiting for a decision. `input` is redacted."""

    call_id: str
    tool: str
    agent: str
    input: Any
    reason: str = ""
    asked_at: float = 0.0


class ApprovalDecision(msgspec.Struct, frozen=True):
    approved: bool
    reason: str = ""
    by: str = ""


class RunStarted(msgspec.Struct, frozen=True):
    run_id: str
    workflow: str
    args: Any
    cwd: str
    started_at: float
    control: str  # the run's operator socket, while it lives
    replay_of: str | None = None
    forked_from: dict[str, Any] | None = None  # a fork's: the run, agent and turn it forked at


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


ATTEMPTS_FILE = "attempts.jsonl"  # in a call's directory: a line per attempt that output something


class AttemptOutput(msgspec.Struct, frozen=True, omit_defaults=True):
    """calls/<call_id>/attempts.jsonl's line: an attempt of the turn ended (or was stopped), and what its
    harness said it output (an ACP agent's transcript: each permission it asked and its answer; a shell
    agent's stdout), and the last of its standard error (harnesses/said.py: `SAID_TAIL_BYTES`)."""

    call_id: str
    at: float
    ending: str  # its ending's kind, or "stopped": its turn ended while it ran
    output: str
    stderr: str = ""


class TurnEnded(msgspec.Struct, frozen=True):
    turn: Turn[Any]


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
    approval: ApprovalDecision | None = None
    started_at: float
    ended_at: float
    raised: tuple[str, ...] = ()  # a raising handler's exception type and innermost frames (rules.raised_at)


class ApprovalDecided(msgspec.Struct, frozen=True):
    call_id: str
    tool: str
    agent: str
    decision: ApprovalDecision
    at: float


class MessageSent(msgspec.Struct, frozen=True):
    mail: Mail
    route: str
    read: str  # when the sender was told the peer reads it


class MessageRead(msgspec.Struct, frozen=True):
    message_id: str
    by: str
    at: float


class SessionOpened(msgspec.Struct, frozen=True, omit_defaults=True):
    """sessions.jsonl's line of an agent an attempt opens (engine/record/attempts.py), told as it opens."""

    attempt: int
    agent: str
    harness: str
    at: float
    resumed: str | None = None  # the native session it resumes (a continued attempt)
    fresh: str | None = None  # or why it starts afresh
    version: str | None = None  # its CLI's version, as `--version` said it at the agent's open


class CliUsed(msgspec.Struct, frozen=True, omit_defaults=True):
    """An agent CLI's executable, told at the run's first use of it: run.json's `clis` lists it."""

    cli: str
    path: str
    agent: str  # the agent that opened on it first
    version: str | None = None  # None: `--version` said none (harnesses/cli_version.py)


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


Line = (
    ToolCalled | MessageSent | MessageRead | ApprovalDecided | CandidateSeen | AttemptOutput | TurnEnded | Logged
    | ConnectionRefused
)
"""The messages whose record is one appended line (`Recorder._line`), handled write-through (`Recorder.line`)."""
