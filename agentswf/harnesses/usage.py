"""What an attempt of an agent's CLI spent, as its harness reads it from the CLI's output.

It lives beside `Harness` because harnesses make it and the engine only sums and records it:
adapters depend on nothing of the engine's.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import msgspec


class Usage(msgspec.Struct, frozen=True, omit_defaults=True):
    """Tokens and dollars a turn spent; absent, never zero, when unknown.

    The counts are as the CLI reports them (codex's `input_tokens` includes its cached ones).
    `cost_usd` is what the CLI printed, or, `estimated`, its tokens at a table's prices
    (`harnesses.prices`). `model` is the model that spent it, where known; a sum over more
    than one model names none.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_usd: float | None = None
    model: str | None = None
    estimated: bool = False  # some of `cost_usd` is priced from tokens, not printed by the CLI


def sound(usage: Usage | None) -> Usage | None:
    """`usage` with each count that isn't a whole number of at least 0, and a cost that isn't a finite
    number of at least 0, unknown. A CLI's output is hostile input (an agent's process can write to
    it, through /proc): a negative spend would give a budget back, a string would break a sum."""
    if usage is None:
        return None

    def count(value: Any) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    cost = usage.cost_usd
    dollars = cost if isinstance(cost, int | float) and not isinstance(cost, bool) and math.isfinite(cost) and cost >= 0 else None
    return Usage(
        count(usage.input_tokens), count(usage.output_tokens), count(usage.cache_read_tokens),
        count(usage.cache_write_tokens), dollars, usage.model if isinstance(usage.model, str) else None,
        usage.estimated is True,
    )


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
        total.model if total.model == more.model else None,
        total.estimated or more.estimated,
    )


UsageField = Literal["input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd"]


def since(reported: Usage, before: Usage | None, totals: frozenset[UsageField]) -> Usage:
    """An attempt's own usage, from what its CLI reported: the fields in `totals` are the session's
    running totals, so what the CLI reported for the session last time (`before`) is taken off.

    A total below the one before is a count begun anew (the session wasn't the one resumed), and
    counts as it is; a field either side leaves unknown stays as reported."""
    changes: dict[str, Any] = {}
    for name in totals:
        now, then = getattr(reported, name), getattr(before, name, None)
        if now is not None and then is not None and now >= then:
            changes[name] = now - then
    return msgspec.structs.replace(reported, **changes)
