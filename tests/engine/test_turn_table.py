"""The turn's transition table: every pair of row and event kind is in it or raises, and the docs show it.

An agent is put in each row of `TRANSITIONS` (each phase of a turn, each stand between turns,
and an event naming a queued or settled call), and every kind of event is stepped there: a
pair the table lists steps, any other raises `TurnProtocolError` and changes nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from agentswf.engine import turn as t
from agentswf.engine.mail.words import Posted, StandingView
from agentswf.engine.outcomes import Cancelled
from agentswf.harnesses.base import AttemptEnding, OperationResult
from agentswf.wire import ReplyRequest, ResultRequest, SendRequest, ToolRequest, WaitingRequest, accepted

from .test_turn import AWAITS, GOOD, MAIL, NOBODY, at, begun, exited, fresh, of, start

DOC = Path(__file__).resolve().parents[2] / "docs" / "guide" / "how-it-works.md"
BLOCK = re.compile(r"<!-- the turn's transitions: .*? -->\n```text\n(?P<diagram>.*?)```", re.S)


def _result(state: t.AgentState, call_id: str) -> t.AgentState:
    state, effects = t.step(state, t.ResultAsked(ResultRequest(version=1, call_id=call_id, args=GOOD), NOBODY, None, at(1)))
    (record,) = of(effects, t.RecordAnswer)
    state, _ = t.step(state, t.AnswerRecorded(record.request, record.value, True, NOBODY, at(1)))
    return state


def _after_clean_exit(state: t.AgentState, standing: StandingView = NOBODY) -> t.AgentState:
    state, _ = t.step(state, t.AttemptEnded("c1", exited(), at(2)))
    state, _ = t.step(state, t.MailTaken((), standing, at(2)))
    return state


def _waiting() -> t.AgentState:
    state = begun(deadline=1000.0)
    state, _ = t.step(state, t.WaitingAsked(WaitingRequest(version=1, call_id="c1", reason="x", timeout_ms=60_000), NOBODY, None, at(1)))
    return _after_clean_exit(state)


def _quiet() -> t.AgentState:
    state = t.AgentState("a", "/w", True, math.inf, {}, liveness=t.DEFAULT_LIVENESS)
    state, _ = t.step(state, t.TurnAsked(start(deadline=1000.0), at(0)))
    return _after_clean_exit(state)


def _op(state: t.AgentState) -> t.AgentState:
    op = t.StartOp(call_id="c1", n=1, kind="compaction", deadline=1000.0)
    state, _ = t.step(state, t.OpAsked(op, at(0)))
    return state


# Each row, and the call an event names to find the agent (or the call) there.
PLACES: dict[str, tuple[Callable[[], t.AgentState], str]] = {
    "running": (begun, "c1"),
    "releasing": (lambda: _result(begun(deadline=100.0), "c1"), "c1"),
    "reading-mail": (lambda: t.step(begun(), t.AttemptEnded("c1", exited(), at(1)))[0], "c1"),
    "awaiting": (lambda: _after_clean_exit(begun(), AWAITS), "c1"),
    "waiting": (_waiting, "c1"),
    "quiet": (_quiet, "c1"),
    "ending": (lambda: t.step(begun(), t.CancelAsked("c1", Cancelled("x"), at(1)))[0], "c1"),
    "idle": (fresh, "c1"),
    "operating": (lambda: _op(fresh()), "c1"),
    "op-stopping": (lambda: t.step(_op(fresh()), t.CancelAsked("c1", Cancelled("x"), at(1)))[0], "c1"),
    "stopped": (lambda: t.step(fresh(), t.StopAsked("s", "enough", at(0)))[0], "c1"),
    "queued": (lambda: t.step(begun(), t.TurnAsked(start("c2", 50.0), at(1)))[0], "c2"),
    "gone": (begun, "settled-long-ago"),
}

SEND = SendRequest(version=1, peer="b", message="hi")


def _timer(timer: t.Timer, call_id: str) -> t.Event:
    return t.TimerFired(call_id, timer, at(3))


EVENTS: dict[t.EventKind, Callable[[str], t.Event]] = {
    t.TurnAsked: lambda call_id: t.TurnAsked(start("c9"), at(3)),
    t.OpAsked: lambda call_id: t.OpAsked(t.StartOp(call_id="c9", n=1, kind="set", deadline=math.inf, model="m"), at(3)),
    t.StopAsked: lambda call_id: t.StopAsked("s9", "", at(3)),
    t.CancelAsked: lambda call_id: t.CancelAsked(call_id, Cancelled("x"), at(3)),
    t.Closing: lambda call_id: t.Closing(at(3)),
    t.ToolsSet: lambda call_id: t.ToolsSet({"other": None}),
    t.ResultAsked: lambda call_id: t.ResultAsked(ResultRequest(version=1, call_id=call_id, args=GOOD), NOBODY, None, at(3)),
    t.AnswerRecorded: lambda call_id: t.AnswerRecorded(ResultRequest(version=1, call_id=call_id, args=GOOD), 3, False, NOBODY, at(3)),
    t.WaitingAsked: lambda call_id: t.WaitingAsked(WaitingRequest(version=1, call_id=call_id, reason="x"), NOBODY, None, at(3)),
    t.ToolAsked: lambda call_id: t.ToolAsked(ToolRequest(version=1, name="look"), NOBODY, "t9", at(3)),
    t.ToolFinished: lambda call_id: t.ToolFinished("t9", accepted("tool", stdout="ok"), NOBODY),
    t.PostAsked: lambda call_id: t.PostAsked(ReplyRequest(version=1, peer="b", message="hi"), at(3)),
    t.PostAnswered: lambda call_id: t.PostAnswered(SEND, math.inf, Posted("m", "now"), NOBODY, at(3)),
    t.MailArrived: lambda call_id: t.MailArrived(at(3)),
    t.MailTaken: lambda call_id: t.MailTaken(MAIL, NOBODY, at(3)),
    t.MessageTurnReady: lambda call_id: t.MessageTurnReady("m9", "mail", 900.0, at(3)),
    t.AttemptEnded: lambda call_id: t.AttemptEnded(call_id, exited(), at(3)),
    t.AttemptNotStarted: lambda call_id: t.AttemptNotStarted(call_id, "no room"),
    t.RunsWith: lambda call_id: t.RunsWith(call_id, "m", None),
    t.DeliveryReceived: lambda call_id: t.DeliveryReceived(call_id, at(3)),
    t.Settled: lambda call_id: t.Settled(call_id, NOBODY, at(3)),
    t.OpEnded: lambda call_id: t.OpEnded(call_id, OperationResult(AttemptEnding("exited"), session="s"), at(3)),
    t.QueuedExpired: lambda call_id: t.QueuedExpired(call_id, at(50)),
    **{timer: partial(_timer, timer) for timer in t.Timer},
}


def test_the_places_and_events_cover_the_whole_table():
    rows = {t.row_of(make(), EVENTS[kind](call_id)) for make, call_id in PLACES.values() for kind in (t.CancelAsked, t.Closing)}
    assert rows == set(t.ROWS)
    assert {kind for row in t.TRANSITIONS.values() for kind in row} <= set(EVENTS)
    assert set(EVENTS) == {*t.Event.__args__, *t.Timer} - {t.TimerFired}  # type: ignore[attr-defined]


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("kind", sorted(EVENTS, key=str))
def test_a_pair_steps_if_the_table_has_it_and_raises_a_protocol_error_if_not(place: str, kind: t.EventKind):
    make, call_id = PLACES[place]
    state = make()
    event = EVENTS[kind](call_id)
    row = t.row_of(state, event)
    if kind in t.TRANSITIONS[row]:
        t.step(state, event)
    else:
        with pytest.raises(t.TurnProtocolError) as raised:
            t.step(state, event)
        assert (raised.value.row, raised.value.kind) == (row, kind)


def test_an_event_the_actor_never_sends_there_is_a_protocol_error():
    with pytest.raises(t.TurnProtocolError, match="MessageTurnReady in RUNNING"):
        t.step(begun(), t.MessageTurnReady("m1", "mail", 900.0, at(1)))
    with pytest.raises(t.TurnProtocolError, match="Settled in RUNNING"):  # only a turn that ends settles
        t.step(begun(), t.Settled("c1", NOBODY, at(1)))
    with pytest.raises(t.TurnProtocolError, match=r"TimerFired\(release\) in AWAITING"):
        t.step(_after_clean_exit(begun(), AWAITS), t.TimerFired("c1", t.Timer.RELEASE, at(3)))


def test_every_entry_says_why_it_ignores_and_where_it_moves():
    for row, entries in t.TRANSITIONS.items():
        for entry in entries.values():
            for choice in (entry.then, entry.otherwise) if isinstance(entry, t.When) else (entry,):
                if isinstance(choice, t.Ignored):
                    assert choice.reason
                else:
                    assert choice.to <= set(t.ROWS), (row, choice)


def test_the_docs_show_the_table():
    found = BLOCK.search(DOC.read_text())
    assert found is not None, "how-it-works.md has lost the turn's transitions"
    assert found["diagram"] == t.diagram(), "regenerate it: python -c 'from agentswf.engine import turn; print(turn.diagram())'"


def test_every_wfa_request_of_a_turn_becomes_its_event_in_the_turn_and_has_a_column():
    """A `wfa` command is its request in the wire, its event (`turn.asked`) and its column in
    `TRANSITIONS`: each request of `wire.Request` but `peers` (the switchboard's) becomes an event
    the table steps, and the AgentActor names no request but those two."""
    from agentswf.wire import PeersRequest, Request

    columns = {kind for row in t.TRANSITIONS.values() for kind in row}
    examples = {
        ResultRequest: ResultRequest(1, "c1", ["x"]),
        WaitingRequest: WaitingRequest(1, "c1", "a reason"),
        ToolRequest: ToolRequest(1, "count", []),
        SendRequest: SendRequest(1, "peer", "hello"),
        ReplyRequest: ReplyRequest(1, "peer", "hello"),
    }
    assert set(examples) == set(Request.__args__) - {PeersRequest}  # type: ignore[attr-defined]
    for request in examples.values():
        event = t.asked(request, NOBODY, None, at(0), "new")
        assert type(event) in columns, type(event)
        assert event.request is request  # type: ignore[union-attr]
    agent = (Path(t.__file__).parent.parent / "agent" / "actor.py").read_text()
    named = set(re.findall(r"\b(\w+Request)\b", agent))
    assert named <= {"PeersRequest", "ToolRequest", "Request", "TurnRequest"}, named
