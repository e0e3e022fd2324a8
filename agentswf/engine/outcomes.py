"""How a turn ends: six outcomes, values rather than exceptions.

A turn that does not answer is not an error of the workflow; it is a fact the
workflow decides about, so `agent.run` returns it instead of raising.

`Turn` and `Answered` are generic in the answer's type: `agent.run(..., schema=Verdict)`
returns a `Turn[Verdict]`, so a type checker knows `turn.value` is a `Verdict` (and a
`str` without a schema).
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

import msgspec

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


class Usage(msgspec.Struct, frozen=True, omit_defaults=True):
    """Tokens (and dollars, where the CLI prints them) a turn spent; absent, never zero, when unknown."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_usd: float | None = None


def add_usage(total: Usage | None, more: Usage | None) -> Usage | None:
    """Two usages summed field by field; a field unknown in both stays unknown."""
    if total is None or more is None:
        return total if more is None else more

    def plus(a: Any, b: Any) -> Any:
        return b if a is None else a if b is None else a + b

    return Usage(
        plus(total.input_tokens, more.input_tokens),
        plus(total.output_tokens, more.output_tokens),
        plus(total.cache_read_tokens, more.cache_read_tokens),
        plus(total.cache_write_tokens, more.cache_write_tokens),
        plus(total.cost_usd, more.cost_usd),
    )


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

    @property
    def answered(self) -> bool:
        return self.outcome.answered

    @property
    def value(self) -> T:
        """The answer; raises if the turn was not answered, saying how it ended."""
        if isinstance(self.outcome, Answered):
            return self.outcome.value
        raise ValueError(f"turn {self.n} of {self.agent} ended {self.outcome.kind}: {self.outcome.reason}")
