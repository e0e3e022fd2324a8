"""Budgets: caps on what a run, a stage or a key group may spend, checked before each turn starts.

A `Budget` caps dollars, tokens (input and output), turns and wall time; the run takes one
(`agentswf.run(..., budget=…)`, `awf run --budget '5usd,2h,200turns'`), a stage one
(`wf.stage(name, work, budget=…)`), and a key group one (`wf.budget("review", …)`: every
agent whose key is `review` or starts `review:`). A turn that would start with any budget
over which it falls spent (or its time passed) does not start: it ends
`Failed(reason="budget <scope>: …", retryable=False)` at once, without running the CLI, and
a line in the run's log says which budget stopped which turn. A turn still running when a wall
budget runs out is stopped then, and ends the same way (`Budgets.wall_left` bounds its deadline).
The workflow decides what next; `wf.spent()` tells it where each scope stands.

What is counted is what the run's turns reported (`Turn.usage`), a turn's cost where its CLI
or the pricing gave one: the turns the workflow gives, the turns mail starts (in the stage
open when they end; a budget doesn't stop one from starting, as the workflow didn't give it,
but it counts toward every budget it falls under) and the operations (compaction, …), whose
spend counts but which are no turns. A continued run's budgets go on from what its earlier
attempts spent (`carry`): the run's and each key group's spend, and the run's wall time is the
time its attempts ran (an attempt killed before it recorded its end counts until its last turn
ended). A stage's budget counts what the stage spends in this attempt. `over_budget` is the
pure decision.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from time import monotonic
from typing import Any, Literal

import msgspec

from ..engine.accounting import RunUsage, earlier_attempts
from ..engine.clock import wall
from ..engine.outcomes import Failed, Turn, Usage
from ..engine.record.attempts import AttemptRecord
from ..errors import DefinitionError
from ..wire.common import parse_duration
from .durations import Duration, to_seconds

_TOKEN_MULTIPLIERS = {"": 1, "k": 1_000, "m": 1_000_000}
_BUDGET_PART = re.compile(
    r"^(?:\$(?P<dollars>\d+(?:\.\d+)?)|(?P<usd>\d+(?:\.\d+)?)usd"
    r"|(?P<tokens>\d+(?:\.\d+)?)(?P<scale>[km]?)tokens?|(?P<turns>\d+)turns?|unknown=(?P<unknown>count|fail))$"
)


Unknown = Literal["count", "fail"]
UNKNOWN_CHOICES: tuple[Unknown, ...] = ("count", "fail")


class Budget(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Caps on spend: dollars, tokens (input and output), turns, wall time (`"2h"` or seconds).

    A cap left None is no cap. The run's wall time counts from its start, a stage's from the
    stage's, a key group's from `wf.budget`. `unknown` is what a turn of unknown spend does to a
    dollar or token cap: a turn of an agent CLI that reports its spend, run to its end, that
    reported none. "fail": the cap can't be checked, and the next turn doesn't start, saying so;
    "count": it counts as nothing spent.
    """

    cost_usd: float | None = None
    tokens: int | None = None
    turns: int | None = None
    wall: Duration | None = None
    unknown: Unknown = "fail"

    def __post_init__(self) -> None:
        if self.unknown not in UNKNOWN_CHOICES:
            raise DefinitionError(f"a budget's unknown must be 'count' or 'fail', not {self.unknown!r}")
        for name in ("cost_usd", "tokens", "turns"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
                raise DefinitionError(f"a budget's {name} must be a number of at least 0, not {value!r}")
        if self.wall is not None:
            to_seconds(self.wall, what="a budget's wall")


_LIMIT_NAMES = {"cost_usd": "dollars", "tokens": "tokens", "turns": "turns", "wall": "a wall time", "unknown": "unknown"}


def group_budget(group: str, budget: Budget | None, limits: dict[str, Any]) -> Budget:
    """What `wf.budget(group, budget, **limits)` caps, checked: a `Budget` or its fields, and a key group."""
    if budget is None:
        budget = Budget(**limits)
    elif limits:
        raise DefinitionError("wf.budget takes a Budget or its fields, not both")
    if not isinstance(group, str) or not group or ":" in group:
        raise DefinitionError(f"{group!r} is not a key group: the part of a key before ':'")
    return budget


def parse_budget(text: str) -> Budget:
    """`'5usd,2h,200turns,1.5mtokens'` (any of them, in any order) as a Budget; `$5` is 5usd."""
    limits: dict[str, Any] = {}
    value: Any
    for part in (word.strip().lower() for word in text.split(",")):
        match = _BUDGET_PART.match(part)
        name = "wall"
        if match and (match["dollars"] or match["usd"]):
            name, value = "cost_usd", float(match["dollars"] or match["usd"])
        elif match and match["tokens"]:
            name, value = "tokens", round(float(match["tokens"]) * _TOKEN_MULTIPLIERS[match["scale"]])
        elif match and match["turns"]:
            name, value = "turns", int(match["turns"])
        elif match and match["unknown"]:
            name, value = "unknown", match["unknown"]
        else:
            seconds = parse_duration(part)
            if seconds is None:
                raise DefinitionError(
                    f"{part!r} is not part of a budget: give dollars (5usd), tokens (200ktokens), "
                    f"turns (200turns) or a wall time (2h), separated by commas (and unknown=count to count "
                    f"a turn that reported no spend as none)"
                )
            value = seconds
        if name in limits:
            raise DefinitionError(f"the budget {text!r} gives {_LIMIT_NAMES[name]} twice")
        limits[name] = value
    return Budget(**limits)


class Spent(msgspec.Struct, kw_only=True):
    """What one scope spent: turns given, tokens and dollars they reported, seconds since it began."""

    turns: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    unknown_tokens: int = 0  # turns that ran to their end on a CLI that reports its spend, and reported no tokens
    unknown_cost: int = 0  # … no cost


class Spending(msgspec.Struct, frozen=True, kw_only=True):
    """`wf.spent()`: the run's spend, each stage's, each key group's and each agent's."""

    run: Spent
    stages: dict[str, Spent]
    groups: dict[str, Spent]
    agents: dict[str, Spent]


def group_of(key: str) -> str:
    """An agent's key group: its key before the first `:` (`review:style` is in `review`)."""
    return key.split(":", 1)[0]


def _reached(budget: Budget, spent: Spent, seconds: float) -> list[tuple[str, str]]:
    """Each cap of `budget` that `spent` after `seconds` has reached: its field's name, and why."""
    found = []
    if budget.turns is not None and spent.turns >= budget.turns:
        found.append(("turns", f"{spent.turns} of {budget.turns} turns given"))
    if budget.tokens is not None and spent.tokens >= budget.tokens:
        found.append(("tokens", f"{spent.tokens} of {budget.tokens} tokens spent"))
    if budget.cost_usd is not None and spent.cost_usd >= budget.cost_usd:
        found.append(("cost_usd", f"${spent.cost_usd:.4f} of ${budget.cost_usd:.4f} spent"))
    if budget.wall is not None and seconds >= (wall := to_seconds(budget.wall)):
        found.append(("wall", f"{seconds:.1f}s of its {wall:g}s wall time passed"))
    if budget.unknown == "fail":  # a cap that can't be checked: "unknown", which raising no cap mends
        for cap, count, what in ((budget.tokens, spent.unknown_tokens, "tokens"), (budget.cost_usd, spent.unknown_cost, "cost")):
            if cap is not None and count:
                found.append(("unknown", f"{_turns(count)} reported no {what}, so its {what} cap can't be checked "
                                         "(Budget(unknown='count') counts such a turn as spending none)"))
    return found


def _turns(count: int) -> str:
    return "1 turn" if count == 1 else f"{count} turns"


def over_budget(budget: Budget, spent: Spent, seconds: float) -> str | None:
    """Why a turn may not start under `budget` with `spent` after `seconds`, or None if it may."""
    found = _reached(budget, spent, seconds)
    return found[0][1] if found else None


RAISE_FACTOR = 2  # a budget raised to go on: this many times the larger of its cap and what was spent


def raised(budget: Budget, spent: Spent) -> Budget | None:
    """The budget a run that has spent `spent` (its `seconds` its wall time) needs to go on: each cap
    it reached raised to RAISE_FACTOR times the larger of the cap and the spend (dollars up to the
    cent, a wall time up to the minute, at least one of each), the others as they were, and a cap
    a turn of unknown spend left unchecked counting it (`unknown="count"`); None when it reached none."""
    reached = [name for name, _ in _reached(budget, spent, spent.seconds)]
    if not reached:
        return None
    more: dict[str, Any] = {}
    if "turns" in reached and budget.turns is not None:
        more["turns"] = max(1, RAISE_FACTOR * max(budget.turns, spent.turns))
    if "tokens" in reached and budget.tokens is not None:
        more["tokens"] = max(1, RAISE_FACTOR * max(budget.tokens, spent.tokens))
    if "cost_usd" in reached and budget.cost_usd is not None:
        more["cost_usd"] = max(0.01, math.ceil(RAISE_FACTOR * max(budget.cost_usd, spent.cost_usd) * 100) / 100)
    if "wall" in reached and budget.wall is not None:
        more["wall"] = max(60, math.ceil(RAISE_FACTOR * max(to_seconds(budget.wall), spent.seconds) / 60) * 60)
    if "unknown" in reached:  # no cap raised mends one that can't be checked: counting what went unreported does
        more["unknown"] = "count"
    return msgspec.structs.replace(budget, **more)


def budget_flag(budget: Budget) -> str:
    """`budget` as `--budget` takes it (`parse_budget` reads it back): `'5usd,200ktokens,40turns,2h'`."""
    parts = []
    if budget.cost_usd is not None:
        parts.append(f"{Decimal(repr(float(budget.cost_usd))):f}usd")  # as given, never as 1e-05
    if budget.tokens is not None:  # counts are whole: a cap of 2.5 is reached where one of 3 is
        parts.append(f"{math.ceil(budget.tokens)}tokens")
    if budget.turns is not None:
        parts.append(f"{math.ceil(budget.turns)}turns")
    if budget.wall is not None:
        parts.append(_duration_flag(to_seconds(budget.wall)))
    if budget.unknown != "fail":
        parts.append(f"unknown={budget.unknown}")
    return ",".join(parts)


def _duration_flag(seconds: float) -> str:
    whole = math.ceil(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole % size == 0:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def _tokens(usage: Usage | None) -> int:
    return 0 if usage is None else (usage.input_tokens or 0) + (usage.output_tokens or 0)


RAN_TO_ITS_END = ("answered", "unanswered")  # a turn whose CLI exited as it does: it reported its spend, if it reports any


def unreported(turn: Turn[Any]) -> tuple[bool, bool]:
    """Whether a turn of an agent CLI that reports its spend left its tokens, and its cost, unknown:
    a turn (not an operation) that ran to its end. One cut short (timed out, failed, cancelled)
    may not have got to reporting, and is counted as what it reported."""
    if turn.kind != "turn" or turn.outcome.kind not in RAN_TO_ITS_END:
        return False, False
    usage = turn.usage
    if usage is None:
        return True, True
    return usage.input_tokens is None and usage.output_tokens is None, usage.cost_usd is None


def ran_seconds(attempts: Iterable[AttemptRecord], spent: RunUsage | None) -> float:
    """The seconds `attempts` ran, the run's wall time: each to its recorded end, or one killed
    before it recorded it to the end of its last turn (`spent`, the run's usage.json, says when)."""
    last_turn = {attempt.n: attempt.last_ended_at for attempt in spent.attempts} if spent is not None else {}
    seconds = 0.0
    for attempt in attempts:
        ended = attempt.ended_at if attempt.ended_at is not None else last_turn.get(attempt.n)
        if ended is not None:
            seconds += max(0.0, ended - attempt.started_at)
    return seconds


def spent_before(spent: RunUsage, attempt: int, seconds: float) -> Spent:
    """The run's spend in its attempts before `attempt`, from its usage.json (which `attempt` may have
    added to since); `seconds` is the time they ran."""
    earlier = earlier_attempts(spent, attempt)
    return Spent(
        turns=sum(turn.kind == "turn" and turn.attempt < attempt for turn in spent.by_turn),
        tokens=sum(_tokens(each.total) for each in earlier),
        cost_usd=sum((each.total.cost_usd or 0.0) for each in earlier if each.total is not None),
        seconds=seconds,
    )


def carried(spent: RunUsage, seconds: float) -> tuple[Spent, dict[str, Spent], dict[str, Spent]]:
    """What earlier attempts spent, as the run's, each key group's and each agent's `Spent`:
    `spent` is the run's usage as they left it; `seconds` the time they ran."""
    turns: dict[str, int] = {}
    for turn in spent.by_turn:
        if turn.kind == "turn":
            turns[turn.agent] = turns.get(turn.agent, 0) + 1

    def of(usage: Usage | None, count: int, wall: float = 0.0) -> Spent:
        cost = usage.cost_usd if usage is not None else None
        return Spent(turns=count, tokens=_tokens(usage), cost_usd=cost or 0.0, seconds=wall)

    groups: dict[str, int] = {}
    for agent, count in turns.items():
        groups[group_of(agent)] = groups.get(group_of(agent), 0) + count
    return (
        of(spent.total, sum(turns.values()), seconds),
        {name: of(usage, groups.get(name, 0)) for name, usage in spent.groups.items()},
        {name: of(usage, turns.get(name, 0)) for name, usage in spent.agents.items()},
    )


def _whose(scope: str) -> str:
    """A budget's scope as its owner, for a reason a person reads: `the run's`, `stage build's`."""
    return "the run's" if scope == "run" else f"{scope.replace('group ', 'key group ', 1)}'s"


@dataclass
class _Scope:
    budget: Budget | None = None
    spent: Spent = field(default_factory=Spent)
    began: float = 0.0  # on the Budgets' clock, which sets it


@dataclass
class Budgets:
    """The run's budgets and what each scope spent; the workflow's side alone reads and writes it.

    `clock` gives the seconds wall budgets count in: the event loop's clock locally (virtual under a
    virtual clock), workflow time on Temporal (the same on every replay); by default the process's
    monotonic clock."""

    log: Callable[..., None] = lambda message, **fields: None
    run: _Scope = field(default_factory=_Scope)
    stages: dict[str, _Scope] = field(default_factory=dict)
    groups: dict[str, _Scope] = field(default_factory=dict)
    agents: dict[str, _Scope] = field(default_factory=dict)
    stage: str | None = None  # the stage open now
    clock: Callable[[], float] = monotonic
    measured: dict[str, str] = field(default_factory=dict)  # agents on a CLI that reports its spend: key -> "claude 2.1.332"
    unmeasured_told: bool = False  # a turn of one that reported no usage was warned of (once a run)

    def __post_init__(self) -> None:
        self.run.began = self.clock()

    def carry(self, spent: RunUsage, seconds: float) -> None:
        """A continued run's: what its earlier attempts spent counts toward the run's budget, and
        each key group's and agent's; `seconds` is the time they ran."""
        run, groups, agents = carried(spent, seconds)
        self.run.spent, self.run.began = run, self.run.began - seconds
        for scopes, found in ((self.groups, groups), (self.agents, agents)):
            for name, earlier in found.items():
                scopes[name] = _Scope(spent=earlier, began=self.clock())

    def enter_stage(self, name: str, budget: Budget | None) -> None:
        self.stage = name
        self.stages[name] = _Scope(budget, began=self.clock())

    def leave_stage(self) -> None:
        self.stage = None

    def limit_group(self, group: str, budget: Budget) -> None:
        scope = self.groups.setdefault(group, _Scope(began=self.clock()))
        scope.budget, scope.began = budget, self.clock()

    def _budgeted(self, key: str) -> list[tuple[str, _Scope]]:
        """The scopes a turn of `key` given now counts toward that have a budget, by name."""
        scopes = [("run", self.run)]
        if self.stage is not None:
            scopes.append((f"stage {self.stage}", self.stages[self.stage]))
        if group_of(key) in self.groups:
            scopes.append((f"group {group_of(key)}", self.groups[group_of(key)]))
        return [(name, scope) for name, scope in scopes if scope.budget is not None]

    def refusal(self, key: str) -> tuple[str, str] | None:
        """(the budget's scope, why) if a turn of `key` may not start now, else None."""
        now = self.clock()
        for name, scope in self._budgeted(key):
            assert scope.budget is not None
            why = over_budget(scope.budget, scope.spent, now - scope.began)
            if why is not None:
                return name, why
        return None

    def wall_left(self, key: str) -> tuple[float, str]:
        """The seconds left before the first wall budget of a turn of `key` given now runs out
        (infinite without one), and that budget's scope: a turn still running then is stopped."""
        now, left, which = self.clock(), math.inf, ""
        for name, scope in self._budgeted(key):
            assert scope.budget is not None
            if scope.budget.wall is not None:
                remaining = to_seconds(scope.budget.wall) - (now - scope.began)
                if remaining < left:
                    left, which = remaining, name
        return left, which

    def stopped_turn(self, turn: Turn[Any], scope: str) -> Turn[Any]:
        """A turn its wall budget stopped in flight: it ended timed out at the budget's end, and
        ends for the workflow as a turn past the budget does."""
        self.log("a budget stopped a turn in flight", agent=turn.agent, turn=turn.n, budget=scope, reason="wall time passed")
        outcome = Failed(reason=f"{_whose(scope)} budget: its wall time passed while the turn ran", retryable=False)
        return msgspec.structs.replace(turn, outcome=outcome)

    def refused_turn(self, key: str, n: int, call_id: str, refusal: tuple[str, str]) -> Turn[Any]:
        """The turn a budget did not let start, and its line in the run's log."""
        scope, why = refusal
        self.log("a budget stopped a turn", agent=key, turn=n, budget=scope, reason=why)
        now = wall()
        outcome = Failed(reason=f"{_whose(scope)} budget: {why}", retryable=False)
        return Turn(outcome=outcome, agent=key, call_id=call_id, n=n, started_at=now, ended_at=now)

    def _scopes(self, key: str, stage: str | None) -> list[_Scope]:
        now = self.clock()
        scopes = [self.run, self.groups.setdefault(group_of(key), _Scope(began=now)),
                  self.agents.setdefault(key, _Scope(began=now))]
        if stage is not None and stage in self.stages:
            scopes.append(self.stages[stage])
        return scopes

    def begin(self, key: str, stage: str | None) -> None:
        """A turn of `key` starts: it counts toward the turns of its scopes at once, so turns
        started side by side can't all pass a turn budget one of them fills."""
        for scope in self._scopes(key, stage):
            scope.spent.turns += 1

    def counted(self, turn: Turn[Any]) -> None:
        """A turn the workflow didn't give ended (mail's, or an operation): its spend counts toward
        the scopes of its agent and of the stage open now, and a turn (no operation) as a turn."""
        if turn.kind == "turn":
            for scope in self._scopes(turn.agent, self.stage):
                scope.spent.turns += 1
        self.spend(turn.agent, self.stage, turn)

    def spend(self, key: str, stage: str | None, turn: Turn[Any]) -> None:
        """A turn of `key` ended: its tokens and cost count toward its scopes, and what it left unknown."""
        tokens = _tokens(turn.usage)
        cost = turn.usage.cost_usd if turn.usage is not None else None
        no_tokens, no_cost = unreported(turn) if key in self.measured else (False, False)
        for scope in self._scopes(key, stage):
            scope.spent.tokens += tokens
            scope.spent.cost_usd += cost or 0.0
            scope.spent.unknown_tokens += no_tokens
            scope.spent.unknown_cost += no_cost
        if no_tokens and not self.unmeasured_told:
            self.unmeasured_told = True
            self.log(f"{self.measured[key]} gave no usage for this turn; cost and tokens unknown", agent=key, turn=turn.n)

    def spending(self) -> Spending:
        now = self.clock()

        def view(scope: _Scope) -> Spent:
            return msgspec.structs.replace(scope.spent, seconds=now - scope.began)

        return Spending(
            run=view(self.run),
            stages={name: view(scope) for name, scope in self.stages.items()},
            groups={name: view(scope) for name, scope in self.groups.items()},
            agents={name: view(scope) for name, scope in self.agents.items()},
        )
