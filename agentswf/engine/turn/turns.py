"""A turn's life: it starts (or queues), its attempts end, mail and timers continue it, it ends and settles.

Each handler is a move of `machine.TRANSITIONS`: the table has chosen it for where the agent
stands and what happened, so a handler never has to ask whether the event is stale.
"""

from __future__ import annotations

import math

from msgspec.structs import replace

from ...harnesses.base import AttemptEnding
from ...wire.prompts import OWED_REMINDER
from .. import rules
from ..instant import Instant
from ..mail.words import DropAwait, GiveUp, Mail
from ..outcomes import Answered, Blocked, Failed, Outcome, TimedOut, Unanswered, add_usage
from ..rules import CallView
from . import checkins
from .effects import (
    Announce,
    ArmQueuedTimer,
    ArmTimer,
    Continue,
    Effect,
    Finished,
    HoldUntilSettled,
    RecordCallOpened,
    RecordTurnEnded,
    RegisterCall,
    Remind,
    Step,
    TakeMail,
    TellBoard,
    Unlisten,
)
from .events import (
    AttemptEnded,
    AttemptNotStarted,
    CancelAsked,
    MailArrived,
    MailTaken,
    MessageTurnReady,
    RunsWith,
    Settled,
    TimerFired,
    TurnAsked,
)
from .moves import finish, launch, live, ran_with, record, refused_stopped, then, with_call
from .state import NO_RESULT, QUEUED_TOO_LONG, AgentState, Phase, StartTurn, Timer, TurnState

# Starting -----------------------------------------------------------------------------


def start_turn(state: AgentState, event: TurnAsked) -> Step:
    """Nothing else runs: the turn starts now."""
    return begin(state, event.start, event.at)


def queue_turn(state: AgentState, event: TurnAsked) -> Step:
    """Queue the turn behind what the agent is doing; its deadline runs while queued."""
    start = event.start
    effects: list[Effect] = [] if math.isinf(start.deadline) else [ArmQueuedTimer(start.call_id, start.deadline)]
    return replace(state, queue=(*state.queue, start)), effects


def refuse_turn(state: AgentState, event: TurnAsked) -> Step:
    return refused_stopped(state, event.start, event.at)


def begin(state: AgentState, start: StartTurn, at: Instant) -> Step:
    turn = TurnState(
        start.call_id, start.n, start.prompt, start.nudge_prompt, start.taught, start.deadline,
        start.nudge, "workflow", at.loop,
    )
    state = replace(state, turn=turn, calls=with_call(state, start.call_id, CallView(state.key, "open", start.deadline)))
    effects: list[Effect] = [
        RegisterCall(start.call_id),
        RecordCallOpened(start.call_id, start.n, start.prompt, start.taught.schema, at.ms(start.deadline)),
    ]
    if at.loop >= start.deadline:
        return then(effects, finish(state, turn, TimedOut(QUEUED_TOO_LONG)))
    if not math.isinf(start.deadline):
        effects.append(ArmTimer(start.call_id, Timer.DEADLINE, start.deadline))
    return then(effects, launch(state, turn, start.prompt))


def message_turn_ready(state: AgentState, event: MessageTurnReady) -> Step:
    """A turn of its own for mail that found the agent with nothing to do; it takes no result."""
    n = state.message_turns + 1
    turn = TurnState(event.call_id, n, event.prompt, "", NO_RESULT, event.deadline, False, "message", event.at.loop)
    call = CallView(state.key, "open", event.deadline, takes_result=False)
    state = replace(state, turn=turn, message_turns=n, calls=with_call(state, event.call_id, call))
    effects: list[Effect] = [
        RegisterCall(event.call_id),
        RecordCallOpened(event.call_id, n, event.prompt, None, event.at.ms(event.deadline)),
    ]
    if not math.isinf(event.deadline):
        effects.append(ArmTimer(event.call_id, Timer.DEADLINE, event.deadline))
    return then(effects, launch(state, turn, event.prompt))


# An attempt ending --------------------------------------------------------------------


def attempt_not_started(state: AgentState, event: AttemptNotStarted) -> Step:
    return finish(state, live(state), Failed(f"the agent's socket could not be opened: {event.error}", False))


def runs_with(state: AgentState, event: RunsWith) -> Step:
    """What just started runs with other settings than the agent's: its record says so, as later ones' do."""
    return ran_with(state, (event.model, event.effort)), []


def attempt_ended(state: AgentState, event: AttemptEnded) -> Step:
    """A clean exit without an answer reads the agent's mail first; any other end decides at once."""
    turn = live(state)
    result = event.result
    session = result.session or state.session
    turn = replace(turn, session=session, usage=add_usage(turn.usage, result.usage))
    state = ran_with(replace(state, session=session, turn=turn), result.settings)
    ending = result.ending
    if turn.phase is Phase.RUNNING and ending.kind == "exited" and ending.exit_code == 0:
        return replace(state, turn=replace(turn, phase=Phase.READING_MAIL)), [TakeMail()]
    return after(state, turn, ending, event.at)


def after(state: AgentState, turn: TurnState, ending: AttemptEnding, at: Instant) -> Step:
    """The attempt is over and nothing continues the turn: finish, nudge once (or, where the
    harness confirms delivery, check in after a quiet interval), or hold for a granted wait."""
    checked = state.liveness is not None
    waiting = turn.waiting_until is not None and at.loop < turn.waiting_until
    next_ = rules.after_attempt(
        ending, accepted=turn.phase is Phase.RELEASING, nudged=turn.nudged and not checked,
        nudge_allowed=turn.nudge_allowed, waiting=waiting,
    )
    if next_ == "answered":
        return finish(state, turn, Answered(turn.value))
    if next_ == "nudge":
        if checked:
            return checkins.instead_of_a_nudge(state, turn, at)
        return launch(state, replace(turn, nudged=True, waiting_until=None), turn.nudge_prompt)
    if next_ == "wait":
        assert turn.waiting_until is not None
        return replace(state, turn=replace(turn, phase=Phase.WAITING)), [ArmTimer(turn.call_id, Timer.WAIT, turn.waiting_until)]
    if next_ == "unanswered":
        nudged = " after a nudge" if turn.nudged else ""
        why = f"; its last answer was refused: {turn.last_refusal}" if turn.last_refusal else ""
        return finish(state, turn, Unanswered(f"the agent finished{nudged} without an accepted answer{why}"))
    if next_ == "failed":
        return finish(state, turn, Failed(ending.reason, ending.retryable))
    if next_ == "blocked":
        return finish(state, turn, Blocked(ending.reason))
    return finish(state, turn, TimedOut(ending.reason))


# Mail ---------------------------------------------------------------------------------


def take_mail(state: AgentState, event: MailArrived) -> Step:
    """Mail arrived with nothing running: read it now."""
    return state, [TakeMail()]


def has_mail(state: AgentState, event: MailTaken) -> bool:
    return bool(event.mail)


def continue_quiet(state: AgentState, event: MailTaken) -> Step:
    """Mail (the reply awaited, or any) continues a quiet turn."""
    return _continue(state, live(state), event.mail)


def read_mail(state: AgentState, event: MailTaken) -> Step:
    """After a clean exit without an answer: mail continues the turn; else it awaits a reply, is
    reminded once of one it owes, or goes on as any attempt's end without an answer does."""
    turn = live(state)
    if event.mail:
        return _continue(state, turn, event.mail)
    standing = event.standing
    if standing.awaits is not None:  # the reply (or word that none comes) continues the turn
        return replace(state, turn=replace(turn, phase=Phase.AWAITING)), [Announce("awaiting-reply")]
    if standing.owes and not turn.reminded:
        text = OWED_REMINDER.format(peers=", ".join(standing.owes), first=standing.owes[0])
        prompt = Remind(text, None if turn.kind == "message" else (turn.nudge_prompt or turn.prompt))
        return launch(state, replace(turn, reminded=True), prompt)
    effects: list[Effect] = [TellBoard(GiveUp(state.key))] if standing.owes else []
    if turn.kind == "message":
        return then(effects, finish(state, turn, Answered(None)))
    return then(effects, after(state, turn, AttemptEnding("exited"), event.at))


def _continue(state: AgentState, turn: TurnState, mail: tuple[Mail, ...]) -> Step:
    """The turn's next attempt starts with its unread mail."""
    taught = None if turn.kind == "message" else turn.taught
    return launch(state, replace(turn, waiting_until=None), Continue(mail, taught))


# Time ---------------------------------------------------------------------------------


def deadline_passed(state: AgentState, event: TimerFired) -> Step:
    """No answer was accepted by the deadline: the turn ends timed out, its call expired."""
    turn = live(state)
    calls = with_call(state, turn.call_id, CallView(state.key, "expired", turn.deadline))
    return finish(replace(state, calls=calls), turn, TimedOut("the turn's deadline passed before an answer was accepted"))


def released(state: AgentState, event: TimerFired) -> Step:
    """The accepted answer's grace (or the deadline) is over: the turn ends answered."""
    turn = live(state)
    return finish(state, turn, Answered(turn.value))


def before_deadline(state: AgentState, event: TimerFired) -> bool:
    return event.at.loop < live(state).deadline


def wait_over(state: AgentState, event: TimerFired) -> Step:
    """A granted wait ran out before the deadline: as when an attempt ends without an answer."""
    return after(state, replace(live(state), waiting_until=None), AttemptEnding("exited"), event.at)


# Ending -------------------------------------------------------------------------------


def with_last_lines(outcome: Outcome, lines: tuple[str, ...]) -> Outcome:
    """A turn that timed out or failed with its CLI still running says what the CLI said last:
    most often why it hung (a model it can't reach)."""
    if not lines or not isinstance(outcome, TimedOut | Failed):
        return outcome
    return replace(outcome, reason=f"{outcome.reason}; the CLI's last lines:\n" + "\n".join(lines))


def cancel_turn(state: AgentState, event: CancelAsked) -> Step:
    """Cancel the turn; its asker is answered once its CLI is gone."""
    return then([HoldUntilSettled(event.call_id)], finish(state, live(state), event.outcome))


def settled(state: AgentState, event: Settled) -> Step:
    """The ending turn's CLI is gone: recorded, its asker answered; the agent reads its mail next."""
    turn = state.turn
    assert turn is not None and turn.outcome is not None
    ended = record(state, turn, with_last_lines(turn.outcome, event.last_lines), event.at)
    effects: list[Effect] = [Unlisten(), RecordTurnEnded(ended)]
    if event.standing.owes:  # its askers get no answer from this turn, and are told so
        why = f"{state.key}'s turn ended {turn.outcome.kind} without replying"
        effects.append(TellBoard(GiveUp(state.key, why)))
    if event.standing.awaits is not None:  # a question dies with the turn that asked it
        effects.append(TellBoard(DropAwait(state.key)))
    effects.append(Finished(turn.call_id, ended))
    if state.stopped is None:  # a stopped agent's mail stays unread: it is never taken again
        effects.append(TakeMail())
    return replace(state, turn=None), effects
