"""What an attempt of an agent's CLI spent, as its harness reads it from the CLI's output.

It lives beside `Harness` because harnesses make it and the engine only sums and records it:
adapters depend on nothing of the engine's.
"""

from __future__ import annotations

from typing import Any

import msgspec


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
