"""The turn's state machine, `turn.step`, driven by hypothesis against a model of the seed's rules.

The model is the reference (docs/reference/wfa.md, the seed's `wfa` page) spelled out on its own
terms: which code each request gets in each situation, in the table's precedence; a turn takes one
accepted answer; nothing happens to a turn once it has settled; its deadline never moves; it is
nudged at most once. The machine plays the actor: it feeds `step` events and answers the effects
that ask (a record, the agent's mail, a message posted), with time passing between.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import msgspec
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from agentswf.engine import turn as t
from agentswf.engine.instant import Instant
from agentswf.engine.mail.rules import MESSAGE_TURN_SECONDS
from agentswf.engine.mail.words import DropAwait, GiveUp, Mail, Posted, StandingView
from agentswf.engine.outcomes import Answered, Cancelled, TimedOut
from agentswf.harnesses.base import AttemptEnding, AttemptResult
from agentswf.wire import ReplyRequest, ResultRequest, SendRequest, ToolRequest, WaitingRequest, accepted
from agentswf.wire.teaching import Taught

KEY = "a"
WALL = 1_700_000_000.0


class Answer(msgspec.Struct):
    n: int


TAUGHT = Taught(Answer)
GOOD = ["--n", "3"]
BAD = ["--n", "three"]


def at(loop: float) -> Instant:
    return Instant(loop, WALL + loop)


def fresh(*, supports_waiting: bool = True, tools: dict[str, float | None] | None = None) -> t.AgentState:
    return t.AgentState(KEY, "/run/a/wfa", supports_waiting, math.inf, tools if tools is not None else {"look": 30.0})


def start(call_id: str = "c1", deadline: float = math.inf, *, nudge: bool = True) -> t.StartTurn:
    return t.StartTurn(
        call_id=call_id, n=1, prompt=f"prompt {call_id}", nudge_prompt=f"nudge {call_id}", taught=TAUGHT,
        deadline=deadline, nudge=nudge,
    )


def checked_step(state: t.AgentState, event: t.Event) -> tuple[t.AgentState, list[t.Effect]]:
    """`t.step`, checked against the table: the pair is in it (else TurnProtocolError), an event
    the table ignores changes nothing, any other changes something (never silently ignored), and
    the agent ends where the move says it may."""
    entry = t.decide(state, event)
    after, effects = t.step(state, event)
    if isinstance(entry, t.Ignored):
        assert (after, effects) == (state, []), (event, entry)
    else:
        assert (after, effects) != (state, []), f"{event} was silently ignored in {t.row_of(state, event)}"
        assert t.stand(after) in (entry.to or {t.stand(state)}), (event, t.stand(state), t.stand(after))
    return after, effects


def of(effects: list[t.Effect], kind: type) -> list:
    return [effect for effect in effects if isinstance(effect, kind)]


def response(effects: list[t.Effect]):
    responds = of(effects, t.Respond)
    assert len(responds) == 1, effects
    return responds[0].response


def code(effects: list[t.Effect]) -> str | None:
    return response(effects).code


NOBODY = StandingView()
OWES = StandingView(owes=("b",), owed_text="which file?")
AWAITS = StandingView(awaits="b")
MAIL = (Mail(id="m1", sender="b", to=KEY, text="hello", kind="message"),)


def exited(exit_code: int = 0) -> AttemptResult:
    return AttemptResult(AttemptEnding("exited", exit_code=exit_code))


# The model ----------------------------------------------------------------------------


@dataclass
class Call:
    deadline: float
    status: str = "open"  # accepted, ended, expired
    takes_result: bool = True


class TurnMachine(RuleBasedStateMachine):
    """One agent, its turns one at a time, the actor's side played by the machine."""

    def __init__(self) -> None:
        super().__init__()
        self.supports_waiting = True
        self.state = fresh()
        self.now = 0.0
        self.turns = 0
        self.calls: dict[str, Call] = {}
        self.current: str | None = None  # the turn the agent is in, until it is settled
        self.ending = False  # its outcome is decided (StopTurn seen)
        self.accepted = False
        self.attempt_running = False
        self.quiet = False  # no attempt runs, and nothing but mail, a timer or a reply continues it
        self.waiting_phase = False  # quiet for a granted wait
        self.nudge_allowed = True
        self.nudged = 0  # as the model predicts
        self.nudge_attempts = 0  # as step starts them
        self.reminded = False
        self.waiting_until: float | None = None
        self.deadline = math.inf
        self.timers: dict[tuple[str, t.Timer], float] = {}
        self.tool: str | None = None  # the running call's id
        self.tool_joined = False
        self.tool_args: tuple[str, list[str]] | None = None
        self.tool_ids = 0
        self.cancelled = False  # the turn ended by being cancelled
        self.standing = NOBODY
        self.settled: set[str] = set()
        self.accepted_answers: dict[str, int] = {}

    # Playing the actor ------------------------------------------------------------------

    def step(self, event: t.Event) -> list[t.Effect]:
        self.state, effects = checked_step(self.state, event)
        for effect in effects:
            assert getattr(effect, "call_id", None) not in self.settled, effect  # nothing after settled
            if isinstance(effect, t.ArmTimer):
                if effect.timer is t.Timer.DEADLINE:
                    assert effect.at == self.deadline  # the deadline never moves
                assert effect.at <= self.deadline
                self.timers[(effect.call_id, effect.timer)] = effect.at
            if isinstance(effect, t.StartAttempt):
                assert not self.attempt_running
                self.attempt_running = True
                self.quiet = self.waiting_phase = False
                if effect.prompt == f"nudge {effect.call_id}":
                    self.nudge_attempts += 1
            if isinstance(effect, t.StopTurn):
                assert not self.ending
                self.ending, self.quiet, self.waiting_phase = True, False, False
                self.attempt_running = False  # cancelled: a late end of it is ignored
                if self.calls[effect.call_id].status == "open":
                    self.calls[effect.call_id].status = "ended"
                self.timers = {}
        return effects

    def expect_ends(self, effects: list[t.Effect]) -> None:
        assert of(effects, t.StopTurn), effects

    def after_clean_exit_without_mail(self, effects: list[t.Effect]) -> None:
        """What the reference says a turn does when its CLI exits 0 without an accepted answer."""
        call = self.calls[self.current]
        if self.standing.awaits is not None:
            assert not of(effects, t.StartAttempt) and not of(effects, t.StopTurn)
            self.quiet = True
        elif self.standing.owes and not self.reminded:
            (attempt,) = of(effects, t.StartAttempt)
            assert isinstance(attempt.prompt, t.Remind)
            self.reminded = True
        elif not call.takes_result:
            self.expect_ends(effects)
        else:
            self.after_quiet(effects)

    def after_quiet(self, effects: list[t.Effect]) -> None:
        """Nothing continues the turn: hold for a granted wait, nudge once, or end unanswered."""
        if self.waiting_until is not None and self.now < self.waiting_until:
            assert of(effects, t.ArmTimer) and not of(effects, t.StartAttempt)
            self.quiet = self.waiting_phase = True
        elif self.nudge_allowed and self.nudged == 0:
            (attempt,) = of(effects, t.StartAttempt)
            assert attempt.nudge and attempt.prompt == f"nudge {self.current}"
            self.nudged, self.waiting_until = 1, None
        else:
            self.expect_ends(effects)

    # Rules ----------------------------------------------------------------------------

    @rule(supports_waiting=st.booleans())
    @precondition(lambda self: self.turns == 0)
    def harness(self, supports_waiting: bool) -> None:
        self.supports_waiting = supports_waiting
        self.state = fresh(supports_waiting=supports_waiting)

    @rule(within=st.none() | st.floats(0.5, 60), nudge=st.booleans())
    @precondition(lambda self: self.current is None)
    def start_turn(self, within: float | None, nudge: bool) -> None:
        self.turns += 1
        call_id = f"c{self.turns}"
        deadline = math.inf if within is None else self.now + within
        self.current, self.deadline, self.calls[call_id] = call_id, deadline, Call(deadline)
        effects = self.step(t.TurnAsked(start(call_id, deadline, nudge=nudge), at(self.now)))
        self.ending = self.accepted = self.quiet = self.waiting_phase = self.reminded = self.cancelled = False
        self.nudge_allowed, self.nudged, self.nudge_attempts, self.waiting_until = nudge, 0, 0, None
        (attempt,) = of(effects, t.StartAttempt)
        assert attempt.prompt == f"prompt {call_id}" and not attempt.nudge

    @rule(has_mail=st.booleans())
    def mail_arrives(self, has_mail: bool) -> None:
        effects = self.step(t.MailArrived(at(self.now)))
        if not of(effects, t.TakeMail):
            assert self.current is not None and not self.quiet
            return
        assert self.current is None or self.quiet
        effects = self.step(t.MailTaken(MAIL if has_mail else (), self.standing, at(self.now)))
        if not has_mail:
            assert not of(effects, t.StartAttempt)
            return
        if self.current is not None:  # the quiet turn goes on with its mail
            (attempt,) = of(effects, t.StartAttempt)
            assert isinstance(attempt.prompt, t.Continue)
            self.waiting_until = None
            return
        (opening,) = of(effects, t.OpenMessageTurn)
        self.turns += 1
        call_id = f"m{self.turns}"
        self.current, self.deadline = call_id, opening.deadline
        self.calls[call_id] = Call(opening.deadline, takes_result=False)
        effects = self.step(t.MessageTurnReady(call_id, "a message turn", opening.deadline, at(self.now)))
        self.ending = self.accepted = self.quiet = self.waiting_phase = self.reminded = self.cancelled = False
        self.nudge_allowed, self.nudged, self.nudge_attempts, self.waiting_until = False, 0, 0, None
        assert of(effects, t.StartAttempt)

    @rule(seconds=st.floats(0, 40))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @rule(data=st.data())
    @precondition(lambda self: bool(self.timers))
    def timer_fires(self, data: st.DataObject) -> None:
        (call_id, timer), when = data.draw(st.sampled_from(sorted(self.timers.items(), key=str)))
        del self.timers[(call_id, timer)]
        self.now = max(self.now, when)
        stale, waiting = call_id != self.current or self.ending, self.waiting_phase
        effects = self.step(t.TimerFired(call_id, timer, at(self.now)))
        if stale:
            assert effects == []
        elif timer is t.Timer.DEADLINE:
            self.expect_ends(effects)
            if not self.accepted:
                self.calls[call_id].status = "expired"
        elif timer is t.Timer.RELEASE:
            self.expect_ends(effects)
        elif waiting and self.now < self.deadline:
            self.waiting_until = None
            self.after_quiet(effects)
        else:
            assert effects == []

    @rule(kind=st.sampled_from(["exited", "failed", "blocked", "timed-out"]), exit_code=st.sampled_from([0, 0, 1]))
    @precondition(lambda self: self.attempt_running)
    def attempt_ends(self, kind: str, exit_code: int) -> None:
        assert self.current is not None
        self.attempt_running = False
        result = AttemptResult(AttemptEnding(kind, exit_code=exit_code, reason="it ended"))  # type: ignore[arg-type]
        effects = self.step(t.AttemptEnded(self.current, result, at(self.now)))
        if self.accepted or kind != "exited" or exit_code != 0:
            self.expect_ends(effects)
            return
        assert effects == [t.TakeMail()]
        self.after_clean_exit_without_mail(self.step(t.MailTaken((), self.standing, at(self.now))))

    @rule()
    @precondition(lambda self: self.attempt_running)
    def attempt_exits_cleanly(self) -> None:
        self.attempt_ends("exited", 0)

    @rule()
    @precondition(lambda self: self.ending and self.current is not None)
    def a_late_attempt_end_changes_nothing(self) -> None:
        assert self.step(t.AttemptEnded(self.current, exited(), at(self.now))) == []

    @rule(owes=st.sampled_from([False, False, True]), awaits=st.sampled_from([False, False, True]))
    def standing_changes(self, owes: bool, awaits: bool) -> None:
        self.standing = StandingView(owes=("b",) if owes else (), awaits="b" if awaits else None, owed_text="q")

    @rule(
        which=st.sampled_from(["current", "current", "current", "unknown", "earlier"]),
        valid=st.sampled_from([True, True, False]),
        recorded=st.sampled_from([True, True, False]),
    )
    def result(self, which: str, valid: bool, recorded: bool) -> None:
        call_id = {"current": self.current, "unknown": "nope", "earlier": "c1"}[which] or "nope"
        effects = self.step(t.ResultAsked(ResultRequest(version=1, call_id=call_id, args=GOOD if valid else BAD), self.standing, None, at(self.now)))
        expected = self.expected_call_code(call_id)
        if expected is None and not valid:
            expected = "invalid-result"
        if expected is not None:
            assert code(effects) == expected
            self.check_notice(response(effects).stdout)
            return
        (record,) = of(effects, t.RecordAnswer)
        effects = self.step(t.AnswerRecorded(record.request, record.value, recorded, self.standing, at(self.now)))
        if not recorded:
            assert code(effects) == "internal-error"
            return
        assert code(effects) is None
        self.accepted = True
        self.calls[call_id].status = "accepted"
        self.accepted_answers[call_id] = self.accepted_answers.get(call_id, 0) + 1
        if self.attempt_running:
            assert self.timers[(call_id, t.Timer.RELEASE)] <= self.deadline
        else:
            self.expect_ends(effects)

    @rule(
        which=st.sampled_from(["current", "current", "unknown"]),
        blank=st.sampled_from([False, False, True]),
        seconds=st.none() | st.floats(0, 600),
    )
    def waiting(self, which: str, blank: bool, seconds: float | None) -> None:
        call_id = (self.current if which == "current" else None) or "nope"
        timeout_ms = None if seconds is None else int(seconds * 1000)
        request = WaitingRequest(version=1, call_id=call_id, reason=" " if blank else "building", timeout_ms=timeout_ms)
        effects = self.step(t.WaitingAsked(request, self.standing, None, at(self.now)))
        expected = self.expected_call_code(call_id)
        if expected is None and not self.supports_waiting:
            expected = "unsupported-command"
        if expected is None and self.standing.awaits is None and blank:
            expected = "invalid-request"
        assert code(effects) == expected
        self.check_notice(response(effects).stdout)
        if expected is None and self.standing.awaits is None:
            granted = self.state.turn.waiting_until
            assert granted is not None and self.now < granted <= self.deadline
            wanted = 120.0 if seconds is None else max(timeout_ms / 1000, 30.0)
            assert granted == min(self.now + wanted, self.deadline)
            self.waiting_until = granted

    @rule(name=st.sampled_from(["look", "look", "look", "nothing"]), args=st.sampled_from([[], [], ["--x", "1"]]))
    def tool(self, name: str, args: list[str]) -> None:
        self.tool_ids += 1
        effects = self.step(t.ToolAsked(ToolRequest(version=1, name=name, args=args), self.standing, f"t{self.tool_ids}", at(self.now)))
        in_turn = self.current is not None and not self.ending
        if not in_turn:
            expected = "no-operation"
        elif self.accepted:
            expected = "result-accepted"
        elif self.tool is not None and not (self.same_call(name, args) and not self.tool_joined):
            expected = "tool-busy"
        elif name != "look":
            expected = "unknown-tool"
        else:
            expected = None
        if expected is not None:
            assert code(effects) == expected
            assert of(effects, t.RecordToolRefused)
            return
        if self.tool is not None:
            assert effects == [t.JoinTool()]
            self.tool_joined = True
            return
        (started,) = of(effects, t.StartTool)
        assert started.deadline == min(self.deadline, self.now + 30.0)
        self.tool, self.tool_joined, self.tool_args = started.call_id, False, (name, args)

    def same_call(self, name: str, args: list[str]) -> bool:
        return self.tool_args == (name, args)

    @rule()
    @precondition(lambda self: self.tool is not None)
    def tool_answers(self) -> None:
        effects = self.step(t.ToolFinished(self.tool, accepted("tool", stdout="found"), self.standing))
        (answer,) = of(effects, t.AnswerTool)
        self.check_notice(answer.response.stderr)
        self.tool = None

    @rule(reply=st.booleans(), seconds=st.none() | st.floats(1, 100), roll=st.integers(0, 2))
    def post(self, reply: bool, seconds: float | None, roll: int) -> None:
        if roll:  # now and then: a message changes nothing of the turn
            return
        timeout_ms = None if seconds is None else int(seconds * 1000)
        kind = ReplyRequest if reply else SendRequest
        request = kind(version=1, peer="b", message="hi", await_reply=True, timeout_ms=timeout_ms)
        (send,) = of(self.step(t.PostAsked(request, at(self.now))), t.SendPost)
        in_turn = self.current is not None and not self.ending
        assert send.post.in_turn == in_turn and send.post.reply == reply
        assert send.post.until <= (self.deadline if in_turn else math.inf)
        effects = self.step(t.PostAnswered(request, send.post.until, Posted("m", "now"), self.standing, at(self.now)))
        assert code(effects) is None

    @rule()
    @precondition(lambda self: self.ending and self.current is not None)
    def settle(self) -> None:
        call_id = self.current
        effects = self.step(t.Settled(call_id, self.standing, at(self.now)))
        (finished,) = of(effects, t.Finished)
        outcome = finished.record.outcome
        if self.cancelled:
            assert isinstance(outcome, Cancelled)
        elif self.calls[call_id].status == "expired":
            assert isinstance(outcome, TimedOut)
        elif self.calls[call_id].takes_result:
            assert isinstance(outcome, Answered) == self.accepted
        assert effects[-1] == t.TakeMail()
        self.settled.add(call_id)
        self.current, self.ending, self.quiet, self.waiting_phase = None, False, False, False
        effects = self.step(t.MailTaken((), self.standing, at(self.now)))
        assert effects == [t.Announce("idle")]

    @rule()
    @precondition(lambda self: self.ending and self.current is not None)
    def settle_soon(self) -> None:
        """Its CLI is soon gone: a second rule, so that turns settle about as soon as they end."""
        self.settle()

    @rule(within=st.none() | st.floats(0.5, 60))
    @precondition(lambda self: self.current is None)
    def start_another(self, within: float | None) -> None:
        """A second rule, so that the agent is mostly in a turn."""
        self.start_turn(within, nudge=True)

    @rule(roll=st.integers(0, 4))
    @precondition(lambda self: self.current is not None)
    def cancel(self, roll: int) -> None:
        if roll:  # a cancel now and then, so that turns mostly run their course
            return
        ending = self.ending
        effects = self.step(t.CancelAsked(self.current, Cancelled("the workflow cancelled it"), at(self.now)))
        assert of(effects, t.HoldUntilSettled)
        assert bool(of(effects, t.StopTurn)) == (not ending)
        self.cancelled = self.cancelled or not ending

    # What the reference says ------------------------------------------------------------

    def expected_call_code(self, call_id: str) -> str | None:
        """`wfa result`'s table, in its precedence (and `wfa waiting`'s, which shares it)."""
        call = self.calls.get(call_id)
        if call is None:
            return "unknown-operation"
        if call.status == "expired" or (call.status == "open" and self.now >= call.deadline):
            return "expired-operation"
        if call.status != "open":
            return "closed-operation"
        if not call.takes_result:
            return "no-result"
        if self.standing.owes:
            return "owes-reply"
        if self.tool is not None:
            return "tool-running"
        return None

    def check_notice(self, text: str) -> None:
        """While the agent owes or awaits a reply, every answer leads with a line saying so."""
        if self.standing.owes:
            assert text.startswith("wfa: you owe b a reply (wfa reply b).\n")
        elif self.standing.awaits:
            assert text.startswith("wfa: you await b's reply")
        else:
            assert not text.startswith("wfa: you")

    @invariant()
    def one_accepted_answer_per_turn(self) -> None:
        assert all(count == 1 for count in self.accepted_answers.values())

    @invariant()
    def the_deadline_never_moves(self) -> None:
        turn = self.state.turn
        if turn is not None and self.current is not None:
            assert turn.deadline == self.deadline
            assert turn.waiting_until is None or turn.waiting_until <= turn.deadline

    @invariant()
    def one_nudge_at_most(self) -> None:
        assert self.nudge_attempts == self.nudged <= 1

    @invariant()
    def nothing_after_settled(self) -> None:
        turn = self.state.turn
        assert turn is None or turn.call_id not in self.settled
        for call_id in self.settled:
            assert self.state.calls[call_id].state != "open"

    @invariant()
    def a_phase_for_what_runs(self) -> None:
        turn = self.state.turn
        if turn is not None and turn.phase is not t.Phase.ENDING:
            running = turn.phase in (t.Phase.RUNNING, t.Phase.RELEASING)
            assert running == self.attempt_running
            assert (turn.phase is t.Phase.RELEASING) == self.accepted


TurnMachineTest = TurnMachine.TestCase
TurnMachineTest.settings = settings(max_examples=300, stateful_step_count=50, deadline=None)


# Examples -------------------------------------------------------------------------------


def begun(deadline: float = math.inf, **kwargs: object) -> t.AgentState:
    state, _ = t.step(fresh(**kwargs), t.TurnAsked(start(deadline=deadline), at(0)))  # type: ignore[arg-type]
    return state


def test_a_turn_starts_its_first_attempt_with_its_prompt_and_arms_its_deadline():
    state, effects = t.step(fresh(), t.TurnAsked(start(deadline=50.0), at(0)))
    assert effects == [
        t.RegisterCall("c1"),
        t.RecordCallOpened("c1", 1, "prompt c1", TAUGHT.schema, int((WALL + 50) * 1000)),
        t.ArmTimer("c1", t.Timer.DEADLINE, 50.0),
        t.StartAttempt("c1", 1, False, "prompt c1", "workflow", None),
    ]
    assert state.turn is not None and state.turn.phase is t.Phase.RUNNING


def test_a_second_turn_queues_and_its_deadline_runs_while_queued():
    state, effects = t.step(begun(), t.TurnAsked(start("c2", 9.0), at(1)))
    assert effects == [t.ArmQueuedTimer("c2", 9.0)]
    state, effects = t.step(state, t.QueuedExpired("c2", at(9)))
    (finished,) = of(effects, t.Finished)
    assert isinstance(finished.record.outcome, TimedOut) and state.queue == ()
    assert state.calls["c2"].state == "expired"


def test_a_turn_whose_deadline_passed_while_queued_ends_before_any_attempt():
    _, effects = t.step(fresh(), t.TurnAsked(start(deadline=5.0), at(6)))
    assert not of(effects, t.StartAttempt) and of(effects, t.StopTurn)


def test_an_answer_while_the_attempt_runs_releases_the_turn_after_the_grace():
    state = begun(deadline=100.0)
    state, effects = t.step(state, t.ResultAsked(ResultRequest(version=1, call_id="c1", args=GOOD), NOBODY, None, at(1)))
    (record,) = of(effects, t.RecordAnswer)
    assert record.value == Answer(3)
    state, effects = t.step(state, t.AnswerRecorded(record.request, record.value, True, NOBODY, at(1)))
    assert t.ArmTimer("c1", t.Timer.RELEASE, 1 + t.RELEASE_GRACE_SECONDS) in effects
    assert response(effects).stdout == "wfa: result accepted.\n"
    assert state.turn.phase is t.Phase.RELEASING
    _, effects = t.step(state, t.ToolAsked(ToolRequest(version=1, name="look"), NOBODY, "t1", at(2)))
    assert code(effects) == "result-accepted"
    state, effects = t.step(state, t.AttemptEnded("c1", exited(), at(3)))
    assert of(effects, t.StopTurn) and state.turn.outcome == Answered(Answer(3))


def test_the_release_never_passes_the_deadline():
    state = begun(deadline=10.0)
    state, effects = t.step(state, t.ResultAsked(ResultRequest(version=1, call_id="c1", args=GOOD), NOBODY, None, at(1)))
    _, effects = t.step(state, t.AnswerRecorded(effects[0].request, Answer(3), True, NOBODY, at(1)))
    assert t.ArmTimer("c1", t.Timer.RELEASE, 10.0) in effects


def test_an_answer_the_run_cannot_record_is_not_accepted():
    state = begun()
    state, effects = t.step(state, t.ResultAsked(ResultRequest(version=1, call_id="c1", args=GOOD), NOBODY, None, at(1)))
    state, effects = t.step(state, t.AnswerRecorded(effects[0].request, Answer(3), False, NOBODY, at(1)))
    assert code(effects) == "internal-error" and state.turn.phase is t.Phase.RUNNING


def test_a_refused_answer_is_recorded_and_named_in_the_unanswered_reason():
    state = begun()
    state, effects = t.step(state, t.ResultAsked(ResultRequest(version=1, call_id="c1", args=BAD), NOBODY, None, at(1)))
    assert code(effects) == "invalid-result"
    assert "wfa result c1 --n" in response(effects).stderr
    (candidate,) = of(effects, t.RecordCandidate)
    assert not candidate.ok and candidate.error
    state, _ = t.step(state, t.AttemptEnded("c1", exited(), at(2)))
    state, _ = t.step(state, t.MailTaken((), NOBODY, at(2)))  # the nudge
    state, _ = t.step(state, t.AttemptEnded("c1", exited(), at(3)))
    state, _ = t.step(state, t.MailTaken((), NOBODY, at(3)))
    assert state.turn.outcome.kind == "unanswered"
    assert "after a nudge" in state.turn.outcome.reason and "its last answer was refused" in state.turn.outcome.reason


def test_a_clean_exit_reads_mail_first_then_awaits_then_reminds_once():
    state = begun()
    state, effects = t.step(state, t.AttemptEnded("c1", exited(), at(1)))
    assert effects == [t.TakeMail()] and state.turn.phase is t.Phase.READING_MAIL
    _, effects = t.step(state, t.MailTaken(MAIL, NOBODY, at(1)))
    assert of(effects, t.StartAttempt)[0].prompt == t.Continue(MAIL, TAUGHT)
    awaiting, effects = t.step(state, t.MailTaken((), AWAITS, at(1)))
    assert effects == [t.Announce("awaiting-reply")] and awaiting.turn.phase is t.Phase.AWAITING
    reminded, effects = t.step(state, t.MailTaken((), OWES, at(1)))
    (attempt,) = of(effects, t.StartAttempt)
    assert isinstance(attempt.prompt, t.Remind) and attempt.prompt.then == "nudge c1"
    reminded, _ = t.step(reminded, t.AttemptEnded("c1", exited(), at(2)))
    _, effects = t.step(reminded, t.MailTaken((), OWES, at(2)))
    assert effects[0] == t.TellBoard(GiveUp(KEY))  # after its one reminder, its askers are told
    assert of(effects, t.StartAttempt)[0].prompt == "nudge c1"


def test_a_granted_wait_holds_off_the_nudge_until_it_ends():
    state = begun(deadline=1000.0)
    state, effects = t.step(state, t.WaitingAsked(WaitingRequest(version=1, call_id="c1", reason="building", timeout_ms=60_000), NOBODY, None, at(0)))
    assert response(effects).value == {"wait_until_ms": int((WALL + 60) * 1000), "deadline_ms": int((WALL + 1000) * 1000)}
    state, _ = t.step(state, t.AttemptEnded("c1", exited(), at(10)))
    state, effects = t.step(state, t.MailTaken((), NOBODY, at(10)))
    assert effects == [t.ArmTimer("c1", t.Timer.WAIT, 60.0)] and state.turn.phase is t.Phase.WAITING
    state, effects = t.step(state, t.TimerFired("c1", t.Timer.WAIT, at(60)))
    assert of(effects, t.StartAttempt)[0].nudge


def test_waiting_while_awaiting_a_reply_changes_nothing():
    state = begun()
    after, effects = t.step(state, t.WaitingAsked(WaitingRequest(version=1, call_id="c1", reason="x", timeout_ms=60_000), AWAITS, None, at(0)))
    assert "already awaited; nothing changed" in response(effects).stdout and after == state


def test_a_reason_over_the_limit_is_refused():
    state = begun()
    _, effects = t.step(state, t.WaitingAsked(WaitingRequest(version=1, call_id="c1", reason="x" * 2049), NOBODY, None, at(0)))
    assert code(effects) == "invalid-request"
    _, effects = t.step(state, t.WaitingAsked(WaitingRequest(version=1, call_id="c1", reason="x" * 2048), NOBODY, None, at(0)))
    assert code(effects) is None


def test_the_same_tool_call_joins_the_running_one_once():
    state = begun()
    state, effects = t.step(state, t.ToolAsked(ToolRequest(version=1, name="look", args=["--x", "1"]), NOBODY, "t1", at(0)))
    assert of(effects, t.StartTool)[0].deadline == 30.0
    state, effects = t.step(state, t.ToolAsked(ToolRequest(version=1, name="look", args=["--x", "1"]), NOBODY, "t2", at(1)))
    assert effects == [t.JoinTool()]
    _, effects = t.step(state, t.ToolAsked(ToolRequest(version=1, name="look", args=["--x", "1"]), NOBODY, "t3", at(1)))
    assert code(effects) == "tool-busy"
    _, effects = t.step(state, t.ResultAsked(ResultRequest(version=1, call_id="c1", args=GOOD), NOBODY, None, at(1)))
    assert code(effects) == "tool-running"
    state, effects = t.step(state, t.ToolFinished("t1", accepted("tool", stdout="ok"), OWES))
    (answer,) = of(effects, t.AnswerTool)
    assert answer.response.stderr.startswith("wfa: you owe b a reply") and answer.response.stdout == "ok"
    assert state.tool is None


def test_a_tool_outside_a_turn_is_no_operation():
    _, effects = t.step(fresh(), t.ToolAsked(ToolRequest(version=1, name="look"), NOBODY, "t1", at(0)))
    assert code(effects) == "no-operation"
    assert of(effects, t.RecordToolRefused)[0].turn_call_id == ""


def test_a_turn_ending_with_a_call_running_cancels_it():
    state = begun()
    state, _ = t.step(state, t.ToolAsked(ToolRequest(version=1, name="look"), NOBODY, "t1", at(0)))
    _, effects = t.step(state, t.CancelAsked("c1", Cancelled("stop"), at(1)))
    assert t.StopTool("t1") in effects and t.HoldUntilSettled("c1") in effects


def test_settling_tells_the_askers_and_drops_the_wait_then_reads_mail():
    state = begun()
    state, _ = t.step(state, t.CancelAsked("c1", Cancelled("stop"), at(1)))
    state, effects = t.step(state, t.Settled("c1", StandingView(owes=("b",), awaits="c"), at(2)))
    assert t.TellBoard(GiveUp(KEY, "a's turn ended cancelled without replying")) in effects
    assert t.TellBoard(DropAwait(KEY)) in effects
    assert effects[0] == t.Unlisten() and effects[-1] == t.TakeMail() and state.turn is None
    state, effects = t.step(state, t.MailTaken(MAIL, NOBODY, at(2)))
    assert effects == [t.OpenMessageTurn(MAIL, 2 + MESSAGE_TURN_SECONDS)]


def test_a_message_turn_lasts_as_long_as_an_asker_waits_within_the_run():
    state = t.AgentState(KEY, "/w", False, 5000.0)
    _, effects = t.step(state, t.MailTaken(MAIL, StandingView(owes=("b",), latest_asker_until=4000.0), at(0)))
    assert effects == [t.OpenMessageTurn(MAIL, 4000.0)]
    _, effects = t.step(state, t.MailTaken(MAIL, StandingView(owes=("b",), latest_asker_until=9000.0), at(0)))
    assert effects == [t.OpenMessageTurn(MAIL, 5000.0)]


def test_a_message_turn_takes_no_result_and_ends_answered_on_a_clean_exit():
    state, _ = t.step(fresh(), t.MessageTurnReady("m1", "mail", 900.0, at(0)))
    _, effects = t.step(state, t.ResultAsked(ResultRequest(version=1, call_id="m1"), NOBODY, None, at(1)))
    assert code(effects) == "no-result"
    state, _ = t.step(state, t.AttemptEnded("m1", exited(), at(1)))
    state, _ = t.step(state, t.MailTaken((), NOBODY, at(1)))
    assert state.turn.outcome == Answered(None)


def test_the_deadline_ends_an_unanswered_turn_and_expires_its_call():
    state = begun(deadline=10.0)
    state, effects = t.step(state, t.TimerFired("c1", t.Timer.DEADLINE, at(10)))
    assert isinstance(state.turn.outcome, TimedOut) and state.calls["c1"].state == "expired"
    late, effects = t.step(state, t.TimerFired("c1", t.Timer.DEADLINE, at(11)))
    assert effects == [] and late == state


def test_a_post_in_a_turn_waits_no_longer_than_its_deadline():
    state = begun(deadline=50.0)
    _, effects = t.step(state, t.PostAsked(SendRequest(version=1, peer="b", message="q?", await_reply=True, timeout_ms=100_000), at(0)))
    assert effects[0].post.until == 50.0 and effects[0].post.in_turn
    _, effects = t.step(fresh(), t.PostAsked(SendRequest(version=1, peer="b", message="q?"), at(0)))
    assert effects[0].post.until == math.inf and not effects[0].post.in_turn


def test_closing_records_the_turn_and_the_queue_cancelled():
    state, _ = t.step(begun(), t.TurnAsked(start("c2"), at(1)))
    _, effects = t.step(state, t.Closing(at(2)))
    records = [effect.record for effect in of(effects, t.RecordTurnEnded)]
    assert [record.call_id for record in records] == ["c1", "c2"]
    assert all(isinstance(record.outcome, Cancelled) for record in records)
