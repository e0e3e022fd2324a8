"""Budgets: a turn that would start past one ends Failed without running, one test per kind.

The agents are scripted (agentswf.testing) and report a fixed usage per attempt, as a
CLI's last line would, so the spend is known; the engine between them is the real one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentswf
from agentswf import Budget, Failed, Usage, workflow
from agentswf.errors import DefinitionError
from agentswf.harnesses.base import Attempt, AttemptResult
from agentswf.testing.scripted import ScriptBook, ScriptedHarness, answer, hang
from agentswf.workflow.budgets import Spent, budget_flag, over_budget, parse_budget, raised, unreported

PER_ATTEMPT = Usage(input_tokens=100, output_tokens=50, cost_usd=0.25)


class Billed(ScriptedHarness):
    """A scripted agent whose every attempt reports `PER_ATTEMPT`."""

    async def run(self, attempt: Attempt) -> AttemptResult:
        played = await super().run(attempt)
        return AttemptResult(played.ending, usage=PER_ATTEMPT)


def _book(*keys: str) -> ScriptBook:
    return ScriptBook({key: answer("done") for key in keys})


async def _run(flow: Any, book: ScriptBook, tmp_path: Path, **options: Any) -> agentswf.RunResult:
    def billed(key: str, runtime: Any) -> Billed:
        book.harness_for(key, runtime)  # the book's own harness keeps count of what was played
        return Billed(key, book)

    result = await agentswf.run(flow, run_root=tmp_path, cwd=tmp_path, harnesses=billed, **options)
    book.check()
    return result


def _refusals(run_dir: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]
    return [line["fields"] for line in lines if line["message"] == "a budget stopped a turn"]


@workflow(name="three-turns", description="One agent, three turns, how each ended.")
async def three_turns(wf) -> list[str]:  # type: ignore[no-untyped-def]
    agent = await wf.agents.open("a", runtime="claude")
    kinds = []
    for _ in range(3):
        turn = await agent.run("Work.")
        kinds.append(turn.outcome.kind if turn.answered else f"{turn.outcome.kind}: {turn.outcome.reason}")
        if not turn.answered:
            assert isinstance(turn.outcome, Failed) and turn.outcome.retryable is False
    return kinds


async def test_a_turns_budget_stops_the_third_turn_without_running_it(tmp_path: Path) -> None:
    book = _book("a")
    result = await _run(three_turns, book, tmp_path, budget=Budget(turns=2))
    assert result.value == ["answered", "answered", "failed: the run's budget: 2 of 2 turns given"]
    assert book.played["a"].used == 2  # the third never reached the CLI
    assert _refusals(result.run_dir) == [{"agent": "a", "turn": 3, "budget": "run", "reason": "2 of 2 turns given"}]


async def test_a_tokens_budget_stops_the_turn_after_it_is_spent(tmp_path: Path) -> None:
    book = _book("a")
    result = await _run(three_turns, book, tmp_path, budget=Budget(tokens=300))
    assert result.value[:2] == ["answered", "answered"]  # 0, then 150 of 300 spent: they start
    assert result.value[2] == "failed: the run's budget: 300 of 300 tokens spent"
    assert book.played["a"].used == 2


@workflow(name="staged", description="A stage with a cost budget, then a turn outside it.")
async def staged(wf) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    agent = await wf.agents.open("a", runtime="claude")

    async def work() -> list[str]:
        return [(await agent.run("Work.")).outcome.kind for _ in range(3)]

    inside = await wf.stage("build", work, budget=Budget(cost_usd=0.5))
    after = await agent.run("Work again.")
    spent = wf.spent()
    return {
        "inside": inside,
        "after": after.outcome.kind,
        "stage": [spent.stages["build"].turns, spent.stages["build"].cost_usd],
        "run": [spent.run.turns, spent.run.tokens, spent.run.cost_usd],
    }


async def test_a_stages_cost_budget_stops_its_turns_and_not_the_runs(tmp_path: Path) -> None:
    book = _book("a")
    result = await _run(staged, book, tmp_path)
    assert result.value == {
        "inside": ["answered", "answered", "failed"],
        "after": "answered",
        "stage": [2, 0.5],
        "run": [3, 450, 0.75],
    }
    [refusal] = _refusals(result.run_dir)
    assert refusal["budget"] == "stage build" and refusal["reason"] == "$0.5000 of $0.5000 spent"


@workflow(name="grouped", description="A key group with a wall budget; another agent beside it.")
async def grouped(wf) -> list[str]:  # type: ignore[no-untyped-def]
    wf.budget("review", wall=0.2)
    style = await wf.agents.open("review:style", runtime="claude")
    fixer = await wf.agents.open("fixer", runtime="claude")
    first = await style.run("Review.")
    await anyio.sleep(0.25)
    late = await style.run("Review again.")
    other = await fixer.run("Fix.")
    return [first.outcome.kind, late.outcome.reason if not late.answered else "answered", other.outcome.kind]


async def test_a_key_groups_wall_budget_stops_its_agents_alone(tmp_path: Path) -> None:
    book = _book("review:style", "fixer")
    result = await _run(grouped, book, tmp_path)
    first, late, other = result.value
    assert first == "answered" and other == "answered"
    assert late.startswith("key group review's budget: ") and "of its 0.2s wall time passed" in late


@workflow(name="hung", description="A reviewer that never ends, under a wall budget.")
async def hung(wf) -> tuple[str, float]:  # type: ignore[no-untyped-def]
    wf.budget("review", wall=0.3)
    reviewer = await wf.agents.open("review:deep", runtime="claude")
    started = anyio.current_time()
    turn = await reviewer.run("Review.", timeout="1h")
    return turn.outcome.reason, anyio.current_time() - started


async def test_a_wall_budget_stops_a_turn_in_flight(tmp_path: Path) -> None:
    book = ScriptBook({"review:deep": hang()})
    result = await _run(hung, book, tmp_path)
    reason, took = result.value
    assert reason == "key group review's budget: its wall time passed while the turn ran"
    assert 0.2 < took < 5.0  # at the budget's end, not the turn's hour
    [stopped] = [json.loads(line) for line in (result.run_dir / "turns.jsonl").read_text().splitlines()]
    assert stopped["outcome"]["kind"] == "timed-out"  # the engine's account; the workflow's is the budget's
    lines = [json.loads(line) for line in (result.run_dir / "log.jsonl").read_text().splitlines()]
    assert [line["fields"]["budget"] for line in lines if line["message"] == "a budget stopped a turn in flight"] == [
        "group review"
    ]


def test_awf_run_budget_and_a_bad_one(tmp_path: Path) -> None:
    flows = tmp_path / "flows.py"
    flows.write_text(
        "from agentswf import workflow\n\n"
        "@workflow(name='twice', description='Two turns.')\n"
        "async def twice(wf):\n"
        "    agent = await wf.agents.open('a', runtime='shell:echo fine | \"$WFA\" result \"$WFA_CALL_ID\"')\n"
        "    return [(await agent.run('Say fine.')).outcome.kind for _ in range(2)]\n"
    )
    awf = [sys.executable, "-m", "agentswf", "run", str(flows)]
    done = subprocess.run([*awf, "--budget", "1turns,1h"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["answered", "failed"]
    bad = subprocess.run([*awf, "--budget", "5 apples"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "'5 apples' is not part of a budget" in bad.stderr


@pytest.mark.parametrize(
    "text, budget",
    [
        ("5usd,2h,200turns", Budget(cost_usd=5.0, wall=7200.0, turns=200)),
        ("$1.5", Budget(cost_usd=1.5)),
        ("200ktokens, 90s", Budget(tokens=200_000, wall=90.0)),
        ("1.5Mtokens", Budget(tokens=1_500_000)),
        ("1turn", Budget(turns=1)),
    ],
)
def test_parse_budget(text: str, budget: Budget) -> None:
    assert parse_budget(text) == budget


@pytest.mark.parametrize("text", ["", "5", "5eur", "1turns,2turns", "-1usd"])
def test_a_bad_budget_says_what_one_is(text: str) -> None:
    with pytest.raises(DefinitionError):
        parse_budget(text)


def test_a_budget_refuses_nonsense() -> None:
    with pytest.raises(DefinitionError):
        Budget(turns=-1)
    with pytest.raises(DefinitionError):
        Budget(wall="soon")


caps = st.none() | st.integers(0, 10)


@given(caps, caps, caps, st.integers(0, 12), st.integers(0, 12), st.integers(0, 12))
def test_over_budget_exactly_when_a_cap_is_reached(
    turns: int | None, tokens: int | None, cost: int | None, spent_turns: int, spent_tokens: int, spent_cost: int
) -> None:
    budget = Budget(turns=turns, tokens=tokens, cost_usd=None if cost is None else float(cost))
    spent = Spent(turns=spent_turns, tokens=spent_tokens, cost_usd=float(spent_cost))
    reached = (
        (turns is not None and spent_turns >= turns)
        or (tokens is not None and spent_tokens >= tokens)
        or (cost is not None and spent_cost >= cost)
    )
    assert (over_budget(budget, spent, 0.0) is not None) == reached


def test_what_earlier_attempts_spent_counts_toward_the_runs_groups_and_agents() -> None:
    from agentswf.engine.accounting import Ledger
    from agentswf.engine.outcomes import Answered, Turn
    from agentswf.workflow.budgets import Budgets

    ledger = Ledger()
    for key, kind in (("review:a", "turn"), ("review:b", "turn"), ("review:b", "compaction"), ("writer", "turn")):
        ledger.add(Turn(outcome=Answered("ok"), agent=key, call_id="c", n=1, started_at=0.0, ended_at=1.0, usage=PER_ATTEMPT, kind=kind))
    budgets = Budgets()
    budgets.run.budget = Budget(turns=4, wall=100)
    budgets.carry(ledger.snapshot(), seconds=60.0)
    spending = budgets.spending()
    assert (spending.run.turns, spending.run.tokens, spending.run.cost_usd) == (3, 600, 1.0)  # a compaction is no turn
    assert spending.run.seconds >= 60.0
    assert (spending.groups["review"].turns, spending.groups["review"].cost_usd) == (2, 0.75)
    assert spending.agents["writer"].turns == 1
    assert budgets.refusal("writer") is None  # 3 of 4 turns, 60 of 100 seconds
    later = Budgets()
    later.run.budget = Budget(wall=100)
    later.carry(ledger.snapshot(), seconds=100.0)
    refused = later.refusal("writer")
    assert refused is not None and refused[0] == "run" and "wall time passed" in refused[1]


@pytest.mark.parametrize(("text", "said"), [("2h,2h", "gives a wall time twice"), ("1usd,$2", "gives dollars twice")])
def test_a_limit_given_twice_is_named_as_written(text: str, said: str) -> None:
    with pytest.raises(DefinitionError, match=said):
        parse_budget(text)


maybe_cost = st.none() | st.floats(0, 1000, allow_nan=False).map(lambda dollars: round(dollars, 4))
maybe_wall = st.none() | st.integers(1, 10 * 86400)


@given(caps, caps, maybe_cost, maybe_wall, st.integers(0, 12), st.integers(0, 12), st.floats(0, 2000), st.floats(0, 20 * 86400))
def test_a_spent_budget_is_raised_just_where_it_ran_out_and_lets_the_next_turn_start(
    turns: int | None, tokens: int | None, cost: float | None, wall: int | None,
    spent_turns: int, spent_tokens: int, spent_cost: float, seconds: float,
) -> None:
    budget = Budget(turns=turns, tokens=tokens, cost_usd=cost, wall=wall)
    spent = Spent(turns=spent_turns, tokens=spent_tokens, cost_usd=spent_cost, seconds=seconds)
    more = raised(budget, spent)
    assert (more is None) == (over_budget(budget, spent, seconds) is None)
    if more is not None:
        assert over_budget(more, spent, seconds) is None  # a continue under it gives its next turn
        for name in ("turns", "tokens", "cost_usd", "wall"):
            cap, larger = getattr(budget, name), getattr(more, name)
            assert (cap is None) == (larger is None)
            assert cap is None or larger >= cap  # never lower, and a cap not reached is as it was
        assert budget_flag(parse_budget(budget_flag(more))) == budget_flag(more)  # what the go-on line says, read back


@given(caps, caps, maybe_cost, maybe_wall)
def test_a_budget_as_a_flag_reads_back_as_itself(turns: int | None, tokens: int | None, cost: float | None, wall: int | None) -> None:
    if turns is None and tokens is None and cost is None and wall is None:
        return  # no budget: no flag
    budget = Budget(turns=turns, tokens=tokens, cost_usd=cost, wall=None if wall is None else float(wall))
    assert parse_budget(budget_flag(budget)) == budget


def test_a_spent_budget_is_raised_to_twice_the_larger_of_its_cap_and_the_spend() -> None:
    budget = Budget(turns=3, cost_usd=0.5, wall="1h")
    more = raised(budget, Spent(turns=4, tokens=0, cost_usd=0.75, seconds=10))
    assert more == Budget(turns=8, cost_usd=1.5, wall="1h")
    assert budget_flag(more) == "1.5usd,8turns,1h"
    assert raised(Budget(wall="1h"), Spent(seconds=3601.5)) == Budget(wall=7260)  # up to the minute
    assert raised(budget, Spent(turns=2, cost_usd=0.1)) is None


def test_a_cap_a_turn_of_unknown_spend_leaves_unchecked_stops_the_next_turn_unless_it_counts() -> None:
    unknown = Spent(turns=1, unknown_tokens=1, unknown_cost=1)
    assert over_budget(Budget(tokens=1000), unknown, 0) == (
        "1 turn reported no tokens, so its tokens cap can't be checked "
        "(Budget(unknown='count') counts such a turn as spending none)"
    )
    assert "2 turns reported no cost" in (over_budget(Budget(cost_usd=5), Spent(unknown_cost=2), 0) or "")
    assert over_budget(Budget(tokens=1000, unknown="count"), unknown, 0) is None
    assert over_budget(Budget(turns=5, wall=60), unknown, 0) is None  # no cap on spend: nothing to check
    assert over_budget(Budget(cost_usd=5), Spent(unknown_tokens=1), 0) is None  # its cost was known
    assert raised(Budget(tokens=1000), unknown) == Budget(tokens=1000, unknown="count")  # to go on: count them
    assert parse_budget("5usd,unknown=count") == Budget(cost_usd=5.0, unknown="count")
    assert budget_flag(Budget(cost_usd=5.0, unknown="count")) == "5.0usd,unknown=count"
    assert parse_budget(budget_flag(Budget(tokens=9, unknown="count"))) == Budget(tokens=9, unknown="count")
    with pytest.raises(DefinitionError):
        Budget(tokens=10, unknown="ignore")  # type: ignore[arg-type]


def test_which_turns_leave_their_spend_unknown() -> None:
    def turn(outcome: Any, usage: Usage | None, kind: str = "turn") -> Any:
        return agentswf.Turn(outcome=outcome, agent="a", call_id="c", n=1, started_at=0.0, ended_at=1.0, usage=usage, kind=kind)

    answered = agentswf.Answered(value="ok")
    assert unreported(turn(answered, None)) == (True, True)
    assert unreported(turn(answered, Usage(input_tokens=10, output_tokens=2))) == (False, True)  # priced nowhere
    assert unreported(turn(answered, Usage(model="m"))) == (True, True)  # the fields renamed away
    assert unreported(turn(answered, Usage(input_tokens=1, output_tokens=1, cost_usd=0.01))) == (False, False)
    assert unreported(turn(Failed(reason="deadline"), None)) == (False, False)  # cut short: may not have got to it
    assert unreported(turn(answered, None, kind="compaction")) == (False, False)  # an operation
