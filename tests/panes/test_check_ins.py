"""The check-in rules of `turn.step`, where the harness confirms delivery (a claude pane).

A quiet interval after the TUI goes idle, then one check-in (the nudge prompt and the fixed
deadline); its response window starts only once the model received it; a wait granted
permits another check-in; a check-in with neither a result nor a wait ends `unanswered`.
"""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from agentswf.engine import turn as t
from agentswf.engine.outcomes import Unanswered
from agentswf.wire import ResultRequest, WaitingRequest

from ..engine.test_turn import GOOD, NOBODY, WALL, at, checked_step, exited, of, response, start

LIVENESS = t.Liveness(quiet=30.0, response=120.0)


def checked(deadline: float = 1000.0) -> t.AgentState:
    state = t.AgentState("a", "/run/a/wfa", True, math.inf, {}, liveness=LIVENESS)
    state, _ = checked_step(state, t.TurnAsked(start(deadline=deadline), at(0)))
    return state


def idle(state: t.AgentState, when: float) -> tuple[t.AgentState, list[t.Effect]]:
    """The attempt ended (the TUI is idle) and there was no mail."""
    state, _ = checked_step(state, t.AttemptEnded("c1", exited(), at(when)))
    return checked_step(state, t.MailTaken((), NOBODY, at(when)))


def checked_in(state: t.AgentState, when: float) -> tuple[t.AgentState, list[t.Effect]]:
    state, _ = idle(state, when)
    return checked_step(state, t.TimerFired("c1", t.Timer.QUIET, at(when + LIVENESS.quiet)))


def test_the_defaults_are_the_liveness_policys():
    assert (t.DEFAULT_LIVENESS.quiet, t.DEFAULT_LIVENESS.response) == (30.0, 120.0)


def test_an_idle_tui_gets_one_check_in_after_the_quiet_interval_restating_the_deadline():
    state, effects = idle(checked(), 5)
    assert effects == [t.ArmTimer("c1", t.Timer.QUIET, 35.0)] and state.turn.phase is t.Phase.QUIET
    state, effects = checked_step(state, t.TimerFired("c1", t.Timer.QUIET, at(35)))
    (attempt,) = of(effects, t.StartAttempt)
    assert attempt.nudge and attempt.prompt == t.CheckIn("nudge c1", int((WALL + 1000) * 1000))
    assert state.turn.check_ins == 1


def test_the_quiet_interval_never_passes_the_deadline():
    _, effects = idle(checked(deadline=20.0), 5)
    assert effects == [t.ArmTimer("c1", t.Timer.QUIET, 20.0)]


def test_the_response_window_starts_at_receipt_and_ends_the_turn_unanswered():
    state, _ = checked_in(checked(), 5)
    assert not of(checked_step(state, t.TimerFired("c1", t.Timer.RESPONSE, at(200)))[1], t.StopTurn)  # nothing armed yet
    state, effects = checked_step(state, t.DeliveryReceived("c1", at(50)))
    assert effects == [t.ArmTimer("c1", t.Timer.RESPONSE, 170.0)]
    assert checked_step(state, t.DeliveryReceived("c1", at(60)))[1] == []  # once
    state, effects = checked_step(state, t.TimerFired("c1", t.Timer.RESPONSE, at(170)))
    assert of(effects, t.StopTurn) and state.turn.outcome == Unanswered(t.CHECK_IN_UNANSWERED)


def test_a_check_in_the_tui_finishes_without_a_result_or_a_wait_is_unanswered():
    state, _ = checked_in(checked(), 5)
    state, effects = idle(state, 40)
    assert of(effects, t.StopTurn) and state.turn.outcome == Unanswered(t.CHECK_IN_UNANSWERED)


def waiting(state: t.AgentState, when: float, timeout_ms: int | None = None) -> tuple[t.AgentState, list[t.Effect]]:
    request = WaitingRequest(version=1, call_id="c1", reason="the build runs", timeout_ms=timeout_ms)
    return checked_step(state, t.WaitingAsked(request, NOBODY, None, at(when)))


def test_a_wait_holds_off_the_next_check_in_and_then_permits_one():
    state, _ = checked_in(checked(), 5)
    state, _ = checked_step(state, t.DeliveryReceived("c1", at(36)))
    state, effects = waiting(state, 37)
    assert response(effects).value == {"wait_until_ms": int((WALL + 37 + 120) * 1000), "deadline_ms": int((WALL + 1000) * 1000)}
    assert checked_step(state, t.TimerFired("c1", t.Timer.RESPONSE, at(156)))[1] == []  # the wait holds the window off
    state, effects = idle(state, 38)
    assert effects == [t.ArmTimer("c1", t.Timer.WAIT, 157.0)] and state.turn.phase is t.Phase.WAITING
    state, effects = checked_step(state, t.TimerFired("c1", t.Timer.WAIT, at(157)))
    (attempt,) = of(effects, t.StartAttempt)
    assert isinstance(attempt.prompt, t.CheckIn) and state.turn.check_ins == 2 and not state.turn.waited
    state, effects = checked_step(state, t.ResultAsked(ResultRequest(version=1, call_id="c1", args=GOOD), NOBODY, None, at(160)))
    assert of(effects, t.RecordAnswer)


def test_a_wait_running_to_the_deadline_ends_the_turn_timed_out():
    state, _ = checked_in(checked(deadline=100.0), 5)
    state, effects = waiting(state, 40, timeout_ms=600_000)
    assert response(effects).value["wait_until_ms"] == int((WALL + 100) * 1000)
    state, _ = idle(state, 41)
    state, _ = checked_step(state, t.TimerFired("c1", t.Timer.DEADLINE, at(100)))
    assert state.turn.outcome.kind == "timed-out"


def test_without_nudges_an_idle_tui_is_unanswered_with_no_check_in():
    state = t.AgentState("a", "/run/a/wfa", True, math.inf, {}, liveness=LIVENESS)
    state, _ = checked_step(state, t.TurnAsked(start(nudge=False), at(0)))
    state, effects = idle(state, 5)
    assert not of(effects, t.StartAttempt) and state.turn.outcome.kind == "unanswered"


def test_where_delivery_isnt_confirmed_the_older_rule_holds():
    state, _ = checked_step(t.AgentState("a", "/run/a/wfa", True, math.inf, {}), t.TurnAsked(start(), at(0)))
    state, effects = idle(state, 5)
    assert of(effects, t.StartAttempt)[0].prompt == "nudge c1"  # at once, and once
    state, _ = idle(state, 6)
    assert state.turn.outcome.kind == "unanswered" and "after a nudge" in state.turn.outcome.reason


@given(st.lists(st.sampled_from(["idle", "quiet", "received", "response", "wait", "wait-ends"]), max_size=30))
def test_check_ins_never_overlap_and_only_a_wait_earns_another(moves):
    """Whatever happens, at most one check-in runs at a time, and each after the first follows a wait."""
    state, clock = checked(deadline=math.inf), 0.0
    waits = 0
    for move in moves:
        clock += 1
        turn = state.turn
        if turn is None or turn.phase is t.Phase.ENDING:
            break
        before = turn.check_ins
        if move == "idle" and turn.phase is t.Phase.RUNNING:
            state, _ = idle(state, clock)
        elif move == "quiet":
            state, _ = checked_step(state, t.TimerFired("c1", t.Timer.QUIET, at(clock + LIVENESS.quiet)))
        elif move == "received":
            state, _ = checked_step(state, t.DeliveryReceived("c1", at(clock)))
        elif move == "response":
            state, _ = checked_step(state, t.TimerFired("c1", t.Timer.RESPONSE, at(clock + LIVENESS.response)))
        elif move == "wait" and turn.phase is t.Phase.RUNNING:
            state, _ = waiting(state, clock)
            waits += 1
        elif move == "wait-ends" and turn.phase is t.Phase.WAITING:
            state, _ = checked_step(state, t.TimerFired("c1", t.Timer.WAIT, at(clock + 200)))
            clock += 200
        after = state.turn
        assert after.check_ins - before in (0, 1)
        if after.check_ins > before:
            assert turn.phase in (t.Phase.QUIET, t.Phase.WAITING)  # never while an attempt runs
        assert after.check_ins <= 1 + waits


def test_a_transcript_confirms_acceptance_receipt_and_the_end_and_skips_hostile_lines(tmp_path):
    import json

    from agentswf.harnesses.pane import MAX_TRANSCRIPT_LINE_BYTES, ClaudeTranscript

    path = tmp_path / "projects" / "-work" / "s1.jsonl"
    path.parent.mkdir(parents=True)
    rows = [
        {"type": "user", "uuid": "old", "message": {"content": "SCENARIO x. earlier"}},
        {"type": "assistant", "uuid": "old-a", "parentUuid": "old"},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    transcript = ClaudeTranscript(tmp_path, "s1")
    transcript.expect("SCENARIO x. earlier")  # what was there before the prompt doesn't count
    assert not transcript.accepted and not transcript.received
    with open(path, "a") as file:
        file.write("[" * 10_000 + "\n")  # nests too deep: never decoded
        file.write('{"type": "user", "uuid": "big", "x": "' + "y" * (MAX_TRANSCRIPT_LINE_BYTES + 10))  # overlong
        file.flush()
        transcript.read()
        file.write('"}\n')
        file.write(json.dumps({"type": "user", "uuid": "p", "message": {"content": "SCENARIO x. earlier"}}) + "\n")
        file.flush()
        transcript.read()
        assert transcript.accepted and not transcript.received and "big" not in transcript.parents
        file.write(json.dumps({"type": "attachment", "uuid": "at", "parentUuid": "p"}) + "\n")
        file.write(json.dumps({"type": "assistant", "uuid": "a", "parentUuid": "at"}) + "\n")
        file.flush()
        transcript.read()
        assert transcript.received and not transcript.finished
        file.write(json.dumps({"type": "system", "subtype": "turn_duration", "uuid": "e", "parentUuid": "a"}) + "\n")
    transcript.read()
    assert transcript.finished
