"""What a run spent: the ledger's sums, usage.json in the record, `agent.usage` and `RunResult.usage`.

The harness here is a stand-in that reports a fixed usage per attempt without running a CLI,
so the sums are known exactly; tests/harnesses/test_usage_per_turn.py drives the real CLIs.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import msgspec
from hypothesis import given
from hypothesis import strategies as st

import agentswf
from agentswf import Runtime, Workflow, workflow
from agentswf.cli.logs import print_run
from agentswf.engine.accounting import Ledger, RunUsage, group_of, spend_lines, spend_text
from agentswf.engine.outcomes import Answered, Turn, Unanswered
from agentswf.harnesses.base import Attempt, AttemptEnding, AttemptResult, Harness
from agentswf.harnesses.usage import Usage
from agentswf.testing import read_record


def turn(agent: str, n: int, usage: Usage | None) -> Turn[str]:
    return Turn(outcome=Answered("ok"), agent=agent, call_id=f"c{agent}{n}", n=n, started_at=0.0, ended_at=1.0, usage=usage)


def test_a_keys_group_is_its_part_before_the_first_colon() -> None:
    assert [group_of(key) for key in ("review:security", "review:style", "writer", "a:b:c")] == [
        "review",
        "review",
        "writer",
        "a",
    ]


def test_the_ledger_sums_by_agent_group_and_model_and_counts_the_unpriced() -> None:
    ledger = Ledger()
    ledger.add(turn("review:security", 1, Usage(input_tokens=10, output_tokens=1, cost_usd=0.5, model="m1")))
    ledger.add(turn("review:style", 1, Usage(input_tokens=20, output_tokens=2, cost_usd=0.25, model="m2", estimated=True)))
    ledger.add(turn("review:style", 2, Usage(input_tokens=5, output_tokens=1, model="m2")))
    ledger.add(turn("writer", 1, None))
    spent = ledger.snapshot()
    assert spent.turns == 4 and spent.unpriced_turns == 2
    assert spent.total == Usage(input_tokens=35, output_tokens=4, cost_usd=0.75, estimated=True)
    assert spent.groups == {"review": spent.total}
    assert spent.agents["review:style"] == Usage(input_tokens=25, output_tokens=3, cost_usd=0.25, model="m2", estimated=True)
    assert spent.models["m1"] == Usage(input_tokens=10, output_tokens=1, cost_usd=0.5, model="m1")
    assert [line.n for line in spent.by_turn] == [1, 1, 2, 1] and spent.by_turn[3].usage is None
    assert ledger.agent("writer") is None


keys = st.sampled_from(["a", "a:x", "a:y", "b", "b:z"])
usages = st.builds(
    Usage,
    input_tokens=st.integers(0, 10**6),
    output_tokens=st.integers(0, 10**6),
    model=st.sampled_from([None, "m1", "m2"]),
)


@given(st.lists(st.tuples(keys, usages), max_size=30))
def test_every_breakdown_adds_up_to_the_total(turns: list[tuple[str, Usage]]) -> None:
    ledger = Ledger()
    for n, (key, usage) in enumerate(turns):
        ledger.add(turn(key, n, usage))
    spent = ledger.snapshot()
    total = sum(usage.input_tokens or 0 for _, usage in turns)
    for breakdown in (spent.agents, spent.groups):
        assert sum(usage.input_tokens or 0 for usage in breakdown.values()) == total
    with_model = sum(usage.input_tokens or 0 for _, usage in turns if usage.model is not None)
    assert sum(usage.input_tokens or 0 for usage in spent.models.values()) == with_model



priced = st.builds(
    Usage,
    input_tokens=st.none() | st.integers(0, 10**6),
    cost_usd=st.none() | st.floats(0, 10, allow_nan=False),
    model=st.sampled_from([None, "m1", "m2"]),
    estimated=st.booleans(),
)


@given(
    st.lists(st.tuples(keys, st.none() | priced), max_size=12),
    st.lists(st.tuples(keys, st.none() | priced), max_size=12),
)
def test_the_usage_json_a_ledger_writes_is_its_snapshot_encoded_whole(
    before: list[tuple[str, Usage | None]], after: list[tuple[str, Usage | None]]
) -> None:
    """usage.json joins entries encoded as they were added (`Ledger.record`): the bytes are the
    snapshot's, in a first attempt and in one going on from an earlier attempt's usage.json."""
    earlier = Ledger()
    for n, (key, usage) in enumerate(before):
        earlier.add(turn(key, n, usage))
    for ledger in (earlier, Ledger(attempt=2, earlier=earlier.snapshot())):
        for n, (key, usage) in enumerate(after):
            ledger.add(turn(key, n, usage))
            whole = msgspec.json.encode({"version": 1, **msgspec.structs.asdict(ledger.snapshot())})
            assert msgspec.json.encode({"version": 1, **ledger.record()}) == whole

def test_spend_reads_as_a_line() -> None:
    assert spend_text(Usage(input_tokens=1200, output_tokens=30, cache_read_tokens=5, cost_usd=0.01234, estimated=True)) == (
        "1,200 in, 5 cache read, 30 out, $0.0123 estimated"
    )
    assert spend_text(Usage(output_tokens=3, model="m")) == "3 out, cost unknown, on m"
    assert spend_text(None) == "nothing known"


class Spending(Harness):
    """Reports `usage` for every attempt and hands in no answer: a turn with nudge=False is one attempt."""

    name = "spending"
    spawns = False

    def __init__(self, usage: Usage) -> None:
        self.usage = usage

    async def run(self, attempt: Attempt) -> AttemptResult:
        return AttemptResult(AttemptEnding("exited"), usage=self.usage)


SPENT = {
    "review:security": Usage(input_tokens=100, output_tokens=10, cost_usd=0.25, model="m1"),
    "review:style": Usage(input_tokens=40, output_tokens=4, model="m2"),
    "writer": Usage(input_tokens=7, output_tokens=1, cost_usd=0.5, model="m1", estimated=True),
}


@workflow(name="spends", description="Three agents, two turns each, no answers.")
async def spends(wf: Workflow) -> dict[str, object]:
    seen: dict[str, object] = {}
    for key in SPENT:
        agent = await wf.agents.open(key, runtime=Runtime(harness="shell", command=("true",)))
        assert agent.usage is None
        for _ in range(2):
            ended = await agent.run("Spend.", nudge=False)
            assert isinstance(ended.outcome, Unanswered)
        seen[key] = msgspec.to_builtins(agent.usage)
    return seen


async def test_a_run_records_and_returns_what_it_spent(tmp_path: Path) -> None:
    result = await agentswf.run(spends, run_root=tmp_path, harnesses=lambda key, runtime: Spending(SPENT[key]))
    assert result.outcome == "completed", result.reason
    twice = {key: Usage(input_tokens=u.input_tokens * 2, output_tokens=u.output_tokens * 2,  # type: ignore[operator]
                        cost_usd=None if u.cost_usd is None else u.cost_usd * 2, model=u.model, estimated=u.estimated)
             for key, u in SPENT.items()}  # fmt: skip
    assert result.value == {key: msgspec.to_builtins(usage) for key, usage in twice.items()}  # agent.usage
    spent = result.usage
    assert spent.turns == 6 and spent.unpriced_turns == 2
    assert spent.total == Usage(input_tokens=294, output_tokens=30, cost_usd=1.5, estimated=True)
    assert spent.groups["review"] == Usage(input_tokens=280, output_tokens=28, cost_usd=0.5)
    assert spent.models["m1"] == Usage(input_tokens=214, output_tokens=22, cost_usd=1.5, model="m1", estimated=True)
    # the record's usage.json is the same, written as turns ended
    record = read_record(result).usage
    assert record == json.loads((result.run_dir / "usage.json").read_text())
    assert record["version"] == 1
    assert msgspec.convert(record, RunUsage) == spent
    assert [line["agent"] for line in record["by_turn"]] == [key for key in SPENT for _ in range(2)]
    out = io.StringIO()
    print_run(result.run_dir, out)
    text = out.getvalue()
    assert "spent: 294 in, 30 out, $1.5000 estimated over 6 turns (2 without a cost)" in text, text
    assert "  review: 280 in, 28 out, $0.5000" in text, text
    assert text.count("  spent: 7 in, 1 out, $0.5000 estimated, on m1\n") == 2, text  # each turn's own


def test_spend_lines_count_one_turn_as_one_turn():
    assert spend_lines(RunUsage(turns=1, unpriced_turns=1))[0] == "spent: nothing known over 1 turn (1 without a cost)"
    assert spend_lines(RunUsage(turns=2))[0].endswith(" over 2 turns")


def test_a_continued_attempts_ledger_goes_on_from_the_earlier_ones_and_keeps_each_attempts_own() -> None:
    first = Ledger()
    first.add(turn("a", 1, Usage(input_tokens=10, cost_usd=0.5)))
    first.add(turn("a", 2, None))
    second = Ledger(attempt=2, earlier=msgspec.convert(msgspec.to_builtins(first.snapshot()), RunUsage))  # as usage.json reads
    second.add(turn("a", 3, Usage(input_tokens=5, cost_usd=0.25)))
    spent = second.snapshot()
    assert spent.total == Usage(input_tokens=15, cost_usd=0.75) and spent.turns == 3 and spent.unpriced_turns == 1
    assert spent.agents["a"] == spent.total and spent.attempt == 2
    assert [(a.n, a.turns, a.unpriced_turns, a.total) for a in spent.attempts] == [
        (1, 2, 1, Usage(input_tokens=10, cost_usd=0.5)),
        (2, 1, 0, Usage(input_tokens=5, cost_usd=0.25)),
    ]
    assert [t.attempt for t in spent.by_turn] == [1, 1, 2]
    assert spend_lines(spent)[1:4] == [
        "by attempt:",
        "  1: 10 in, $0.5000 over 2 turns (1 without a cost)",
        "  2: 5 in, $0.2500 over 1 turn",
    ]


def test_a_usage_json_written_before_attempts_were_kept_is_one_attempt() -> None:
    older = RunUsage(total=Usage(input_tokens=10, cost_usd=0.5), turns=2)
    spent = Ledger(attempt=2, earlier=older).snapshot()
    assert [(a.n, a.turns, a.total) for a in spent.attempts] == [(1, 2, older.total), (2, 0, None)]
    assert spent.total == older.total


@given(st.lists(st.tuples(st.integers(1, 3), st.integers(0, 1000)), max_size=30))
def test_the_runs_totals_are_the_sum_of_its_attempts(turns: list[tuple[int, int]]) -> None:
    ledger: Ledger | None = None
    for n in sorted({n for n, _ in turns} | {1}):
        ledger = Ledger(attempt=n, earlier=ledger.snapshot() if ledger is not None else None)
        for k, (attempt, tokens) in enumerate(turns):
            if attempt == n:
                ledger.add(turn("a", k, Usage(input_tokens=tokens)))
    assert ledger is not None
    spent = ledger.snapshot()
    assert spent.turns == sum(a.turns for a in spent.attempts) == len(turns)
    assert (spent.total.input_tokens if spent.total else 0) == sum(a.total.input_tokens for a in spent.attempts if a.total)
