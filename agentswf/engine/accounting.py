"""What a run spent, summed as its turns settle: per turn, agent, key group, model, and the run.

Every turn reaches the Recorder when it ends, whoever started it (the workflow or a message),
so the Recorder keeps the run's `Ledger` and writes it to `usage.json` in the record as turns
settle; the workflow reads the same ledger (`agent.usage`, `RunResult.usage`). A key's group is
its part before the first `:`, so `review:security` and `review:style` count toward `review`.
"""

from __future__ import annotations

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


def spend_lines(spent: RunUsage) -> list[str]:
    """A run's spend for `awf logs`: the total, then by key group and by model."""
    unpriced = f" ({spent.unpriced_turns} without a cost)" if spent.unpriced_turns else ""
    lines = [f"spent: {spend_text(spent.total)} over {spent.turns} turns{unpriced}"]
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


class RunUsage(msgspec.Struct, frozen=True, kw_only=True):
    """A run's spend: its total, and the same summed by agent, key group and model, and each turn.

    A usage is absent where nothing was known. `unpriced_turns` counts the turns without a cost,
    so a total's cost is at least what it says while there are any; `estimated` on a usage says
    some of its cost was priced from tokens (`harnesses.prices`).
    """

    total: Usage | None = None
    turns: int = 0
    unpriced_turns: int = 0
    agents: dict[str, Usage] = {}
    groups: dict[str, Usage] = {}
    models: dict[str, Usage] = {}
    by_turn: tuple[TurnUsage, ...] = ()


class Ledger:
    """The run's spend so far, added to turn by turn; one per run, written only by its Recorder."""

    def __init__(self) -> None:
        self.total: Usage | None = None
        self.turns: list[TurnUsage] = []
        self.unpriced = 0
        self.agents: dict[str, Usage] = {}
        self.groups: dict[str, Usage] = {}
        self.models: dict[str, Usage] = {}

    def add(self, turn: Turn[object]) -> None:
        usage = turn.usage
        self.turns.append(TurnUsage(agent=turn.agent, call_id=turn.call_id, n=turn.n, usage=usage))
        if usage is None or usage.cost_usd is None:
            self.unpriced += 1
        if usage is None:
            return
        self.total = add_usage(self.total, usage)
        for totals, name in ((self.agents, turn.agent), (self.groups, group_of(turn.agent)), (self.models, usage.model)):
            if name is not None:
                totals[name] = add_usage(totals.get(name), usage) or usage

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
        )
