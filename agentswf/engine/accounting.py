"""What a run spent, summed as its turns settle: per turn, agent, key group, model, and the run.

Every turn reaches the Recorder when it ends, whoever started it (the workflow or a message),
so the Recorder keeps the run's `Ledger` and writes it to `usage.json` in the record as turns
settle; the workflow reads the same ledger (`agent.usage`, `RunResult.usage`). A key's group is
its part before the first `:`, so `review:security` and `review:style` count toward `review`.

A continued run's attempt starts its ledger from what the attempts before it spent (the
usage.json they left, `Ledger(attempt=n, earlier=…)`): its totals are the run's, across
attempts, and `attempts` holds each attempt's own.

usage.json grows with the run (`by_turn` has every turn; `agents`, `groups` and `models` every
name) and is rewritten at every group commit that follows a turn's end: so each entry is
encoded once, as it is added or changes, and a rewrite joins the encoded entries
(`Ledger.record`). Encoding all of it each time took 14 % of a 10,000-agent run's CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
from msgspec.structs import replace

from ..harnesses.usage import Usage, add_usage
from .outcomes import Turn

GROUP_SEPARATOR = ":"
_encoder = msgspec.json.Encoder()


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
        self._encoded_turns = [_encoder.encode(turn) for turn in self.turns]
        self._encoded_names = {
            field: {name: _entry(name, usage) for name, usage in totals.items()}
            for field, totals in (("agents", self.agents), ("groups", self.groups), ("models", self.models))
        }

    def watch(self, watcher: Callable[[Turn[object]], None]) -> None:
        self._watchers.append(watcher)

    def add(self, turn: Turn[object]) -> None:
        usage = turn.usage
        entry = TurnUsage(agent=turn.agent, call_id=turn.call_id, n=turn.n, usage=usage, attempt=self.attempt, kind=turn.kind)
        self.turns.append(entry)
        self._encoded_turns.append(_encoder.encode(entry))
        this = self.this
        this.turns += 1
        this.last_ended_at = turn.ended_at
        if usage is None or usage.cost_usd is None:
            self.unpriced += 1
            this.unpriced_turns += 1
        if usage is not None:
            self.total = add_usage(self.total, usage)
            this.total = add_usage(this.total, usage)
            encoded = self._encoded_names
            for totals, entries, name in (
                (self.agents, encoded["agents"], turn.agent),
                (self.groups, encoded["groups"], group_of(turn.agent)),
                (self.models, encoded["models"], usage.model),
            ):
                if name is not None:
                    totals[name] = added = add_usage(totals.get(name), usage) or usage
                    entries[name] = _entry(name, added)
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

    def record(self) -> dict[str, Any]:
        """The snapshot's fields as usage.json has them, in its order, each growing one as its
        entries' JSON joined (`msgspec.Raw`): the same bytes as the snapshot encoded whole."""
        joined = {field: msgspec.Raw(b"{" + b",".join(entries.values()) + b"}")
                  for field, entries in self._encoded_names.items()}
        return {
            "total": self.total,
            "turns": len(self.turns),
            "unpriced_turns": self.unpriced,
            **joined,
            "by_turn": msgspec.Raw(b"[" + b",".join(self._encoded_turns) + b"]"),
            "attempt": self.attempt,
            "attempts": (*self.earlier, replace(self.this)),
        }


def _entry(name: str, usage: Usage) -> bytes:
    """One name's usage as a JSON object's member, `"name":{...}`."""
    return _encoder.encode(name) + b":" + _encoder.encode(usage)


def earlier_attempts(before: RunUsage, attempt: int) -> tuple[AttemptUsage, ...]:
    """The attempts before `attempt` as `before` has them; a usage.json written before attempts
    were kept is one attempt, the one that wrote it."""
    if before.attempts:
        return tuple(earlier for earlier in before.attempts if earlier.n < attempt)
    if before.attempt >= attempt:
        return ()
    return (AttemptUsage(n=before.attempt, total=before.total, turns=before.turns, unpriced_turns=before.unpriced_turns),)
