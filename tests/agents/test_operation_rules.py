"""The turn machine's rules for operations, pure: `turn.step` with no actor, no I/O.

Operations (compactions, sets, a fork's copy) wait their place in one queue with the turns;
a stopped agent starts nothing more and refuses what is asked after; every turn and
operation asked for is finished exactly once, and every record names the settings in force.
"""

from __future__ import annotations

import math
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from agentswf.engine import turn as t
from agentswf.engine.instant import Instant
from agentswf.engine.mail.words import StandingView
from agentswf.engine.outcomes import Answered, Cancelled, Failed, TimedOut
from agentswf.harnesses.base import AttemptEnding, AttemptResult, OperationResult
from agentswf.wire.teaching import Taught

from ..engine.test_turn import checked_step

KEY = "a"
NOBODY = StandingView()


def at(loop: float = 0.0) -> Instant:
    return Instant(loop, 1_700_000_000.0 + loop)


def fresh() -> t.AgentState:
    return t.AgentState(KEY, "/run/a/wfa", False, math.inf, {}, session="s1")


def turn(call_id: str, deadline: float = math.inf) -> t.StartTurn:
    return t.StartTurn(call_id=call_id, n=1, prompt="p", nudge_prompt="n", taught=Taught(str), deadline=deadline)


def op(call_id: str, kind: t.OpKind = "compaction", **fields: object) -> t.StartOp:
    return t.StartOp(call_id=call_id, n=1, kind=kind, deadline=math.inf, **fields)  # type: ignore[arg-type]


class Driver:
    """Plays the actor: answers TakeMail with no mail, and a StopTurn with its CLI gone."""

    def __init__(self) -> None:
        self.state = fresh()
        self.effects: list[t.Effect] = []

    def step(self, event: t.Event) -> list[t.Effect]:
        self.state, effects = checked_step(self.state, event)
        self.effects += effects
        for effect in effects:
            if isinstance(effect, t.TakeMail):
                self.step(t.MailTaken((), NOBODY, at()))
            elif isinstance(effect, t.StopTurn):
                self.step(t.Settled(effect.call_id, NOBODY, at()))
        return effects

    def finish_active(self) -> None:
        if self.state.op is not None:
            result = OperationResult(AttemptEnding("exited"), session="s2", summary="sum")
            self.step(t.OpEnded(self.state.op.op.call_id, result, at()))
        elif self.state.turn is not None and self.state.turn.phase is t.Phase.RUNNING:
            failed = AttemptResult(AttemptEnding("failed", reason="x"))
            self.step(t.AttemptEnded(self.state.turn.call_id, failed, at()))

    def finished(self) -> dict[str, object]:
        return {effect.call_id: effect.record for effect in self.effects if isinstance(effect, t.Finished)}

    def started(self) -> list[str]:
        """What began, in order: a turn's first attempt, an operation's CLI, a set's switch."""
        order: list[str] = []
        for effect in self.effects:
            if isinstance(effect, t.StartAttempt) and effect.call_id not in order:
                order.append(effect.call_id)
            elif isinstance(effect, t.RunOp):
                order.append(effect.op.call_id)
            elif isinstance(effect, t.Finished) and effect.record.kind == "set" and effect.record.answered:
                order.append(effect.call_id)
        return order


def test_an_operation_asked_during_a_turn_waits_and_runs_after_it():
    driver = Driver()
    driver.step(t.TurnAsked(turn("t1"), at()))
    assert driver.step(t.OpAsked(op("c1"), at())) == []
    assert driver.state.queue and driver.state.queue[0].call_id == "c1"
    driver.finish_active()
    [run] = [e for e in driver.effects if isinstance(e, t.RunOp)]
    assert run.op.call_id == "c1" and run.session == "s1"


def test_a_compaction_that_answers_takes_its_session_and_summary():
    driver = Driver()
    driver.step(t.OpAsked(op("c1"), at()))
    driver.finish_active()
    record = driver.finished()["c1"]
    assert record.outcome == Answered("sum") and record.kind == "compaction"
    assert driver.state.session == "s2" and driver.state.op is None


def test_a_compaction_that_fails_leaves_the_session_as_it_was():
    driver = Driver()
    driver.step(t.OpAsked(op("c1"), at()))
    driver.step(t.OpEnded("c1", OperationResult(AttemptEnding("failed", reason="nothing to compact"), session="s9"), at()))
    assert driver.finished()["c1"].outcome == Failed("nothing to compact")
    assert driver.state.session == "s1"


def test_a_compaction_past_its_deadline_times_out_once_its_cli_is_gone():
    driver = Driver()
    driver.step(t.OpAsked(t.StartOp(call_id="c1", n=1, kind="compaction", deadline=5.0), at()))
    assert t.ArmTimer("c1", t.Timer.DEADLINE, 5.0) in driver.effects
    driver.step(t.TimerFired("c1", t.Timer.DEADLINE, at(5.0)))
    assert isinstance(driver.finished()["c1"].outcome, TimedOut)
    driver.step(t.OpEnded("c1", OperationResult(AttemptEnding("exited"), session="late"), at(6.0)))  # too late: ignored
    assert driver.state.session == "s1"


def test_a_harness_that_cant_compact_fails_at_once_sending_nothing():
    driver = Driver()
    driver.step(t.TurnAsked(turn("t1"), at()))
    driver.step(t.OpAsked(op("c1", refusal="cursor can't"), at()))
    assert driver.finished()["c1"].outcome == Failed("cursor can't")
    assert not [e for e in driver.effects if isinstance(e, t.RunOp)]


def test_a_set_switches_what_later_records_name():
    driver = Driver()
    driver.step(t.OpAsked(op("s1", "set", model="m2", effort="high"), at()))
    assert t.SwitchSettings("m2", "high") in driver.effects
    driver.step(t.TurnAsked(turn("t1"), at()))
    driver.finish_active()
    record = driver.finished()["t1"]
    assert (record.model, record.effort) == ("m2", "high")


def test_a_fork_copy_answers_with_the_forks_key_and_the_new_session():
    driver = Driver()
    driver.step(t.OpAsked(op("f1", "fork", fork="b"), at()))
    driver.finish_active()
    record = driver.finished()["f1"]
    assert record.outcome == Answered("b") and record.session == "s2"
    assert driver.state.session == "s1"  # the parent keeps its own


def test_stop_cancels_the_turn_in_flight_and_what_is_queued_and_refuses_after():
    driver = Driver()
    driver.step(t.TurnAsked(turn("t1"), at()))
    driver.step(t.OpAsked(op("c1"), at()))
    driver.step(t.TurnAsked(turn("t2"), at()))
    driver.step(t.StopAsked("x1", "done with it", at()))
    finished = driver.finished()
    why = "the agent was stopped: done with it"
    assert finished["t1"].outcome == Cancelled(why)
    assert finished["c1"].outcome == Cancelled(why) and finished["t2"].outcome == Cancelled(why)
    driver.step(t.TurnAsked(turn("t3"), at()))
    driver.step(t.OpAsked(op("c2"), at()))
    driver.step(t.MailArrived(at()))
    assert [e for e in driver.effects if isinstance(e, t.RunOp)] == []
    assert [e.call_id for e in driver.effects if isinstance(e, t.StartAttempt)] == ["t1"]
    assert driver.finished()["t3"].outcome == Cancelled(f"{why}; it takes no more work")
    assert [r for r in driver.effects if isinstance(r, t.RecordTurnEnded) and r.record.kind == "stop"]


def test_stop_during_an_operation_stops_its_cli_and_it_settles_cancelled():
    driver = Driver()
    driver.step(t.OpAsked(op("c1"), at()))
    effects = driver.step(t.StopAsked("x1", "", at()))
    assert t.StopTurn("c1") in effects and t.HoldUntilSettled("c1") in effects
    assert driver.finished()["c1"].outcome == Cancelled("the agent was stopped")


ACTIONS = st.lists(st.sampled_from(["turn", "compaction", "set", "fork", "finish", "stop", "mail"]), max_size=25)


@settings(max_examples=300, deadline=None)
@given(ACTIONS)
def test_one_queue_in_order_each_finished_once_and_nothing_after_stop(actions):
    driver = Driver()
    asked: list[str] = []
    stopped_at: int | None = None
    for i, action in enumerate(actions):
        call_id = f"{action[0]}{i}"
        if action == "turn":
            driver.step(t.TurnAsked(turn(call_id), at()))
            asked.append(call_id)
        elif action in ("compaction", "set", "fork"):
            driver.step(t.OpAsked(op(call_id, action, effort="low" if action == "set" else None), at()))  # type: ignore[arg-type]
            asked.append(call_id)
        elif action == "finish":
            driver.finish_active()
        elif action == "mail":
            driver.step(t.MailArrived(at()))
        elif stopped_at is None:
            stopped_at = len(driver.effects)
            driver.step(t.StopAsked(call_id, "", at()))
        assert driver.state.turn is None or driver.state.op is None  # one thing at a time
    for _ in range(len(actions) + 1):
        driver.finish_active()
    started = driver.started()
    assert started == [call_id for call_id in asked if call_id in started]  # in the order asked
    finished = Counter(e.call_id for e in driver.effects if isinstance(e, t.Finished))
    assert set(finished) == set(asked) and all(count == 1 for count in finished.values())
    if stopped_at is not None:
        after = driver.effects[stopped_at:]
        assert not [e for e in after if isinstance(e, t.RunOp | t.OpenMessageTurn | t.TakeMail | t.SwitchSettings)]
        assert not [e for e in after if isinstance(e, t.StartAttempt)]
