"""The cost of a turn whose CLI prints none: a dated table of prices, and a user's own."""

from __future__ import annotations

import json
import re
from pathlib import Path

import msgspec
import pytest

from agentswf import Runtime
from agentswf.harnesses.codex import CodexHarness
from agentswf.harnesses.prices import LIST_PRICES, Price, Prices, estimate
from agentswf.harnesses.runtime import harness_for
from agentswf.harnesses.usage import Usage

TABLE = Prices(as_of="2026-12-01", models={"m": Price(input=2.0, output=8.0, cache_read=0.5, cache_write=2.5), "m-mini": Price(input=1.0, output=1.0)})


def test_a_model_is_priced_by_its_id_a_dated_version_of_it_or_not_at_all() -> None:
    assert TABLE.of("m") == TABLE.models["m"]
    assert TABLE.of("m-20261001") == TABLE.models["m"]
    assert TABLE.of("m-mini-20261001") == TABLE.models["m-mini"]  # the longest id it is a version of
    assert TABLE.of("provider/m") == TABLE.models["m"]
    assert TABLE.of("mm") is None and TABLE.of("m.5") is None


def test_tokens_at_the_tables_prices_are_an_estimate() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=500_000, cache_read_tokens=200_000, cache_write_tokens=100_000, model="m")
    priced = estimate(usage, TABLE)
    assert priced is not None and priced.estimated
    assert priced.cost_usd == pytest.approx(2.0 + 4.0 + 0.1 + 0.25)
    # codex counts its cached tokens in its input: they are priced once, as cache reads
    codex = estimate(usage, TABLE, input_counts_cache_reads=True)
    assert codex is not None and codex.cost_usd == pytest.approx(0.8 * 2.0 + 4.0 + 0.1 + 0.25)


@pytest.mark.parametrize(
    "usage",
    [
        Usage(input_tokens=10, output_tokens=1, cost_usd=0.5, model="m"),  # the CLI printed it: believed
        Usage(input_tokens=10, output_tokens=1),  # no model named
        Usage(input_tokens=10, output_tokens=1, model="unknown"),  # a model the table doesn't price
        Usage(output_tokens=1, model="m"),  # a count the cost needs is unknown
    ],
)
def test_what_cant_be_priced_keeps_the_cost_it_has_or_none(usage: Usage) -> None:
    assert estimate(usage, TABLE) == usage
    assert estimate(None, TABLE) is None


def test_a_table_loads_from_json_and_refuses_a_misspelt_field(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"as_of": "2026-12-01", "models": {"m": {"input": 2.0, "output": 8.0}}}))
    assert Prices.load(path) == Prices(as_of="2026-12-01", models={"m": Price(input=2.0, output=8.0)})
    path.write_text(json.dumps({"as_of": "2026-12-01", "models": {"m": {"input": 2.0, "ouput": 8.0}}}))
    with pytest.raises(msgspec.ValidationError):
        Prices.load(path)


def test_the_shipped_table_is_dated_and_prices_every_model_it_names() -> None:
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", LIST_PRICES.as_of)
    for model, price in LIST_PRICES.models.items():
        assert price.input > 0 and price.output >= price.input and 0 <= price.cache_read < price.input, model


def test_a_runtime_carries_its_own_prices_to_its_harness(tmp_path: Path) -> None:
    codex = tmp_path / "codex"
    codex.write_text("#!/bin/sh\n")
    codex.chmod(0o755)
    own = harness_for(Runtime(harness="codex", command=(str(codex),), prices=TABLE), env={})
    shipped = harness_for(Runtime(harness="codex", command=(str(codex),)), env={})
    assert isinstance(own, CodexHarness) and isinstance(shipped, CodexHarness)
    assert own.prices is TABLE and shipped.prices is LIST_PRICES
