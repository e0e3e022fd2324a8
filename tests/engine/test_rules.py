"""The pure state rules: who may answer what, when; and what a turn does when its CLI ends."""

from __future__ import annotations

import itertools
import math
import re

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from agentswf.engine.rules import (
    AgentView,
    AttemptEnding,
    CallView,
    after_attempt,
    judge_result,
    judge_tool,
    judge_waiting,
    recorded_tool_name,
    waiting_until,
)
from agentswf.wire.common import is_tool_name

STATES = ("open", "accepted", "ended", "expired")
times = st.floats(min_value=0, max_value=1e6, allow_nan=False)
deadlines = times | st.just(math.inf)
agents = st.builds(
    AgentView,
    key=st.sampled_from(["a", "b"]),
    tool_running=st.booleans(),
    owes=st.sampled_from([(), ("peer",)]),
    supports_waiting=st.booleans(),
)
calls = st.builds(
    CallView,
    agent=st.sampled_from(["a", "b"]),
    state=st.sampled_from(STATES),
    deadline=deadlines,
    takes_result=st.booleans(),
)


def expected(agent: AgentView, call: CallView | None, now: float) -> str | None:
    """The rules, spelled out as the spec's table, in precedence order."""
    if call is None:
        return "unknown-operation"
    if call.agent != agent.key:
        return "wrong-agent"
    if call.state == "expired" or (call.state == "open" and now >= call.deadline):
        return "expired-operation"
    if call.state in ("accepted", "ended"):
        return "closed-operation"
    if not call.takes_result:
        return "no-result"
    if agent.owes:
        return "owes-reply"
    if agent.tool_running:
        return "tool-running"
    return None


@given(agents, st.none() | calls, times)
def test_judge_result_follows_the_table(agent, call, now):
    refusal = judge_result(agent, "c1", call, now)
    assert (refusal and refusal.code) == expected(agent, call, now)
    if refusal is not None:
        assert refusal.message


@given(agents, st.none() | calls, times)
def test_judge_waiting_is_judge_result_then_the_harness(agent, call, now):
    refusal = judge_waiting(agent, "c1", call, now)
    code = expected(agent, call, now)
    if code is None and not agent.supports_waiting:
        code = "unsupported-command"
    assert (refusal and refusal.code) == code
    assert refusal is None or refusal.code != "invalid-result"


def test_every_combination_exhaustively():
    seen = set()
    for key, tool, owes, waits, state, owner, takes, (now, deadline) in itertools.product(
        "ab", (False, True), ((), ("p",)), (False, True), STATES, "ab", (False, True),
        ((0.0, math.inf), (1.0, 2.0), (2.0, 2.0), (3.0, 2.0)),
    ):
        agent = AgentView(key, tool, owes, waits)
        call = CallView(owner, state, deadline, takes)
        result = judge_result(agent, "c", call, now)
        assert (result and result.code) == expected(agent, call, now)
        seen.add(result and result.code)
    assert seen == {None, "wrong-agent", "expired-operation", "closed-operation", "no-result", "owes-reply", "tool-running"}


def test_unknown_call_names_the_id():
    refusal = judge_result(AgentView("a"), "feedbeef", None, 0.0)
    assert refusal.code == "unknown-operation" and "feedbeef" in refusal.message


def test_expiry_at_the_deadline_itself():
    call = CallView("a", "open", deadline=10.0)
    assert judge_result(AgentView("a"), "c", call, 9.999) is None
    assert judge_result(AgentView("a"), "c", call, 10.0).code == "expired-operation"


def test_an_accepted_call_past_its_deadline_is_closed_not_expired():
    call = CallView("a", "accepted", deadline=10.0)
    assert judge_result(AgentView("a"), "c", call, 11.0).code == "closed-operation"


# waiting_until -------------------------------------------------------------------------------


@given(times, deadlines, st.none() | st.floats(min_value=0.001, max_value=1e6))
def test_a_wait_never_passes_the_deadline(now, deadline, requested):
    until = waiting_until(now, deadline, requested, default=120.0, minimum=30.0)
    assert until <= deadline
    wanted = 120.0 if requested is None else max(requested, 30.0)
    assert until == min(now + wanted, deadline)
    if now + 30.0 <= deadline:
        assert until >= now + 30.0


def test_waiting_until_examples():
    assert waiting_until(0.0, math.inf, None, default=120.0, minimum=30.0) == 120.0
    assert waiting_until(0.0, math.inf, 5.0, default=120.0, minimum=30.0) == 30.0
    assert waiting_until(0.0, math.inf, 600.0, default=120.0, minimum=30.0) == 600.0
    assert waiting_until(0.0, 50.0, 600.0, default=120.0, minimum=30.0) == 50.0


# after_attempt -------------------------------------------------------------------------------

endings = st.builds(
    AttemptEnding,
    kind=st.sampled_from(["exited", "failed", "blocked", "timed-out"]),
    exit_code=st.integers(min_value=-15, max_value=255),
)


@given(endings, st.booleans(), st.booleans(), st.booleans(), st.booleans())
def test_after_attempt(ending, accepted, nudged, nudge_allowed, waiting):
    step = after_attempt(ending, accepted=accepted, nudged=nudged, nudge_allowed=nudge_allowed, waiting=waiting)
    if accepted:
        assert step == "answered"  # an accepted answer wins over however the CLI ended
    elif ending.kind != "exited":
        assert step == ending.kind
    elif ending.exit_code != 0:
        assert step == "failed"
    elif waiting:
        assert step == "wait"
    elif nudge_allowed and not nudged:
        assert step == "nudge"
    else:
        assert step == "unanswered"


def test_a_turn_is_nudged_at_most_once():
    ok = AttemptEnding("exited")
    assert after_attempt(ok, accepted=False, nudged=False, nudge_allowed=True, waiting=False) == "nudge"
    assert after_attempt(ok, accepted=False, nudged=True, nudge_allowed=True, waiting=False) == "unanswered"
    assert after_attempt(ok, accepted=False, nudged=False, nudge_allowed=False, waiting=False) == "unanswered"


# A turn, as a state machine ------------------------------------------------------------------


class TurnMachine(RuleBasedStateMachine):
    """Drives calls of one agent the way the AgentActor does, judging every request by the rules.

    The invariants: at most one acceptance per call, ever; after it, every result is
    `closed-operation`; an open call at or past its deadline is `expired-operation`.
    """

    @initialize()
    def setup(self):
        self.now = 0.0
        self.calls: dict[str, CallView] = {}
        self.acceptances: dict[str, int] = {}
        self.current: str | None = None
        self.count = 0

    def _agent(self) -> AgentView:
        return AgentView("a", supports_waiting=True)

    @precondition(lambda self: self.current is None)
    @rule(timeout=st.none() | st.floats(min_value=0.01, max_value=100))
    def start_turn(self, timeout):
        self.count += 1
        call_id = f"c{self.count}"
        deadline = math.inf if timeout is None else self.now + timeout
        self.calls[call_id] = CallView("a", "open", deadline)
        self.acceptances[call_id] = 0
        self.current = call_id

    @rule(seconds=st.floats(min_value=0, max_value=50))
    def time_passes(self, seconds):
        self.now += seconds
        # the deadline timer: an open call past its deadline becomes expired (the turn ends)
        call_id = self.current
        if call_id is not None and self.now >= self.calls[call_id].deadline and self.calls[call_id].state == "open":
            self.calls[call_id] = CallView("a", "expired", self.calls[call_id].deadline)
            self.current = None

    @precondition(lambda self: self.calls)
    @rule(data=st.data(), valid=st.booleans())
    def result(self, data, valid):
        call_id = data.draw(st.sampled_from(sorted(self.calls) + ["nope"]))
        call = self.calls.get(call_id)
        before = call
        refusal = judge_result(self._agent(), call_id, call, self.now)
        if call is None:
            assert refusal.code == "unknown-operation"
            return
        if before.state in ("accepted", "ended"):
            assert refusal.code == "closed-operation"
        if before.state == "expired" or (before.state == "open" and self.now >= before.deadline):
            assert refusal.code == "expired-operation"
        if refusal is None and valid:
            self.acceptances[call_id] += 1
            self.calls[call_id] = CallView("a", "accepted", call.deadline)

    @precondition(lambda self: self.calls)
    @rule(data=st.data())
    def waiting(self, data):
        call_id = data.draw(st.sampled_from(sorted(self.calls)))
        call = self.calls[call_id]
        refusal = judge_waiting(self._agent(), call_id, call, self.now)
        if refusal is None:
            assert call.state == "open" and self.now < call.deadline
            until = waiting_until(self.now, call.deadline, None, default=120.0, minimum=30.0)
            assert self.now < until <= call.deadline

    @precondition(lambda self: self.current is not None)
    @rule()
    def cli_exits(self):
        call_id = self.current
        call = self.calls[call_id]
        step = after_attempt(
            AttemptEnding("exited"), accepted=call.state == "accepted", nudged=True, nudge_allowed=True, waiting=False
        )
        assert step == ("answered" if call.state == "accepted" else "unanswered")
        self.calls[call_id] = CallView("a", "accepted" if call.state == "accepted" else "ended", call.deadline)
        self.current = None

    @invariant()
    def at_most_one_acceptance(self):
        assert all(count <= 1 for count in getattr(self, "acceptances", {}).values())


TestTurnMachine = TurnMachine.TestCase
TestTurnMachine.settings = settings(max_examples=200, stateful_step_count=30, deadline=None)


TOOL_NAME = re.compile(r"[a-z][a-z0-9_]{0,47}")  # seed 004's limit, as a pattern
names = st.text(max_size=60) | st.from_regex(TOOL_NAME, fullmatch=True) | st.text("abZ_9\n\u202e", max_size=50)


@given(names)
def test_a_tool_name_is_lowercase_letters_digits_and_underscores_from_a_letter_at_most_48(name: str) -> None:
    assert is_tool_name(name) == bool(TOOL_NAME.fullmatch(name))


@given(names, st.booleans(), st.booleans(), st.none() | st.just("deploy"), st.booleans())
def test_a_tool_name_no_tool_can_have_is_refused_unknown_tool_before_anything_else(
    name: str, in_turn: bool, accepted: bool, busy_with: str | None, same_call: bool
) -> None:
    """In a turn or not, busy or not: the agent's text is refused as no tool's, its record escaped, on one line."""
    refusal = judge_tool(
        AgentView("a"), in_turn=in_turn, accepted=accepted, busy_with=busy_with, same_call=same_call, name=name,
        tools=("deploy", name) if is_tool_name(name) else ("deploy",),  # a workflow's tools are checked as it opens
    )  # fmt: skip
    recorded = recorded_tool_name(name)
    if is_tool_name(name):
        assert recorded == name
        assert refusal is None or refusal.code != "unknown-tool"
    else:
        assert refusal is not None and refusal.code == "unknown-tool"
        assert recorded == repr(name) and recorded.isprintable()
        assert repr(name) in refusal.message and "\n" not in refusal.message
