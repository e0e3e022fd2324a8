"""The settings a turn is recorded with: the agent's, as `set` left them, unless its harness says it
runs with others as the attempt (or operation) starts (`RunsWith`: a fork's agent switching to the
settings given), or its result says it ran with others (a played turn, with its recorded model and
effort). Pure: `turn.step` alone."""

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


def test_what_an_attempt_runs_with_as_it_starts_is_the_record_of_a_turn_that_never_hears_back() -> None:
    start = t.StartTurn(call_id="c1", n=1, prompt="p", nudge_prompt="n", taught=Taught(str), deadline=5.0)
    state, _ = t.step(opened(), t.TurnAsked(start, at(0)))
    state, effects = t.step(state, t.RunsWith("c1", "sonnet", "low"))
    assert effects == [] and (state.model, state.effort) == ("sonnet", "low")
    state, _ = t.step(state, t.TimerFired("c1", t.Timer.DEADLINE, at(5)))  # its attempt is stopped: it never reports
    state, effects = t.step(state, t.Settled("c1", StandingView(), at(5)))
    (finished,) = [effect for effect in effects if isinstance(effect, t.Finished)]
    assert (finished.record.outcome.kind, finished.record.model, finished.record.effort) == ("timed-out", "sonnet", "low")
