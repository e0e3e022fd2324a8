"""The agent's queue and its operations (a compaction, a switch of settings, a fork's copy),
what it does between turns, stopping it, and closing it.

An operation runs between turns, in order with them: asked while the agent is busy, it waits in
the queue as a turn does. Stopping ends what runs cancelled and what is queued unstarted, and
the agent takes nothing after.
"""

from __future__ import annotations

import math
from typing import Any

from msgspec.structs import replace

from ...harnesses.base import OperationResult
from .. import rules
from ..instant import Instant
from ..mail.rules import MESSAGE_TURN_SECONDS
from ..mail.words import StateChanged
from ..outcomes import Answered, Blocked, Cancelled, Failed, Outcome, TimedOut, Turn
from ..rules import CallView
from .effects import (
    Announce,
    ArmTimer,
    Effect,
    Finished,
    HoldUntilSettled,
    OpenMessageTurn,
    RecordCallOpened,
    RecordTurnEnded,
    RegisterCall,
    Respond,
    RunOp,
    Step,
    StopTurn,
    SwitchSettings,
    TakeMail,
    TellBoard,
)
from .events import CancelAsked, Closing, MailTaken, OpAsked, OpEnded, QueuedExpired, Settled, StopAsked, TimerFired
from .moves import busy, finish, never_started, ran_with, record, refused_stopped, then, with_call
from .state import QUEUED_TOO_LONG, AgentState, OpState, Phase, StartOp, Timer
from .turns import begin

# The queue ----------------------------------------------------------------------------


def _end_queued(state: AgentState, call_id: str, call_state: rules.CallState, outcome: Outcome, at: Instant) -> Step:
    """A turn that never started ends now: its call is recorded, and so is how it ended."""
    start = next(start for start in state.queue if start.call_id == call_id)
    queue = tuple(queued for queued in state.queue if queued.call_id != call_id)
    ended = never_started(state, start, outcome, at)
    if isinstance(start, StartOp):
        return replace(state, queue=queue), [RecordTurnEnded(ended), Finished(call_id, ended)]
    calls = with_call(state, call_id, CallView(state.key, call_state, start.deadline))
    return replace(state, queue=queue, calls=calls), [
        RegisterCall(call_id),
        RecordCallOpened(call_id, start.n, start.prompt, start.taught.schema, at.ms(start.deadline)),
        RecordTurnEnded(ended),
        Finished(call_id, ended),
    ]


def queued_expired(state: AgentState, event: QueuedExpired) -> Step:
    return _end_queued(state, event.call_id, "expired", TimedOut(QUEUED_TOO_LONG), event.at)


def cancel_queued(state: AgentState, event: CancelAsked) -> Step:
    """A queued turn or operation cancelled never starts; its canceller is answered at once."""
    state, ended = _end_queued(state, event.call_id, "ended", event.outcome, event.at)
    return state, [*ended, Respond(None)]


def answer_now(state: AgentState, event: CancelAsked) -> Step:
    """Nothing of the agent's has that id (any more): the canceller is answered at once."""
    return state, [Respond(None)]


def next_work(state: AgentState, event: MailTaken) -> Step:
    """Between turns: mail first (in a turn of its own), then the workflow's next turn or operation."""
    if event.mail:
        at = event.at
        deadline = at.loop + MESSAGE_TURN_SECONDS
        asker_until = event.standing.latest_asker_until
        if asker_until is not None and not math.isinf(asker_until):
            deadline = max(deadline, asker_until)  # an asker waiting longer lengthens it
        return state, [OpenMessageTurn(event.mail, min(deadline, state.run_deadline))]
    if state.queue:
        start, *rest = state.queue
        if isinstance(start, StartOp):
            return _begin_op(replace(state, queue=tuple(rest)), start, event.at)
        return begin(replace(state, queue=tuple(rest)), start, event.at)
    return state, [Announce("idle")]


# Operations ---------------------------------------------------------------------------


def op_asked(state: AgentState, event: OpAsked) -> Step:
    """Run the operation now, or queue it behind what the agent is doing; a harness that can't fails it at once."""
    op = event.op
    if state.stopped is not None:
        return refused_stopped(state, op, event.at)
    if op.refusal is not None:
        ended = never_started(state, op, Failed(op.refusal, False), event.at)
        return state, [RecordTurnEnded(ended), Finished(op.call_id, ended)]
    if busy(state):
        return replace(state, queue=(*state.queue, op)), []
    return _begin_op(state, op, event.at)


def _begin_op(state: AgentState, op: StartOp, at: Instant) -> Step:
    running = OpState(op, at.loop)
    if at.loop >= op.deadline:
        return _end_op(state, running, TimedOut(QUEUED_TOO_LONG), None, at)
    if op.kind == "set":  # nothing to run: later attempts take the settings
        state = replace(
            state,
            model=op.model if op.model is not None else state.model,
            effort=op.effort if op.effort is not None else state.effort,
        )
        return then([SwitchSettings(op.model, op.effort)], _end_op(state, running, Answered(None), None, at))
    effects: list[Effect] = [Announce("working"), RunOp(op, state.session)]
    if not math.isinf(op.deadline):
        effects.append(ArmTimer(op.call_id, Timer.DEADLINE, op.deadline))
    return replace(state, op=running), effects


def _op(state: AgentState) -> OpState:
    op = state.op
    assert op is not None
    return op


def op_ended(state: AgentState, event: OpEnded) -> Step:
    """Its CLI reported: the operation is over (a compaction's session and summary taken, a fork's copy made)."""
    op = _op(state)
    result = event.result
    ending = result.ending
    state = ran_with(state, result.settings)
    if ending.kind != "exited":
        outcome: Outcome = (
            Failed(ending.reason, ending.retryable) if ending.kind == "failed"
            else Blocked(ending.reason) if ending.kind == "blocked" else TimedOut(ending.reason)
        )
        return then([StopTurn(op.op.call_id)], _end_op(state, op, outcome, result, event.at))
    if op.op.kind == "compaction":
        state = replace(state, session=result.session or state.session)
        return then([StopTurn(op.op.call_id)], _end_op(state, op, Answered(result.summary), result, event.at))
    return then([StopTurn(op.op.call_id)], _end_op(state, op, Answered(op.op.fork), result, event.at))


def op_timed_out(state: AgentState, event: TimerFired) -> Step:
    op = _op(state)
    return _stop_op(state, op, TimedOut(f"the {op.op.kind}'s deadline passed before its CLI reported"))


def cancel_op(state: AgentState, event: CancelAsked) -> Step:
    """Stop the operation; its canceller is answered once its CLI is gone."""
    state, stopped = _stop_op(state, _op(state), event.outcome)
    return state, [*stopped, HoldUntilSettled(event.call_id)]


def op_settled(state: AgentState, event: Settled) -> Step:
    """The stopped operation's CLI is gone: it ends as it was stopped, the context as it was."""
    op = _op(state)
    assert op.outcome is not None
    return _end_op(state, op, op.outcome, None, event.at)


def _stop_op(state: AgentState, op: OpState, outcome: Outcome) -> Step:
    """Stop the operation's CLI; it ends with `outcome` once the CLI is gone, the context as it was."""
    return replace(state, op=replace(op, outcome=outcome)), [StopTurn(op.op.call_id)]


def _op_record(state: AgentState, op: OpState, outcome: Outcome, result: OperationResult | None, at: Instant) -> Turn:
    session = result.session if result is not None and op.op.kind == "fork" else state.session
    return Turn(
        outcome=outcome, agent=state.key, call_id=op.op.call_id, n=op.op.n, started_at=at.wall_of(op.started_at),
        ended_at=at.wall, usage=result.usage if result is not None else None, session=session, kind=op.op.kind,
        model=state.model, effort=state.effort, forked_from=state.forked_from,
    )


def _end_op(state: AgentState, op: OpState, outcome: Outcome, result: OperationResult | None, at: Instant) -> Step:
    """The operation is over: recorded, its asker answered, and the agent takes its next work."""
    ended = _op_record(state, op, outcome, result, at)
    after: list[Effect] = [TakeMail()] if state.stopped is None else []
    return replace(state, op=None), [RecordTurnEnded(ended), Finished(op.op.call_id, ended), *after]


# Stopping and closing -----------------------------------------------------------------


def stop_asked(state: AgentState, event: StopAsked) -> Step:
    """Stop the agent: what runs settles cancelled, what is queued never starts; answered once all is gone."""
    why = f"the agent was stopped: {event.reason}" if event.reason else "the agent was stopped"
    state = replace(state, stopped=why)
    stop: Turn[Any] = Turn(
        outcome=Cancelled(why), agent=state.key, call_id=event.call_id, n=0, started_at=event.at.wall,
        ended_at=event.at.wall, kind="stop", session=state.session, model=state.model, effort=state.effort,
        forked_from=state.forked_from,
    )
    effects: list[Effect] = [Announce("stopped", why), RecordTurnEnded(stop)]
    for start in state.queue:
        state, ended = _end_queued(state, start.call_id, "ended", Cancelled(why), event.at)
        effects += ended
    turn, op = state.turn, state.op
    if op is not None:
        if op.outcome is None:
            state, stopped = _stop_op(state, op, Cancelled(why))
            effects += stopped
        return state, [*effects, HoldUntilSettled(op.op.call_id)]
    if turn is None:
        return state, [*effects, Respond(None)]
    held = [*effects, HoldUntilSettled(turn.call_id)]
    if turn.phase is Phase.ENDING:
        return state, held
    return then(held, finish(state, turn, Cancelled(why)))


def closing(state: AgentState, event: Closing) -> Step:
    """The agent is closing: what it hadn't settled ends cancelled, on the record."""
    reason = "the agent was closed (the run ended) before the turn did"
    effects: list[Effect] = [
        Announce("stopped", "its agent was closed"),
        TellBoard(StateChanged(state.key, "stopped", "its agent was closed")),  # its questions end
    ]
    if state.turn is not None:
        effects.append(RecordTurnEnded(record(state, state.turn, state.turn.outcome or Cancelled(reason), event.at)))
    if state.op is not None:
        effects.append(RecordTurnEnded(_op_record(state, state.op, state.op.outcome or Cancelled(reason), None, event.at)))
    effects += [RecordTurnEnded(never_started(state, start, Cancelled(reason), event.at)) for start in state.queue]
    return state, effects
