"""What a run spent, summed as its turns settle: per turn, agent, key group, model, and the run.

Every turn reaches the Recorder when it ends, whoever started it (the workflow or a message),
so the Recorder keeps the run's `Ledger` and writes it to `usage.json` in the record as turns
settle; the workflow reads the same ledger (`agent.usage`, `RunResult.usage`). A key's group is
its part before the first `:`, so `review:security` and `review:style` count toward `review`.

A continued run's attempt starts its ledger from what the attempts before it spent (the
usage.json they left, `Ledger(attempt=n, earlier=…)`): its totals are the run's, across
attempts, and `attempts` holds each attempt's own.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
from msgspec.structs import replace

from ..harnesses.usage import Usage, add_usage
from .outcomes import Turn

GROUP_SEPARATOR = ":"


def group_of(key: str) -> str:
    """The key group `key` counts toward: its part before the first `:` (all of it without one)."""
    return key.partition(GROUP_SEPARATOR)[0]


def spend_text(usage: Usage | None) -> str:
    """`usage` as a person reads it: `1,200 in, 30 out, $0.0123 estimated, on gpt-5`."""
    if usage is None:
        return "nothing known"
    counts = (
        (usage.input_tokens, "in"),
        (usage.cache_read_tokens, "cache read"),
        (usage.cache_write_tokens, "cache write"),
        (usage.output_tokens, "out"),
    )
    parts = [f"{count:,} {what}" for count, what in counts if count is not None]
    if usage.cost_usd is None:
        parts.append("cost unknown")
    else:
        parts.append(f"${usage.cost_usd:.4f}" + (" estimated" if usage.estimated else ""))
    if usage.model is not None:
        parts.append(f"on {usage.model}")
    return ", ".join(parts)


def _over(turns: int, unpriced: int) -> str:
    counted = f"{turns} turn" if turns == 1 else f"{turns} turns"
    return counted + (f" ({unpriced} without a cost)" if unpriced else "")


def spend_lines(spent: RunUsage) -> list[str]:
    """A run's spend for `awf logs`: the total (across attempts), each attempt's when there were
    more than one, then by key group and by model."""
    lines = [f"spent: {spend_text(spent.total)} over {_over(spent.turns, spent.unpriced_turns)}"]
    if len(spent.attempts) > 1:
        lines.append("by attempt:")
        lines.extend(
            f"  {attempt.n}: {spend_text(attempt.total)} over {_over(attempt.turns, attempt.unpriced_turns)}"
            for attempt in spent.attempts
        )
    for title, totals in (("by key group", spent.groups), ("by model", spent.models)):
        if totals:
            lines.append(f"{title}:")
            lines.extend(f"  {name}: {spend_text(replace(usage, model=None))}" for name, usage in sorted(totals.items()))
    return lines


class TurnUsage(msgspec.Struct, frozen=True, kw_only=True):
    """One ended turn's own usage."""

    agent: str
    call_id: str
    n: int
    usage: Usage | None
    attempt: int = 1  # the run's attempt it ran in
    kind: str = "turn"  # or an operation's: "compaction", "fork", "set", "stop"


class AttemptUsage(msgspec.Struct, kw_only=True):
    """One attempt's own spend; `last_ended_at` is when its last turn ended (None before one)."""

    n: int
    total: Usage | None = None
    turns: int = 0
    unpriced_turns: int = 0
    last_ended_at: float | None = None


class RunUsage(msgspec.Struct, frozen=True, kw_only=True):
    """A run's spend: its total, and the same summed by agent, key group and model, and each turn.

    A usage is absent where nothing was known. `unpriced_turns` counts the turns without a cost,
    so a total's cost is at least what it says while there are any; `estimated` on a usage says
    some of its cost was priced from tokens (`harnesses.prices`). In a continued run every sum
    is across its attempts; `attempts` has each attempt's own, and `attempt` is the one that
    wrote this.
    """

    total: Usage | None = None
    turns: int = 0
    unpriced_turns: int = 0
    agents: dict[str, Usage] = {}
    groups: dict[str, Usage] = {}
    models: dict[str, Usage] = {}
    by_turn: tuple[TurnUsage, ...] = ()
    attempt: int = 1
    attempts: tuple[AttemptUsage, ...] = ()


class Ledger:
    """The run's spend so far, added to turn by turn; one per attempt, written only by its Recorder.

    `earlier` is what the attempts before this one spent (the run's usage.json as they left
    it): this ledger goes on from it. `watch` adds a function every turn is given as it is
    added (the workflow's side counts the turns it didn't give: mail's, and operations).
    """

    def __init__(self, attempt: int = 1, earlier: RunUsage | None = None) -> None:
        before = earlier or RunUsage()
        self.attempt = attempt
        self.total: Usage | None = before.total
        self.turns: list[TurnUsage] = list(before.by_turn)
        self.unpriced = before.unpriced_turns
        self.agents: dict[str, Usage] = dict(before.agents)
        self.groups: dict[str, Usage] = dict(before.groups)
        self.models: dict[str, Usage] = dict(before.models)
        self.earlier = earlier_attempts(before, attempt) if earlier is not None else ()
        self.this = AttemptUsage(n=attempt)
        self._watchers: list[Callable[[Turn[object]], None]] = []

    def watch(self, watcher: Callable[[Turn[object]], None]) -> None:
        self._watchers.append(watcher)

    def add(self, turn: Turn[object]) -> None:
        usage = turn.usage
        self.turns.append(
            TurnUsage(agent=turn.agent, call_id=turn.call_id, n=turn.n, usage=usage, attempt=self.attempt, kind=turn.kind)
        )
        this = self.this
        this.turns += 1
        this.last_ended_at = turn.ended_at
        if usage is None or usage.cost_usd is None:
            self.unpriced += 1
            this.unpriced_turns += 1
        if usage is not None:
            self.total = add_usage(self.total, usage)
            this.total = add_usage(this.total, usage)
            for totals, name in ((self.agents, turn.agent), (self.groups, group_of(turn.agent)), (self.models, usage.model)):
                if name is not None:
                    totals[name] = add_usage(totals.get(name), usage) or usage
        for watcher in self._watchers:
            watcher(turn)

    def agent(self, key: str) -> Usage | None:
        """What the agent `key` spent so far; None while nothing is known."""
        return self.agents.get(key)

    def snapshot(self) -> RunUsage:
        return RunUsage(
            total=self.total,
            turns=len(self.turns),
            unpriced_turns=self.unpriced,
            agents=dict(self.agents),
            groups=dict(self.groups),
            models=dict(self.models),
            by_turn=tuple(self.turns),
            attempt=self.attempt,
            attempts=(*self.earlier, replace(self.this)),
        )


def earlier_attempts(before: RunUsage, attempt: int) -> tuple[AttemptUsage, ...]:
    """The attempts before `attempt` as `before` has them; a usage.json written before attempts
    were kept is one attempt, the one that wrote it."""
    if before.attempts:
        return tuple(earlier for earlier in before.attempts if earlier.n < attempt)
    if before.attempt >= attempt:
        return ()
    return (AttemptUsage(n=before.attempt, total=before.total, turns=before.turns, unpriced_turns=before.unpriced_turns),)
