"""The settings a turn is recorded with: the agent's, as `set` left them, unless its attempt (or an
operation) says it ran with others -- a fork's agent, whose played turns ran with their recorded
model and effort and whose real ones run with those the fork gives. Pure: `turn.step` alone."""

from __future__ import annotations

import math

from agentswf.engine import turn as t
from agentswf.engine.instant import Instant
from agentswf.engine.mail.words import StandingView
from agentswf.engine.outcomes import Turn
from agentswf.harnesses.base import AttemptEnding, AttemptResult, OperationResult
from agentswf.wire.teaching import Taught

WALL = 1_700_000_000.0


def at(loop: float) -> Instant:
    return Instant(loop, WALL + loop)


def opened() -> t.AgentState:
    return t.AgentState("a", "/run/a/wfa", True, math.inf, model="opus", effort="high")


def turn_ended(state: t.AgentState, call_id: str, result: AttemptResult) -> tuple[t.AgentState, Turn]:
    """Run turn `call_id` to a failed end with `result`: its record."""
    start = t.StartTurn(call_id=call_id, n=1, prompt="p", nudge_prompt="n", taught=Taught(str), deadline=math.inf)
    state, _ = t.step(state, t.TurnAsked(start, at(0)))
    state, _ = t.step(state, t.AttemptEnded(call_id, result, at(1)))
    state, effects = t.step(state, t.Settled(call_id, StandingView(), at(1)))
    (finished,) = [effect for effect in effects if isinstance(effect, t.Finished)]
    return state, finished.record


FAILED = AttemptEnding("failed", reason="no", retryable=False)


def test_a_turn_whose_attempt_says_nothing_is_recorded_with_the_agents_settings() -> None:
    _, record = turn_ended(opened(), "c1", AttemptResult(FAILED))
    assert (record.model, record.effort) == ("opus", "high")


def test_an_attempt_that_ran_with_other_settings_is_recorded_so_and_they_stay_the_agents() -> None:
    state, record = turn_ended(opened(), "c1", AttemptResult(FAILED, settings=("sonnet", None)))
    assert (record.model, record.effort) == ("sonnet", None)
    assert (state.model, state.effort) == ("sonnet", None)  # what the next record and `set` start from
    _, record = turn_ended(state, "c2", AttemptResult(FAILED))
    assert (record.model, record.effort) == ("sonnet", None)


def test_an_operation_that_ran_with_other_settings_is_recorded_so() -> None:
    op = t.StartOp(call_id="c1", n=1, kind="compaction", deadline=math.inf)
    state, _ = t.step(opened(), t.OpAsked(op, at(0)))
    result = OperationResult(AttemptEnding("exited"), session="s", settings=("haiku", "low"))
    state, effects = t.step(state, t.OpEnded("c1", result, at(1)))
    (finished,) = [effect for effect in effects if isinstance(effect, t.Finished)]
    assert (finished.record.model, finished.record.effort) == (state.model, state.effort) == ("haiku", "low")
