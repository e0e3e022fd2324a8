"""Scripted agents: test doubles that answer through the real socket, as an agent would.

A script stands in for an agent's CLI, not for the engine: every answer it gives goes
through the `wfa` client's own wire code (its encoder and decoder, the same bytes both
ways), over the agent's real socket, to the real AgentActor. So a passing test says the
channel works, not that a double works. The round trip runs in the event loop, not in a
thread, so no number of scripted agents can starve the engine of worker threads.

A script is given per agent key: one entry plays every attempt (nudges included), a
list plays one attempt each, in order. Strict by design: an agent without a script, a
list that runs out, or a list with entries left over fails the test, naming the agent.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from ..errors import TestScriptError
from ..harnesses.base import Attempt, AttemptEnding, AttemptResult, Harness, Operation, OperationResult
from ..harnesses.runtime import Runtime

# the agent's side of `wfa`, which a replay's played agents speak too, at home in agentswf.replay.wfa
from ..replay import wfa
from ..replay.wfa import ToolAnswer as ToolAnswer
from ..replay.wfa import ToolFailed as ToolFailed
from ..replay.wfa import ToolRefused as ToolRefused
from ..replay.wfa import ToolResult as ToolResult
from ..replay.wfa import exchange as exchange
from ..workflow.durations import Duration, to_seconds


class ScriptedTurn(wfa.ScriptedTurn):
    """What a script function is given: the attempt's prompt, `wfa` as calls, and time to spend."""

    async def wait(self, duration: Duration) -> None:
        """Work for `duration` ("10m", or seconds) on the run's clock: under virtual time, at once."""
        await anyio.sleep(to_seconds(duration, what="a scripted wait"))


ScriptFn = Callable[[ScriptedTurn], Any]


@dataclass(frozen=True)
class Script:
    """How one attempt of a scripted agent plays out."""

    kind: Literal["answer", "silent", "failed", "blocked", "timed-out", "hang"]
    fn: ScriptFn | None = None
    reason: str = ""
    retryable: bool = False

    async def play(self, turn: ScriptedTurn) -> AttemptEnding:
        if self.kind == "hang":
            await anyio.sleep_forever()
        if self.kind in ("failed", "blocked", "timed-out"):
            return AttemptEnding(self.kind, reason=self.reason, retryable=self.retryable)  # type: ignore[arg-type]
        if self.kind == "answer" and self.fn is not None:
            value = self.fn(turn)
            if inspect.isawaitable(value):
                value = await value
            if not turn.answered and value is not None:
                response = await turn.result(value)
                if not response.ok:
                    raise TestScriptError(
                        f"agent {turn.agent} turn {turn.n}: its scripted answer was refused "
                        f"({response.code}): {response.stderr.strip()}"
                    )
        return AttemptEnding("exited")


def answer(fn: ScriptFn | Any) -> Script:
    """Answer with `fn(turn)` (sync or async), or with `fn` itself when it isn't callable.

    A function that returns None answers nothing (it may have answered through
    `turn.result`, or only messaged its peers).
    """
    if callable(fn):
        return Script("answer", fn)
    return Script("answer", lambda turn: fn)


def silent() -> Script:
    """End the attempt without answering (the turn is nudged once, then `unanswered`)."""
    return Script("silent")


def failed(reason: str = "the scripted agent failed", *, retryable: bool = False) -> Script:
    return Script("failed", reason=reason, retryable=retryable)


def blocked(reason: str = "the scripted agent is blocked on a prompt") -> Script:
    return Script("blocked", reason=reason)


def timed_out(reason: str = "the scripted agent's CLI timed out") -> Script:
    return Script("timed-out", reason=reason)


def hang() -> Script:
    """Never end: the turn ends by its deadline or by being cancelled."""
    return Script("hang")


Scripts = Script | Sequence[Script]


@dataclass
class _Played:
    entries: Script | list[Script]
    used: int = 0
    first_prompt: str = ""


@dataclass
class ScriptBook:
    """The scripts of a test run, and what went wrong with them."""

    scripts: dict[str, Scripts]
    supports_waiting: bool = True
    compactions: dict[str, list[Script]] = field(default_factory=dict)  # by agent: one entry per compaction
    errors: list[BaseException] = field(default_factory=list)
    played: dict[str, _Played] = field(default_factory=dict)

    def harness_for(self, key: str, runtime: Runtime) -> Harness:
        if key not in self.scripts:
            scripted = ", ".join(sorted(self.scripts)) or "none"
            error = TestScriptError(f"agent {key} was opened, but has no script (scripted: {scripted})")
            self.errors.append(error)
            raise error
        entries = self.scripts[key]  # on Temporal each turn opens its agent anew: its script goes on
        self.played.setdefault(key, _Played(entries if isinstance(entries, Script) else list(entries)))
        return ScriptedHarness(key, self, runtime.model, runtime.effort)

    def next_compaction(self, agent: str) -> Script | None:
        """The agent's next scripted compaction; None when it has none left (it answers "")."""
        entries = self.compactions.get(agent)
        return entries.pop(0) if entries else None

    def next_entry(self, attempt: Attempt) -> Script:
        played = self.played[attempt.agent]
        played.first_prompt = played.first_prompt or attempt.prompt
        played.used += 1
        if isinstance(played.entries, Script):
            return played.entries
        if played.used > len(played.entries):
            which = "the nudge" if attempt.nudge else "its first attempt"
            first_line = attempt.prompt.strip().splitlines()[0] if attempt.prompt.strip() else ""
            error = TestScriptError(
                f"agent {attempt.agent} turn {attempt.turn} ({which}): its script has "
                f"{_entries(len(played.entries))}, all used. It was asked: {first_line}"
            )
            self.errors.append(error)
            raise error
        return played.entries[played.used - 1]

    def check(self) -> None:
        """Raise the first script error, or one for a script never used: an agent never
        opened (a misspelt key), or a list with entries never played."""
        if self.errors:
            raise self.errors[0]
        unopened = sorted(set(self.scripts) - set(self.played))
        if unopened:
            opened = ", ".join(sorted(self.played)) or "none"
            raise TestScriptError(f"agent {', '.join(unopened)} has a script, but was never opened (opened: {opened})")
        for key, played in self.played.items():
            if isinstance(played.entries, list) and played.used < len(played.entries):
                left = len(played.entries) - played.used
                raise TestScriptError(f"agent {key}: its script has {_entries(left)} left over, never played")


def _entries(count: int) -> str:
    return f"{count} entry" if count == 1 else f"{count} entries"


class ScriptedHarness(Harness):
    name = "scripted"
    spawns = False  # it plays in the run's own process, which its socket admits

    def __init__(self, key: str, book: ScriptBook, model: str | None = None, effort: str | None = None) -> None:
        self.key = key
        self.book = book
        self.model, self.effort = model, effort
        self.forks = 0

    def settings(self) -> tuple[str | None, str | None]:
        return self.model, self.effort

    def with_settings(self, model: str | None, effort: str | None) -> ScriptedHarness:
        switched = ScriptedHarness(self.key, self.book, model or self.model, effort or self.effort)
        switched.forks = self.forks
        return switched

    async def compact(self, operation: Operation) -> OperationResult:
        """Its next scripted compaction (`answer("summary")`, `silent()`, `failed()`, `hang()`...), or ""."""
        entry = self.book.next_compaction(self.key)
        if entry is None:
            return OperationResult(AttemptEnding("exited"), session=operation.session)
        if entry.kind == "hang":
            await anyio.sleep_forever()
        if entry.kind == "silent":
            return OperationResult(AttemptEnding("failed", reason="the harness did not confirm a compaction"))
        if entry.kind != "answer":
            return OperationResult(AttemptEnding(entry.kind, reason=entry.reason, retryable=entry.retryable))  # type: ignore[arg-type]
        value = entry.fn(operation) if entry.fn is not None else ""  # type: ignore[arg-type]  # given the Operation: its focus
        if inspect.isawaitable(value):
            value = await value
        return OperationResult(AttemptEnding("exited"), session=operation.session, summary=str(value or ""))

    async def fork(self, operation: Operation) -> OperationResult:
        """A session id of its own for the copy: a scripted agent keeps no history."""
        self.forks += 1
        return OperationResult(AttemptEnding("exited"), session=f"scripted:{self.key}:fork-{self.forks}")
    @property
    def supports_waiting(self) -> bool:  # type: ignore[override]
        return self.book.supports_waiting

    async def run(self, attempt: Attempt) -> AttemptResult:
        entry = self.book.next_entry(attempt)
        try:
            ending = await entry.play(ScriptedTurn(attempt))
        except Exception as error:  # the test must see it, not a quietly failed turn
            self.book.errors.append(error)
            raise
        return AttemptResult(ending)

