"""A run's record read back for a replay: each agent's turns and operations, with what each turn
did (its tool calls, the messages it sent, the answers it handed in), in the order it did them.

A record is written by agents as much as by the run (a prompt, a tool's input, an answer, a
message are an agent's words), and an exported one comes from another machine: it is read as
hostile input. Every file is read as a regular file of at most `MAX_RECORD_FILE_BYTES`, never
through a symbolic link; a call id must be one the run could have given (16 hex digits) before
it names a directory; an agent key must be one `wf.agents.open` takes; a line of the wrong
shape is refused, saying which file and line, rather than played.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ..engine.record.layout import RECORD_VERSION
from ..engine.tools.policy import REDACTED
from ..errors import DefinitionError
from ..harnesses.pane_kept_check import is_key
from ..wire.nesting import too_deep

EXPORT_FILE = "export.json"  # in an exported record: its format version, and what it was exported from
EXPORT_FORMAT = 1
"""The format of an exported record (`awf export`): a replay refuses a newer one, saying so."""

MAX_RECORD_FILE_BYTES = 64 << 20  # one file of a record read for a replay
MAX_RECORDED_LINES = 200_000  # lines of one .jsonl file of a record read for a replay
_CALL_ID = re.compile(r"[0-9a-f]{16}")
PLAYED_KINDS = ("turn", "compaction", "fork")  # what an agent's harness plays; "set" and "stop" are the engine's


class RecordUnreadable(DefinitionError):
    """The record can't be replayed: not a run's record, another workflow's, a newer format, or a file of the wrong shape."""


def _read_bytes(path: Path) -> bytes | None:
    """`path`'s bytes, None when it doesn't exist; refused when it is a link, not a regular file, or too big."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise RecordUnreadable(f"{path} is a symbolic link: a record's files are its own") from None
        raise RecordUnreadable(f"{path} can't be read: {error.strerror or error}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RecordUnreadable(f"{path} is not a regular file")
        if info.st_size > MAX_RECORD_FILE_BYTES:
            raise RecordUnreadable(f"{path} is over {MAX_RECORD_FILE_BYTES} bytes: no record of a run is")
        with os.fdopen(fd, "rb", closefd=False) as file:
            return file.read(MAX_RECORD_FILE_BYTES + 1)
    finally:
        os.close(fd)


def read_object(path: Path) -> dict[str, Any] | None:
    data = _read_bytes(path)
    if data is None:
        return None
    if (deep := too_deep(data)) is not None:
        raise RecordUnreadable(f"{path}: {deep}")
    try:
        value = msgspec.json.decode(data)
    except msgspec.DecodeError as error:
        raise RecordUnreadable(f"{path} is not JSON: {error}") from None
    if not isinstance(value, dict):
        raise RecordUnreadable(f"{path} is not a JSON object")
    return value


def read_objects(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a .jsonl file, a torn last line skipped (a killed run's)."""
    data = _read_bytes(path) or b""
    lines = data.splitlines()
    if len(lines) > MAX_RECORDED_LINES:
        raise RecordUnreadable(f"{path} has over {MAX_RECORDED_LINES} lines")
    for number, raw in enumerate(lines, 1):
        if (deep := too_deep(raw)) is not None:  # a replay walks what it reads: no line deeper than the wire takes
            raise RecordUnreadable(f"{path}:{number}: {deep}")
        try:
            value = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            if number == len(lines):
                return  # torn as the run was killed
            raise RecordUnreadable(f"{path}:{number} is not JSON") from None
        if isinstance(value, dict):
            yield value


def is_call_id(value: object) -> bool:
    return isinstance(value, str) and _CALL_ID.fullmatch(value) is not None


def has_redacted(value: Any) -> bool:
    """Whether the record redacted any of `value` (a sensitive field, or a whole input)."""
    if isinstance(value, dict):
        return any(has_redacted(item) for item in value.values())
    if isinstance(value, list):
        return any(has_redacted(item) for item in value)
    return value == REDACTED


class ToolAction(msgspec.Struct, frozen=True):
    at: float
    tool: str
    input: Any
    outcome: str
    result: Any = None
    error: str = ""
    code: str = ""


class SendAction(msgspec.Struct, frozen=True):
    at: float
    to: str
    text: str
    kind: str  # message, question, reply


class AnswerAction(msgspec.Struct, frozen=True):
    at: float
    args: list[str]
    input: str | None
    accepted: bool
    error: str | None = None


Action = ToolAction | SendAction | AnswerAction


@dataclass
class RecordedTurn:
    """One line of turns.jsonl (a turn, or an operation), with its call.json and what it did, in order."""

    line: dict[str, Any]
    prompt: str | None = None
    schema: Any = None
    actions: list[Action] = field(default_factory=list)

    @property
    def agent(self) -> str:
        return str(self.line["agent"])

    @property
    def kind(self) -> str:
        return str(self.line.get("kind", "turn"))

    @property
    def n(self) -> int:
        return int(self.line["n"])

    @property
    def call_id(self) -> str:
        return str(self.line["call_id"])

    @property
    def outcome(self) -> dict[str, Any]:
        outcome: dict[str, Any] = self.line["outcome"]
        return outcome

    @property
    def by_workflow(self) -> bool:
        return self.line.get("started_by", "workflow") == "workflow"

    def named(self) -> str:
        what = "turn" if self.kind == "turn" else self.kind
        return f"{what} {self.n}" if self.by_workflow else f"{what} {self.n} (started by a message)"


@dataclass
class Recorded:
    """A run's record, as a replay plays it."""

    run_dir: Path
    workflow: str
    args: Any
    cwd: str  # as run.json has it ("." in an exported record)
    turns: list[RecordedTurn]  # in the order they ended, as turns.jsonl has them
    harnesses: dict[str, str]  # agent -> the harness it opened on
    participants: dict[str, list[str]]  # a person's key -> what it sent, in order
    approvals: list[dict[str, Any]]  # tool calls' decisions: agent, tool, input, decision
    output: dict[str, Any] | None

    @property
    def agents(self) -> set[str]:
        return set(self.harnesses) | {turn.agent for turn in self.turns}


def _turn_line(path: Path, number: int, line: dict[str, Any]) -> dict[str, Any]:
    agent, call_id, n, outcome = line.get("agent"), line.get("call_id"), line.get("n"), line.get("outcome")
    fine = (
        isinstance(agent, str) and is_call_id(call_id) and type(n) is int and n >= 0
        and isinstance(outcome, dict) and isinstance(outcome.get("kind"), str)
        and isinstance(line.get("kind", "turn"), str) and type(line.get("started_at", 0.0)) in (int, float)
        and type(line.get("ended_at", 0.0)) in (int, float)
    )  # fmt: skip
    if not fine:
        raise RecordUnreadable(f"{path}:{number} is not a turn's line as agentswf writes them")
    if not is_key(str(agent)):
        raise RecordUnreadable(f"{path}:{number}: {agent!r} is not an agent's key")
    return line


def _at(value: object) -> float:
    return float(value) if type(value) in (int, float) else 0.0  # type: ignore[arg-type]


def read_recorded(run_dir: Path) -> Recorded:
    """The record in `run_dir`, checked as a replay needs it; raises RecordUnreadable saying why not."""
    info = read_object(run_dir / "run.json")
    if info is None or not isinstance(info.get("workflow"), str):
        raise RecordUnreadable(f"{run_dir} is not a run's record: it has no run.json")
    version = info.get("version", RECORD_VERSION)
    if type(version) is not int or version > RECORD_VERSION:
        raise RecordUnreadable(
            f"{run_dir} is a record of version {version!r}, newer than this agentswf reads ({RECORD_VERSION}): upgrade agentswf"
        )
    exported = read_object(run_dir / EXPORT_FILE)
    if exported is not None:
        format_ = exported.get("format")
        if type(format_) is not int or format_ > EXPORT_FORMAT:
            raise RecordUnreadable(
                f"{run_dir} is an exported record of format {format_!r}, newer than this agentswf reads "
                f"({EXPORT_FORMAT}): upgrade agentswf"
            )
    turns_path = run_dir / "turns.jsonl"
    turns = [RecordedTurn(_turn_line(turns_path, number, line)) for number, line in enumerate(read_objects(turns_path), 1)]
    by_call = {turn.call_id: turn for turn in turns}
    for turn in turns:
        if turn.kind != "turn":
            continue
        if any(os.path.islink(path) for path in (run_dir / "calls", run_dir / "calls" / turn.call_id)):
            raise RecordUnreadable(f"{run_dir / 'calls' / turn.call_id} is reached through a symbolic link: a record's files are its own")
        call = read_object(run_dir / "calls" / turn.call_id / "call.json") or {}
        prompt = call.get("prompt")
        turn.prompt = prompt if isinstance(prompt, str) else None
        turn.schema = call.get("schema")
        for candidate in read_objects(run_dir / "calls" / turn.call_id / "candidates.jsonl"):
            try:
                turn.actions.append(msgspec.convert({"args": [], **candidate}, AnswerAction))
            except msgspec.ValidationError as error:
                raise RecordUnreadable(f"an answer of {turn.agent}'s turn {turn.n} doesn't read: {error}") from None
    for line in read_objects(run_dir / "tools.jsonl"):
        owner = by_call.get(line.get("turn_call_id"))  # type: ignore[arg-type]
        if owner is None or not isinstance(line.get("tool"), str) or not isinstance(line.get("outcome"), str):
            continue  # a call of a turn the record doesn't have ended (a killed run's): nothing to play
        owner.actions.append(
            ToolAction(_at(line.get("started_at")), line["tool"], line.get("input"), line["outcome"],
                       line.get("result"), str(line.get("error") or ""), str(line.get("code") or ""))
        )  # fmt: skip
    harnesses = {
        line["agent"]: line["harness"]
        for line in read_objects(run_dir / "sessions.jsonl")
        if isinstance(line.get("agent"), str) and isinstance(line.get("harness"), str)
    }
    agents = set(harnesses) | {turn.agent for turn in turns}
    participants: dict[str, list[str]] = {}
    for line in read_objects(run_dir / "messages.jsonl"):
        mail = line.get("mail")
        if line.get("event") != "sent" or not isinstance(mail, dict):
            continue
        sender, to, text, kind = mail.get("sender"), mail.get("to"), mail.get("text"), mail.get("kind")
        if not all(isinstance(value, str) for value in (sender, to, text, kind)):
            raise RecordUnreadable(f"{run_dir / 'messages.jsonl'}: a message's line doesn't read")
        at = _at(mail.get("at"))
        if sender in agents:
            owner = _turn_at(turns, str(sender), at)
            if owner is not None:
                owner.actions.append(SendAction(at, str(to), str(text), str(kind)))
        elif kind in ("message", "question", "reply"):  # a person's (the workflow's own are its code's)
            participants.setdefault(str(sender), []).append(str(text))
    for turn in turns:
        turn.actions.sort(key=lambda action: action.at)
    approvals = [
        {"agent": line["agent"], "tool": line["tool"], "input": line.get("input"), "decision": line["approval"]}
        for line in read_objects(run_dir / "tools.jsonl")
        if isinstance(line.get("approval"), dict) and isinstance(line.get("agent"), str) and isinstance(line.get("tool"), str)
    ]
    return Recorded(
        run_dir, info["workflow"], info.get("args"), str(info.get("cwd") or ""), turns, harnesses, participants, approvals,
        read_object(run_dir / "output.json"),
    )  # fmt: skip


def _turn_at(turns: list[RecordedTurn], agent: str, at: float) -> RecordedTurn | None:
    """`agent`'s turn that was running at `at` (a message it sent then was sent in it)."""
    for turn in turns:
        if turn.agent == agent and turn.kind == "turn" and _at(turn.line.get("started_at")) <= at <= _at(turn.line.get("ended_at")):
            return turn
    return None
