"""A run's record read as it grows: what `awf tail`, `awf ls` and the live view of `awf run` see.

The record is the run's one account of what happened (see `engine.record.layout`), written as it
happens: a turn's call.json when it starts, its line in turns.jsonl when it ends, each tool
call, message and wf.log line as it is recorded. Reading it, rather than asking the run's
actors, keeps every watcher off the run's event loop: a watcher costs the run nothing but
the file reads it does in its own thread or process.

`Follower.poll` returns what was added since the last poll (turns started and ended, tool
calls, approvals, messages sent and read, `wf.log` lines, the run's ending), each line once, a torn last
line (still being written) left for the next poll. `Tally` folds those events into the
standing of each agent, a pure function of the events seen.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from ..engine.record.layout import read_json, regular_bytes

EventKind = Literal["turn-started", "turn-ended", "tool", "approval", "message", "read", "log", "run-ended"]
MAX_EVENT_TEXT_CHARS = 200  # of a prompt, a message or a tool's input, in one event line
MAX_EVENT_LINE_CHARS = 1000  # of an event's whole text: a line of the record can hold any number of fields, any name
MAX_POLL_BYTES = 64 << 20  # of one log read at a poll; with more unread, a watcher skips to its last this many
_LOGS = ("turns", "tools", "approvals", "messages", "log")


# What the watchers read of each line, typed: a field of another type (a cost that is a word, an
# outcome that is a string, a time that isn't one), which an agent that writes the record can put
# there, passes the line over, as a line that isn't JSON is; it never raises in a watcher. Every
# field may be missing, as the watchers read them.
class _Usage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None


class _Outcome(msgspec.Struct):
    kind: str = "?"


class _Turn(msgspec.Struct):
    agent: str = ""
    call_id: str = ""
    n: int | None = None
    ended_at: float | None = None
    outcome: _Outcome | None = None
    usage: _Usage | None = None


class _Tool(msgspec.Struct):
    agent: str = ""
    tool: str = ""
    outcome: str = ""
    started_at: float | None = None
    ended_at: float | None = None


class _Decision(msgspec.Struct):
    approved: bool = False
    by: str | None = None


class _Approval(msgspec.Struct):
    agent: str = ""
    tool: str = ""
    call_id: str = ""
    at: float | None = None
    decision: _Decision | None = None


class _Mail(msgspec.Struct):
    sender: str = ""
    to: str = ""
    kind: str = "message"
    at: float | None = None


class _Message(msgspec.Struct):
    event: str = ""
    mail: _Mail | None = None
    at: float | None = None
    by: str = ""
    message_id: str = ""


class _Logged(msgspec.Struct):
    message: str = ""
    at: float | None = None
    fields: dict[str, Any] | None = None


class _Call(msgspec.Struct):
    agent: str = ""
    n: int | None = None
    deadline_at: float | None = None


class _Output(msgspec.Struct):
    outcome: str = "?"
    ended_at: float | None = None


_SHAPES: dict[str, type[msgspec.Struct]] = {
    "turns": _Turn, "tools": _Tool, "approvals": _Approval, "messages": _Message, "log": _Logged, "calls": _Call,
    "output": _Output,
}  # fmt: skip


def of_shape(log: str, line: Any) -> bool:
    """Whether `line` of the record's `log` (or a call.json, "calls", or output.json, "output") has
    each field a watcher reads of the type it reads."""
    try:
        msgspec.convert(line, _SHAPES[log])
    except msgspec.ValidationError:
        return False
    return True


class Event(msgspec.Struct, frozen=True):
    """One thing the record says happened: `agent` is whose it is ("" for the run's own)."""

    at: float
    kind: EventKind
    agent: str
    text: str
    fields: dict[str, Any] = msgspec.field(default_factory=dict)


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
    text = " ".join(text.split())
    return text if len(text) <= MAX_EVENT_TEXT_CHARS else text[: MAX_EVENT_TEXT_CHARS - 1] + "…"


def _usage_text(usage: dict[str, Any] | None) -> str:
    if not usage:
        return ""
    tokens = sum(usage.get(name) or 0 for name in ("input_tokens", "output_tokens"))
    cost = usage.get("cost_usd")
    return f" ({tokens} tokens" + (f", ${cost:.4f})" if cost is not None else ")")


def _bounded(event: Event) -> Event:
    """`event` with its text cut at MAX_EVENT_LINE_CHARS and its agent's key at MAX_EVENT_TEXT_CHARS."""
    if len(event.text) <= MAX_EVENT_LINE_CHARS and len(event.agent) <= MAX_EVENT_TEXT_CHARS:
        return event
    text = event.text if len(event.text) <= MAX_EVENT_LINE_CHARS else event.text[: MAX_EVENT_LINE_CHARS - 1] + "…"
    return msgspec.structs.replace(event, text=text, agent=_short(event.agent))


def events_of(log: str, line: dict[str, Any]) -> Iterable[Event]:
    """The events one line of one of the run's logs says happened: none for a line not `of_shape`."""
    if of_shape(log, line):
        yield from (_bounded(event) for event in _events_of(log, line))


def _events_of(log: str, line: dict[str, Any]) -> Iterable[Event]:
    if log == "turns":
        outcome = line.get("outcome") or {}
        kind = outcome.get("kind", "?")
        why = "" if kind == "answered" else f": {_short(outcome.get('reason', ''))}"
        text = f"turn {line.get('n')} ended {kind}{why}{_usage_text(line.get('usage'))}"
        yield Event(line.get("ended_at") or 0.0, "turn-ended", line.get("agent", ""), text, line)
    elif log == "tools":
        text = f"tool {line.get('tool')} {_short(line.get('input'))} -> {line.get('outcome')}"
        yield Event(line.get("started_at") or 0.0, "tool", line.get("agent", ""), text, line)
    elif log == "approvals":
        decision = line.get("decision") or {}
        verb = "approved" if decision.get("approved") else "rejected"
        why = f": {_short(decision['reason'])}" if decision.get("reason") else ""
        text = f"tool {line.get('tool')} call {line.get('call_id')} {verb} by {decision.get('by')}{why}"
        yield Event(line.get("at") or 0.0, "approval", line.get("agent", ""), text, line)
    elif log == "messages" and line.get("event") == "sent":
        mail = line.get("mail") or {}
        text = f"{mail.get('kind', 'message')} to {mail.get('to')}: {_short(mail.get('text', ''))}"
        yield Event(mail.get("at") or 0.0, "message", mail.get("sender", ""), text, mail)
    elif log == "messages" and line.get("event") == "read":
        yield Event(line.get("at") or 0.0, "read", line.get("by", ""), f"read message {line.get('message_id')}", line)
    elif log == "log":
        fields = line.get("fields") or {}
        extra = " ".join(f"{key}={_short(value)}" for key, value in fields.items())
        text = f"{_short(line.get('message', ''))} {extra}".rstrip()  # a message can be an agent's answer
        yield Event(line.get("at") or 0.0, "log", str(fields.get("agent", "")), text, line)


def turn_started(call: dict[str, Any], at: float) -> Event:
    """A turn's start, from its call.json, written at `at`."""
    return _bounded(Event(at, "turn-started", call.get("agent", ""), f"turn {call.get('n')} started: {_short(call.get('prompt', ''))}", call))


def run_ended(output: dict[str, Any]) -> Event:
    """The run's ending, from its output.json."""
    reason = f": {_short(output['reason'])}" if output.get("reason") else ""
    return Event(output.get("ended_at") or time.time(), "run-ended", "", f"run {output.get('outcome')}{reason}", output)


@dataclass
class Follower:
    """Reads what a run's record gained since the last `poll`; see the module docstring."""

    run_dir: Path
    _offsets: dict[str, int] = field(default_factory=dict)
    _calls: set[str] = field(default_factory=set)
    ended: bool = False

    def skip_recorded(self) -> None:
        """Take what is recorded now as read, from the sizes of the logs and the calls there,
        reading none of it: the watcher of a continued run shows its own attempt, not again
        the turns of the attempts before it."""
        for log in _LOGS:
            try:
                self._offsets[log] = (self.run_dir / f"{log}.jsonl").stat().st_size
            except OSError:
                continue
        try:
            self._calls.update(entry.name for entry in os.scandir(self.run_dir / "calls"))
        except OSError:
            return

    def poll(self) -> list[Event]:
        events: list[Event] = []
        events.extend(self._new_calls())
        for log in _LOGS:
            for line in self._new_lines(log):
                events.extend(events_of(log, line))
        if not self.ended and (self.run_dir / "output.json").exists():
            self.ended = True
            try:
                output = read_json(self.run_dir / "output.json")
            except (OSError, msgspec.DecodeError):
                output = {}
            events.append(run_ended(output if of_shape("output", output) else {}))
        events.sort(key=lambda event: event.at)
        return events

    def _new_calls(self) -> Iterable[Event]:
        try:
            entries = list(os.scandir(self.run_dir / "calls"))
        except OSError:
            return
        for entry in entries:
            if entry.name in self._calls:
                continue
            try:
                call = read_json(Path(entry.path) / "call.json")
                at = (Path(entry.path) / "call.json").stat().st_mtime
            except (OSError, msgspec.DecodeError):
                continue  # not written yet: the next poll
            self._calls.add(entry.name)
            if of_shape("calls", call):
                yield turn_started(call, at)

    def _new_lines(self, log: str) -> Iterable[dict[str, Any]]:
        """The lines `log` gained, at most MAX_POLL_BYTES of them: with more unread (an agent can grow
        a file of the record to gigabytes with `truncate`), the last ones, those before passed over."""
        path = self.run_dir / f"{log}.jsonl"
        offset = self._offsets.get(log, 0)
        try:
            offset = max(offset, path.stat().st_size - MAX_POLL_BYTES)
            data = regular_bytes(path, offset, MAX_POLL_BYTES)  # an agent can put a FIFO there: never blocked on
        except OSError:  # gone, or grown past the bound since: the next poll
            return
        if data is None:
            return
        end = data.rfind(b"\n") + 1  # a torn last line waits for the next poll
        if end == 0 and len(data) == MAX_POLL_BYTES:
            end = len(data)  # no line is that long: passed over, not read again
        self._offsets[log] = offset + end
        for raw in data[:end].splitlines():
            try:
                line = msgspec.json.decode(raw)
            except msgspec.DecodeError:
                continue
            if isinstance(line, dict):
                yield line


AgentState = Literal["idle", "in turn"]


@dataclass
class AgentTally:
    """One agent as the record has it so far."""

    key: str
    state: AgentState = "idle"
    turn: int = 0
    turns: int = 0
    started_at: float | None = None
    deadline_at: float | None = None
    doing: str = ""  # the last tool call or message of its turn
    tokens: int = 0
    cost_usd: float | None = None

    @property
    def group(self) -> str:
        """The key group: the part of its key before `:` (`review:style` is in `review`)."""
        return self.key.split(":", 1)[0]


@dataclass
class Tally:
    """The run's agents and totals, folded from its events in order."""

    agents: dict[str, AgentTally] = field(default_factory=dict)
    logs: list[str] = field(default_factory=list)
    ended: str | None = None

    def add(self, event: Event, keep_logs: int = 0) -> None:
        if event.kind == "run-ended":
            self.ended = event.text
            return
        if event.kind == "log":
            self.logs = [*self.logs, event.text][-keep_logs:] if keep_logs else []
            return
        if not event.agent or event.kind == "read":
            return
        agent = self.agents.get(event.agent) or self.agents.setdefault(event.agent, AgentTally(event.agent))
        if event.kind == "turn-started":
            agent.state, agent.turn, agent.doing = "in turn", int(event.fields.get("n") or 0), ""
            deadline_ms = event.fields.get("deadline_at")  # call.json's deadline is Unix milliseconds
            agent.started_at, agent.deadline_at = event.at, None if deadline_ms is None else deadline_ms / 1000
        elif event.kind == "turn-ended":
            agent.state, agent.turns = "idle", agent.turns + 1
            agent.doing = event.text
            usage = event.fields.get("usage") or {}
            agent.tokens += sum(usage.get(name) or 0 for name in ("input_tokens", "output_tokens"))
            if usage.get("cost_usd") is not None:
                agent.cost_usd = (agent.cost_usd or 0.0) + usage["cost_usd"]
        else:
            agent.doing = event.text

    @property
    def tokens(self) -> int:
        return sum(agent.tokens for agent in self.agents.values())

    @property
    def cost_usd(self) -> float | None:
        costs = [agent.cost_usd for agent in self.agents.values() if agent.cost_usd is not None]
        return sum(costs) if costs else None

    @property
    def in_turn(self) -> int:
        return sum(agent.state == "in turn" for agent in self.agents.values())


def run_cost(run_dir: Path) -> float | None:
    """The run's cost so far, as its turns recorded it; None when no turn said."""
    tally = Tally()
    for event in Follower(run_dir).poll():
        tally.add(event)
    return tally.cost_usd
