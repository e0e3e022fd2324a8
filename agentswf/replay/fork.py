"""A run forked at an agent's turn: what started before it played from the record, the rest run for real.

Every turn and operation that started, on record, before agent KEY's turn N started is played
from the record as a replay plays it (its tool calls not made again, no model, no CLI, nothing
spent); from there on every agent runs for real on its own harness, the agents played so far
resuming the native session their last played turn reported. A `Fork` is the book of one such
run; `agentswf.run(continue_from=ContinueFrom(...))` runs it (agentswf/workflow/forking.py).

A fork resumes a native session as its CLI keeps it: claude, codex and pi resume the whole
session, so an agent whose session went on past turn N-1 in the forked run resumes it with those
later turns in it (no CLI here can resume a session at an earlier point of it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import DefinitionError
from ..harnesses.base import Attempt, AttemptResult, Harness, Operation, OperationResult
from ..harnesses.usage import Usage
from .played import ReplayBook, ReplayHarness
from .recorded import PLAYED_KINDS, Recorded, RecordedTurn

Settings = tuple[str | None, str | None]  # a model and an effort (None: as it was)


@dataclass(frozen=True)
class Fork:
    """The book a fork plays from, and the recorded calls it plays: those started before the fork's turn."""

    book: ReplayBook
    prefix: frozenset[str]

    @classmethod
    def at(cls, recorded: Recorded, agent: str, n: int, *, strict: bool) -> Fork:
        """A fork of `recorded` at `agent`'s turn `n`; a DefinitionError when the record has no such turn.
        `strict=False`: a played turn's prompt text may differ from the record's."""
        turns = [turn for turn in recorded.turns if turn.agent == agent and turn.kind == "turn" and turn.by_workflow]
        cut = next((turn for turn in turns if turn.n == n), None)
        if cut is None:
            given = ", ".join(str(turn.n) for turn in sorted(turns, key=lambda turn: turn.n)) or "none"
            raise DefinitionError(f"{recorded.run_dir} has no turn {n} of agent {agent} (its turns: {given})")
        began = cut.line.get("started_at", 0.0)
        prefix = frozenset(turn.call_id for turn in recorded.turns if turn.line.get("started_at", 0.0) < began)
        return cls(ReplayBook(recorded, tools="record", strict=strict, spend=False, replays_tools=False), prefix)

    def harness(self, key: str, real: Harness, given: Settings | None = None) -> ForkHarness:
        """Agent `key`'s harness: `real` for what isn't played, with the model and effort `given` from
        the fork's turn on; NotImplementedError where `real` can't switch."""
        before = [turn for turn in self.book.recorded.turns if turn.agent == key and turn.call_id in self.prefix]
        played = frozenset(turn.call_id for turn in before if turn.kind in PLAYED_KINDS)
        sets = sum(turn.kind == "set" and turn.outcome.get("kind") == "answered" for turn in before)
        return ForkHarness(key, self.book, self.prefix, real, given, played, sets)

    def check(self) -> None:
        """Raise what went wrong playing the record: the first error, or the first divergence (`ReplayDiverged`)."""
        if self.book.errors:
            raise self.book.errors[0]
        if self.book.diverged is not None:
            raise self.book.diverged


class ForkHarness(Harness):
    """An agent of a fork: its attempts before the fork's turn played from the record, the rest run by `real`.

    While some of what the agent did before the fork's turn, on record, is still to come (a turn or
    operation to play, a `set`), `real` has the settings the workflow gave it (as it opened, and as
    its `set`s left them), and a played turn says it ran with its recorded ones. From then on it
    runs with those the fork gives (`given`) on top, even where a played `set` said otherwise; a
    `set` after that switches it as in any run. `settings()` says which, as each attempt starts.
    """

    name = "fork"

    def __init__(
        self, key: str, book: ReplayBook, prefix: frozenset[str], real: Harness, given: Settings | None,
        played: frozenset[str], sets: int,
    ) -> None:  # fmt: skip
        self.key, self.book, self.prefix, self.real, self.given = key, book, prefix, real, given
        self.played_calls, self.sets = played, sets  # its played calls on record, and the `set`s still to come before the fork's turn
        self.later = real if given is None else real.with_settings(*given)  # what runs from the fork's turn on
        self.played = ReplayHarness(key, book, *real.settings())

    def _left(self, kind: str, by_workflow: bool, n: int | None = None) -> RecordedTurn | None:
        for turn in self.book.recorded.turns:
            if (
                turn.agent == self.key and turn.kind == kind and turn.by_workflow == by_workflow
                and turn.call_id in self.prefix and turn.call_id not in self.book.started and (n is None or turn.n == n)
            ):  # fmt: skip
                return turn
        return None

    def _plays(self, attempt: Attempt) -> bool:
        if attempt.call_id in self.book.playing:
            return True
        by_workflow = attempt.started_by == "workflow"
        return self._left("turn", by_workflow, attempt.turn if by_workflow else None) is not None

    def _before_fork(self) -> bool:
        """Whether some of what the agent did before the fork's turn, on record, is still to come."""
        return self.sets > 0 or not self.played_calls <= self.book.started

    def _forked(self) -> Harness:
        """`real`, with the settings the fork gives from its first attempt or operation on."""
        self.real, self.given, self.sets = self.later, None, 0
        return self.real

    async def run(self, attempt: Attempt) -> AttemptResult:
        return await (self.played if self._plays(attempt) else self._forked()).run(attempt)

    async def compact(self, operation: Operation) -> OperationResult:
        played = self._left("compaction", True) is not None
        return await (self.played if played else self._forked()).compact(operation)

    async def fork(self, operation: Operation) -> OperationResult:
        played = self._left("fork", True) is not None
        return await (self.played if played else self._forked()).fork(operation)

    def settings(self) -> Settings:
        """What its next attempt or operation runs with, if for real (a played one says what it ran with)."""
        return (self.real if self._before_fork() else self.later).settings()

    def with_settings(self, model: str | None, effort: str | None) -> ForkHarness:
        if self._before_fork():  # a `set` played: the settings given win from the fork's turn on all the same
            real = self.real.with_settings(model, effort)
            return ForkHarness(self.key, self.book, self.prefix, real, self.given, self.played_calls, max(self.sets - 1, 0))
        real = self.later.with_settings(model, effort)
        return ForkHarness(self.key, self.book, self.prefix, real, None, self.played_calls, 0)

    @property
    def supports_waiting(self) -> bool:  # type: ignore[override]
        return self.real.supports_waiting

    @property
    def confirms_delivery(self) -> bool:  # type: ignore[override]
        return self.real.confirms_delivery

    @property
    def can_await(self) -> bool:  # type: ignore[override]
        return self.real.can_await

    def seed(self, session: str, totals: Usage | None) -> None:
        self.real.seed(session, totals)

    def totals(self, session: str) -> Usage | None:
        return self.real.totals(session)

    def cli_executable(self) -> tuple[str, str] | None:
        return self.real.cli_executable()

    def cli_home(self) -> str:
        return self.real.cli_home()

    async def close(self) -> None:
        await self.real.close()

    @property
    def check_ins(self) -> Mapping[str, float]:
        return self.real.check_ins

    def turn_settled(self, outcome: str) -> None:
        self.real.turn_settled(outcome)

    def attempt_env(self, attempt: Attempt) -> dict[str, str]:
        return self.real.attempt_env(attempt)
