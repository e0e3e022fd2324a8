"""How a turn ends: six outcomes, values rather than exceptions.

A turn that does not answer is not an error of the workflow; it is a fact the
workflow decides about, so `agent.run` returns it instead of raising.

`Turn` and `Answered` are generic in the answer's type: `agent.run(..., schema=Verdict)`
returns a `Turn[Verdict]`, so a type checker knows `turn.value` is a `Verdict` (and a
`str` without a schema).
"""

from __future__ import annotations

from typing import ClassVar, Generic, TypeVar

import msgspec

from ..errors import TurnNotAnswered
from ..harnesses.usage import Usage
from ..harnesses.usage import add_usage as add_usage  # the engine sums usage from here

T = TypeVar("T")


class _Outcome(msgspec.Struct, frozen=True, tag_field="kind"):
    answered: ClassVar[bool] = False

    @property
    def kind(self) -> str:
        return type(self).__struct_config__.tag  # type: ignore[return-value]


class Answered(_Outcome, Generic[T], frozen=True, tag="answered"):
    """The agent's answer was accepted; `value` is it, validated by the turn's schema."""

    value: T
    answered: ClassVar[bool] = True
    reason: ClassVar[str] = ""  # as every other outcome has one: `turn.outcome.reason` reads the same on any


class Unanswered(_Outcome, frozen=True, tag="unanswered"):
    """The agent finished, was nudged, and still gave no answer."""

    reason: str


class Blocked(_Outcome, frozen=True, tag="blocked"):
    """The agent stopped on a prompt it could not get past (a permission, a question)."""

    reason: str


class TimedOut(_Outcome, frozen=True, tag="timed-out"):
    """The turn's deadline passed before an answer was accepted."""

    reason: str


class Failed(_Outcome, frozen=True, tag="failed"):
    """The agent's CLI failed; `retryable` says whether trying again may help."""

    reason: str
    retryable: bool = False


class Cancelled(_Outcome, frozen=True, tag="cancelled"):
    """The turn was cancelled: its workflow, stage or parallel branch stopped."""

    reason: str


Outcome = Answered[T] | Unanswered | Blocked | TimedOut | Failed | Cancelled
"""How a turn ended: `Outcome[Verdict]` when its answer is a `Verdict`."""


class Turn(msgspec.Struct, Generic[T], frozen=True, kw_only=True):
    """One finished turn of one agent; `T` is its answer's type (its schema, or `str`)."""

    outcome: Outcome[T]
    agent: str
    call_id: str
    n: int
    nudged: bool = False
    started_at: float
    ended_at: float
    usage: Usage | None = None
    session: str | None = None
    started_by: str = "workflow"  # or "message": a turn mail started, which takes no result
    kind: str = "turn"  # or an operation: "compaction", "set", "fork" (the copy a fork starts from), "stop"
    model: str | None = None  # the settings it ran with (None: the CLI's default)
    effort: str | None = None
    forked_from: str | None = None  # a fork's: the agent whose session it started from

    @property
    def answered(self) -> bool:
        return self.outcome.answered

    @property
    def value(self) -> T:
        """The answer; raises TurnNotAnswered if the turn was not answered, saying how it ended."""
        if isinstance(self.outcome, Answered):
            return self.outcome.value
        raise TurnNotAnswered(self)
