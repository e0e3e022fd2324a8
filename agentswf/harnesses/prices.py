"""What a model's tokens cost, for a CLI that prints no dollars (codex): a dated table.

A CLI that prints its cost (claude, pi) is believed; for the others a turn's cost is its tokens
at the table's prices, marked `estimated`. The shipped table is list prices in US dollars on the
date it gives; prices change, and a plan, a discount or a gateway isn't in it, so a runtime can
carry its own (`Runtime(prices=Prices.load("prices.json"))`). A model not in the table has no cost:
unknown, never zero.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from .usage import Usage

TOKENS_PER_PRICE = 1_000_000  # a price is US dollars per million tokens


class Price(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """US dollars per million tokens: input not read from the cache, output, cache reads, cache writes."""

    input: float
    output: float
    cache_read: float = 0.0
    cache_write: float = 0.0


class Prices(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Prices by model id, as of `as_of` (a date, `YYYY-MM-DD`)."""

    as_of: str
    models: dict[str, Price]

    @classmethod
    def load(cls, path: str | Path) -> Prices:
        """A table from a JSON file of this shape: `{"as_of": …, "models": {id: {"input": …, …}}}`."""
        return msgspec.json.decode(Path(path).read_bytes(), type=cls)

    def of(self, model: str) -> Price | None:
        """The price of `model`: its own entry, else the longest id it is a dated version of
        (`claude-sonnet-4-5-20250929` is `claude-sonnet-4-5`); a `provider/` prefix is ignored."""
        name = model.rpartition("/")[2]
        if name in self.models:
            return self.models[name]
        versions = [known for known in self.models if name.startswith(known + "-")]
        return self.models[max(versions, key=len)] if versions else None


def _openai(input: float, cached: float, output: float) -> Price:
    return Price(input=input, output=output, cache_read=cached)


def _anthropic(input: float, output: float) -> Price:
    # cache reads at a tenth of input, five-minute cache writes at 1.25 times it
    return Price(input=input, output=output, cache_read=input / 10, cache_write=input * 1.25)


LIST_PRICES = Prices(
    as_of="2025-10-01",
    models={
        "gpt-5": _openai(1.25, 0.125, 10.0),
        "gpt-5-codex": _openai(1.25, 0.125, 10.0),
        "gpt-5-mini": _openai(0.25, 0.025, 2.0),
        "gpt-5-nano": _openai(0.05, 0.005, 0.40),
        "gpt-4.1": _openai(2.0, 0.50, 8.0),
        "gpt-4.1-mini": _openai(0.40, 0.10, 1.60),
        "o3": _openai(2.0, 0.50, 8.0),
        "o4-mini": _openai(1.10, 0.275, 4.40),
        "claude-opus-4-1": _anthropic(15.0, 75.0),
        "claude-opus-4": _anthropic(15.0, 75.0),
        "claude-sonnet-4-5": _anthropic(3.0, 15.0),
        "claude-sonnet-4": _anthropic(3.0, 15.0),
        "claude-haiku-4-5": _anthropic(1.0, 5.0),
        "claude-3-5-haiku": _anthropic(0.80, 4.0),
    },
)
"""List prices on `as_of`, for the models the CLIs run by default or are commonly given."""


def estimate(usage: Usage | None, prices: Prices, *, input_counts_cache_reads: bool = False) -> Usage | None:
    """`usage` with its cost from `prices`, marked estimated, where the CLI gave none.

    Left as it is when it has a cost, names no model the table prices, or lacks a token count the
    cost needs. `input_counts_cache_reads` for a CLI whose input count includes the cached part (codex).
    """
    if usage is None or usage.cost_usd is not None or usage.model is None:
        return usage
    price = prices.of(usage.model)
    if price is None or usage.input_tokens is None or usage.output_tokens is None:
        return usage
    cache_read = usage.cache_read_tokens or 0
    fresh = usage.input_tokens - cache_read if input_counts_cache_reads else usage.input_tokens
    dollars = (
        max(fresh, 0) * price.input
        + usage.output_tokens * price.output
        + cache_read * price.cache_read
        + (usage.cache_write_tokens or 0) * price.cache_write
    ) / TOKENS_PER_PRICE
    return msgspec.structs.replace(usage, cost_usd=dollars, estimated=True)
