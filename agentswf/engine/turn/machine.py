"""The turn machine: `TRANSITIONS`, the one table that decides every transition, and `step`.

An event is looked up by where the agent stands (its turn's `Phase`, or a `Stand` between turns)
and by its type (a timer's firing, by which timer); an event that names a call (an attempt's end,
a timer, a cancel, a settling) is looked up where that call stands instead: the turn's phase
if it is the agent's turn, `QUEUED`, or `GONE` once it is no longer the agent's. The entry is a
`Move` (its handler, and the rows the agent may stand in after), `Ignored` with the reason a
legal event changes nothing there, or `When`, a test on the event choosing between two. A pair
not in the table can't happen: `step` raises `TurnProtocolError`, as h11 does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from operator import attrgetter
from typing import Any, NamedTuple

from . import checkins, operations, requests, turns
from .effects import Step
from .events import (
    AnswerRecorded,
    AttemptEnded,
    AttemptNotStarted,
    CancelAsked,
    Closing,
    DeliveryReceived,
    Event,
    MailArrived,
    MailTaken,
    MessageTurnReady,
    OpAsked,
    OpEnded,
    PostAnswered,
    PostAsked,
    QueuedExpired,
    ResultAsked,
    RunsWith,
    Settled,
    StopAsked,
    TimerFired,
    ToolAsked,
    ToolFinished,
    ToolsSet,
    TurnAsked,
    WaitingAsked,
)
from .moves import hold
from .state import AgentState, Phase, Row, Stand, Timer

Handler = Callable[[AgentState, Any], Step]
EventKind = type | Timer  # an event's type; a timer's firing, by which timer


class TurnProtocolError(RuntimeError):
    """An event where the table has no entry for it: the actor broke the turn's protocol (a bug)."""

    def __init__(self, row: Row, kind: EventKind) -> None:
        super().__init__(f"no transition for {_name(kind)} in {row.name}")
        self.row, self.kind = row, kind


class Ignored(NamedTuple):
    """A legal event that changes nothing where it finds the agent, and why."""

    reason: str


class Move(NamedTuple):
    """The handler that makes the transition, and the rows the agent may stand in after it
    (none named: it stays where it stood)."""

    handle: Handler
    to: frozenset[Row] = frozenset()


class When(NamedTuple):
    """`then` where `test` holds of the state and event, else `otherwise`."""

    test: Callable[[AgentState, Any], bool]
    then: Move
    otherwise: Move | Ignored


Entry = Move | Ignored | When

R, L, M, A, W, Q, E = (
    Phase.RUNNING, Phase.RELEASING, Phase.READING_MAIL, Phase.AWAITING, Phase.WAITING, Phase.QUIET, Phase.ENDING
)
IDLE, OP, OPS, STOPPED, QUEUED, GONE = (
    Stand.IDLE, Stand.OPERATING, Stand.OP_STOPPING, Stand.STOPPED, Stand.QUEUED, Stand.GONE
)
LIVE = (R, L, A, W, Q)  # a turn not yet ending; READING_MAIL is left within the step that enters it
TURN = (*LIVE, E)
AGENT = (*TURN, IDLE, OP, OPS, STOPPED)  # where any request of the agent's or the workflow's may find it


def _to(*rows: Row) -> frozenset[Row]:
    return frozenset(rows)


def _each(rows: Iterable[Row], entry: Entry) -> dict[Row, Entry]:
    return dict.fromkeys(rows, entry)


def _stopped(state: AgentState, event: object) -> bool:
    return state.stopped is not None


_ENDING = Ignored("the turn is ending already: only its settling and requests count")
_SETTLED = Ignored("it names a call that has settled (a message sent before it did)")

# By event, the rows it may find the agent in; `TRANSITIONS` is the same table by row.
_BY_EVENT: dict[EventKind, dict[Row, Entry]] = {
    # Asked by the workflow
    TurnAsked: {
        IDLE: Move(turns.start_turn, _to(R, E)),
        **_each((*LIVE, OP), Move(turns.queue_turn)),
        **_each((E, OPS), When(_stopped, Move(turns.refuse_turn), Move(turns.queue_turn))),
        STOPPED: Move(turns.refuse_turn),
    },
    OpAsked: {IDLE: Move(operations.op_asked, _to(IDLE, OP)), **_each((*TURN, OP, OPS, STOPPED), Move(operations.op_asked))},
    StopAsked: {
        **_each(LIVE, Move(operations.stop_asked, _to(E))),
        E: Move(operations.stop_asked),
        IDLE: Move(operations.stop_asked, _to(STOPPED)),
        OP: Move(operations.stop_asked, _to(OPS)),
        **_each((OPS, STOPPED), Move(operations.stop_asked)),
    },
    CancelAsked: {
        **_each(LIVE, Move(turns.cancel_turn, _to(E))),
        E: Move(hold),
        OP: Move(operations.cancel_op, _to(OPS)),
        OPS: Move(hold),
        QUEUED: Move(operations.cancel_queued),
        GONE: Move(operations.answer_now),
    },
    Closing: _each((*AGENT, M), Move(operations.closing)),
    ToolsSet: _each(AGENT, Move(requests.tools_set)),
    # The agent's `wfa` requests, and the answers to the effects they ask for
    ResultAsked: _each(AGENT, Move(requests.result_asked)),
    AnswerRecorded: {
        R: Move(requests.answer_recorded, _to(R, L)),
        **{row: Move(requests.answer_recorded, _to(row, E)) for row in (A, W, Q)},
    },
    WaitingAsked: _each(AGENT, Move(requests.waiting_asked)),
    ToolAsked: _each(AGENT, Move(requests.tool_asked)),
    ToolFinished: _each(
        AGENT, When(requests.is_running_tool, Move(requests.tool_finished), Ignored("its call was answered already"))
    ),
    PostAsked: _each(AGENT, Move(requests.post_asked)),
    PostAnswered: _each(AGENT, Move(requests.post_answered)),
    # Mail
    MailArrived: {
        **_each((IDLE, A, W, Q), Move(turns.take_mail)),
        **_each((R, L), Ignored("the attempt running reads it: it is taken when the attempt ends")),
        E: Ignored("the turn is ending: mail is taken once it has settled"),
        **_each((OP, OPS), Ignored("it is taken once the operation is over")),
        STOPPED: Ignored("a stopped agent's mail stays unread"),
    },
    MailTaken: {
        M: Move(turns.read_mail, _to(R, A, W, Q, E)),
        **_each((A, W, Q), When(turns.has_mail, Move(turns.continue_quiet, _to(R)), Ignored("no mail after all: it stays quiet"))),
        IDLE: Move(operations.next_work, _to(IDLE, R, E, OP)),
    },
    MessageTurnReady: {IDLE: Move(turns.message_turn_ready, _to(R))},
    # The turn's attempts
    AttemptEnded: {
        R: Move(turns.attempt_ended, _to(M, E)),
        L: Move(turns.attempt_ended, _to(E)),
        E: Ignored("the turn is ending: its attempt was stopped"),
        GONE: _SETTLED,
    },
    AttemptNotStarted: {R: Move(turns.attempt_not_started, _to(E)), E: _ENDING, GONE: _SETTLED},
    RunsWith: {R: Move(turns.runs_with), OP: Move(turns.runs_with)},
    DeliveryReceived: {
        **_each(LIVE, When(checkins.awaits_receipt, Move(checkins.received), Ignored("no check-in awaits its receipt"))),
        E: _ENDING,
        GONE: _SETTLED,
    },
    Settled: {
        E: Move(turns.settled, _to(IDLE, STOPPED)),
        OPS: Move(operations.op_settled, _to(IDLE, STOPPED)),
        GONE: Ignored("an operation that ended on its own: its CLI is gone now"),
    },
    # Operations
    OpEnded: {
        OP: Move(operations.op_ended, _to(IDLE)),
        OPS: Ignored("it was stopped: it ends once its CLI is gone"),
        GONE: _SETTLED,
    },
    QueuedExpired: {
        QUEUED: Move(operations.queued_expired),
        **_each(TURN, Ignored("the turn started: its own deadline ends it")),
        GONE: Ignored("it ended while queued: cancelled, or its agent stopped"),
    },
    # Timers
    Timer.DEADLINE: {
        **_each((R, A, W, Q), Move(turns.deadline_passed, _to(E))),
        L: Move(turns.released, _to(E)),
        E: _ENDING,
        OP: Move(operations.op_timed_out, _to(OPS)),
        OPS: Ignored("the operation is stopping already"),
        GONE: _SETTLED,
    },
    Timer.RELEASE: {L: Move(turns.released, _to(E)), E: _ENDING, GONE: _SETTLED},
    Timer.WAIT: {
        W: When(turns.before_deadline, Move(turns.wait_over, _to(R, Q, E)), Ignored("the deadline is due: it ends the turn")),
        **_each((R, L, A, Q), Ignored("mail or an answer cut the wait short")),
        E: _ENDING,
        GONE: _SETTLED,
    },
    Timer.QUIET: {
        Q: Move(checkins.quiet_over, _to(W, R)),
        **_each((R, L, A, W), Ignored("mail or an answer cut the quiet interval short")),
        E: _ENDING,
        GONE: _SETTLED,
    },
    Timer.RESPONSE: {
        R: When(checkins.response_due, Move(checkins.unanswered, _to(E)), Ignored("a wait was granted, or a newer check-in's window runs")),
        **_each((L, A, W, Q), Ignored("the check-in's attempt is over: its end decided")),
        E: _ENDING,
        GONE: _SETTLED,
    },
}

ROWS: tuple[Row, ...] = (*Phase, *Stand)
TRANSITIONS: Mapping[Row, Mapping[EventKind, Entry]] = {
    row: {kind: rows[row] for kind, rows in _BY_EVENT.items() if row in rows} for row in ROWS
}
"""The turn's transitions: `TRANSITIONS[row][event kind]`. Nothing else decides one."""

# The call an event names, for each kind of event that names one.
_CALL_OF: dict[type, Callable[[Any], str]] = {
    **dict.fromkeys(
        (QueuedExpired, AttemptEnded, AttemptNotStarted, RunsWith, TimerFired, CancelAsked, Settled, DeliveryReceived,
         OpEnded),
        attrgetter("call_id"),
    ),
    AnswerRecorded: attrgetter("request.call_id"),
}


def stand(state: AgentState) -> Row:
    """Where the agent stands: its turn's phase, or between turns."""
    turn = state.turn
    if turn is not None:
        return turn.phase
    op = state.op
    if op is not None:
        return OP if op.outcome is None else OPS
    return IDLE if state.stopped is None else STOPPED


def _stand_of(state: AgentState, call_id: str) -> Row:
    """Where the call `call_id` stands: the agent's turn's phase or its operation's, queued, or gone."""
    turn = state.turn
    if turn is not None and turn.call_id == call_id:
        return turn.phase
    op = state.op
    if op is not None and op.op.call_id == call_id:
        return OP if op.outcome is None else OPS
    if any(start.call_id == call_id for start in state.queue):
        return QUEUED
    return GONE


def row_of(state: AgentState, event: Event) -> Row:
    """The row `event` is looked up in: where the agent stands, or, for an event that names a
    call, where that call stands."""
    call_of = _CALL_OF.get(type(event))
    return stand(state) if call_of is None else _stand_of(state, call_of(event))


def kind_of(event: Event) -> EventKind:
    return event.timer if isinstance(event, TimerFired) else type(event)


def decide(state: AgentState, event: Event) -> Move | Ignored:
    """The table's entry for `event` where it finds the agent, its test (if any) decided."""
    row = row_of(state, event)
    kind = kind_of(event)
    entry = TRANSITIONS[row].get(kind)
    if entry is None:
        raise TurnProtocolError(row, kind)
    if isinstance(entry, When):
        return entry.then if entry.test(state, event) else entry.otherwise
    return entry


def _unchanged(state: AgentState, event: object) -> Step:
    return state, []


def _run(entry: Entry) -> Handler:
    """The entry as `step` runs it: one call (an ignored event's changes nothing)."""
    if isinstance(entry, Move):
        return entry.handle
    if isinstance(entry, Ignored):
        return _unchanged
    test, then, otherwise = entry.test, entry.then.handle, _run(entry.otherwise)
    return lambda state, event: (then if test(state, event) else otherwise)(state, event)


_RUN: Mapping[Row, Mapping[EventKind, Handler]] = {
    row: {kind: _run(entry) for kind, entry in entries.items()} for row, entries in TRANSITIONS.items()
}


def step(state: AgentState, event: Event) -> Step:
    """The agent's next state, and what to do to get there, after `event`: as `decide` says,
    with its lookup written out, as it runs on every event."""
    call_of = _CALL_OF.get(type(event))
    row = stand(state) if call_of is None else _stand_of(state, call_of(event))
    kind = event.timer if isinstance(event, TimerFired) else type(event)
    handle = _RUN[row].get(kind)
    if handle is None:
        raise TurnProtocolError(row, kind)
    return handle(state, event)


# The table as the docs show it ----------------------------------------------------------


def _name(kind: EventKind) -> str:
    return f"TimerFired({kind.value})" if isinstance(kind, Timer) else kind.__name__


def _moves(entry: Entry) -> list[Move]:
    if isinstance(entry, When):
        return [move for move in (entry.then, entry.otherwise) if isinstance(move, Move)]
    return [entry] if isinstance(entry, Move) else []


def diagram() -> str:
    """Every transition that moves the agent, one line per event and target from the rows it
    moves from (docs/guide/how-it-works.md shows it; a test checks they are the same)."""
    lines: dict[tuple[str, frozenset[Row]], list[Row]] = {}
    for row in ROWS:
        for kind, entry in TRANSITIONS[row].items():
            for move in _moves(entry):
                to = move.to - {row}
                if to:
                    lines.setdefault((_name(kind), to), []).append(row)
    order = {row: n for n, row in enumerate(ROWS)}
    text = []
    for (name, to), rows in lines.items():
        targets = " | ".join(row.name for row in sorted(to, key=order.__getitem__))
        text.append(f"{', '.join(row.name for row in rows)} ── {name} ──▶ {targets}")
    return "\n".join(text) + "\n"
