"""Check-ins, where the harness confirms what it was sent (a claude pane): instead of the one nudge,
a quiet interval, then a check-in; a wait granted since permits another; a check-in that got
neither a result nor a wait within its response window ends the turn `unanswered`."""

from __future__ import annotations

from msgspec.structs import replace

from ..instant import Instant
from ..outcomes import Unanswered
from .effects import ArmTimer, CheckIn, Step
from .events import DeliveryReceived, TimerFired
from .moves import finish, launch, live
from .state import CHECK_IN_UNANSWERED, AgentState, Phase, Timer, TurnState


def instead_of_a_nudge(state: AgentState, turn: TurnState, at: Instant) -> Step:
    """Where a turn would be nudged: end it if a check-in went unanswered, check in now after a
    granted wait (the wait was the quiet), else wait the quiet interval."""
    liveness = state.liveness
    assert liveness is not None
    if turn.check_ins and not turn.waited:
        return finish(state, turn, Unanswered(CHECK_IN_UNANSWERED))
    if turn.waited:
        return check_in(state, turn, at)
    quiet_until = min(turn.deadline, at.loop + liveness.quiet)
    return replace(state, turn=replace(turn, phase=Phase.QUIET)), [ArmTimer(turn.call_id, Timer.QUIET, quiet_until)]


def check_in(state: AgentState, turn: TurnState, at: Instant) -> Step:
    """Send a check-in: the nudge prompt with the fixed deadline; its window starts once received."""
    turn = replace(turn, nudged=True, check_ins=turn.check_ins + 1, waited=False, waiting_until=None, response_until=None)
    return launch(state, turn, CheckIn(turn.nudge_prompt, at.ms(turn.deadline)))


def quiet_over(state: AgentState, event: TimerFired) -> Step:
    """The quiet interval ended: check in, unless a wait was granted meanwhile (it holds until its end)."""
    turn = live(state)
    if turn.waiting_until is not None and event.at.loop < turn.waiting_until:  # granted while quiet
        return replace(state, turn=replace(turn, phase=Phase.WAITING)), [ArmTimer(turn.call_id, Timer.WAIT, turn.waiting_until)]
    return check_in(state, turn, event.at)


def response_due(state: AgentState, event: TimerFired) -> bool:
    """The window of the check-in running now is over, and no wait was granted since."""
    turn = live(state)
    due = turn.response_until is not None and event.at.loop >= turn.response_until
    return bool(turn.check_ins) and not turn.waited and due


def unanswered(state: AgentState, event: TimerFired) -> Step:
    return finish(state, live(state), Unanswered(CHECK_IN_UNANSWERED))


def awaits_receipt(state: AgentState, event: DeliveryReceived) -> bool:
    """A check-in was sent whose receipt hasn't started its window yet."""
    turn = live(state)
    return state.liveness is not None and bool(turn.check_ins) and turn.response_until is None


def received(state: AgentState, event: DeliveryReceived) -> Step:
    """A check-in reached the model: its response window starts now."""
    turn = live(state)
    assert state.liveness is not None
    until = min(turn.deadline, event.at.loop + state.liveness.response)
    turn = replace(turn, response_until=until)
    return replace(state, turn=turn), [ArmTimer(turn.call_id, Timer.RESPONSE, until)]
