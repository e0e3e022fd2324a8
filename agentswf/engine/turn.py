"""An agent's turn as a state machine: one pure `step(state, event) -> (state, effects)`.

Everything a turn does is decided here, and nowhere else: whether a `wfa` request is
accepted or refused, when an attempt starts (the first, a continuation with mail, the one
reminder of a reply owed, the one nudge), when a wait is granted and runs out, when the
deadline ends the turn, when an accepted answer releases it, and how it settles. The
AgentActor turns its messages into events, calls `step`, and carries out the effects;
`step` does no I/O and reads no clock: time, the agent's standing among its peers and
anything an effect asked for arrive on events. Decisions of one request (who may answer
which call, what a tool call may do) are the pure tables of `rules.py`; this module
strings them into the turn's life.

A turn is always in one `Phase`; only `step` moves it. The agent's state (`AgentState`)
is frozen: each event gives a new one.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from typing import Any, Literal

import msgspec
from msgspec.structs import replace

from ..harnesses.base import AttemptEnding, AttemptResult, OperationResult
from ..harnesses.usage import Usage
from ..wire import (
    DEFAULT_WAITING_SECONDS,
    MIN_WAITING_SECONDS,
    Code,
    ReplyRequest,
    Response,
    ResultRequest,
    SendRequest,
    ToolRequest,
    WaitingRequest,
    accepted,
    refused,
)
from ..wire.prompts import OWED_REMINDER, usage_line
from ..wire.teaching import ReadError, Taught
from . import rules
from .agent_time import told
from .clock import Instant
from .mailrules import MESSAGE_TURN_SECONDS
from .notice import notice
from .outcomes import Answered, Blocked, Cancelled, Failed, Outcome, TimedOut, Turn, Unanswered, add_usage
from .rules import CallView, Refusal
from .switchboard import DropAwait, GiveUp, Mail, Post, Posted, StandingView, StateChanged

RELEASE_GRACE_SECONDS = 30.0  # after an accepted answer, for the CLI to finish on its own
# Check-ins, where the harness confirms what it was sent (a claude pane); the liveness policy's numbers.
QUIET_SECONDS = 30.0  # the TUI idle without an answer this long: a check-in is sent
RESPONSE_WINDOW_SECONDS = 120.0  # from the check-in's confirmed receipt, for a result or a wait
CHECK_IN_UNANSWERED = "the check-in received no waiting declaration or result"
NO_RESULT = Taught(str)  # a message turn takes no result; this only fills the slot
QUEUED_TOO_LONG = "the turn's deadline passed while it waited for the agent's earlier turns"

TurnKind = Literal["workflow", "message"]
OpKind = Literal["compaction", "set", "fork"]


class Phase(enum.Enum):
    """Where a turn stands. Between turns there is none (`AgentState.turn` is None)."""

    RUNNING = "running"  # an attempt of its CLI runs; no answer yet
    RELEASING = "releasing"  # its answer is accepted while the attempt runs: the CLI has a grace to exit
    READING_MAIL = "reading-mail"  # the attempt exited cleanly without an answer: its unread mail is taken
    AWAITING = "awaiting"  # quiet: nothing runs; the reply it awaits (or word that none comes) continues it
    WAITING = "waiting"  # quiet: nothing runs; a granted wait holds off the nudge
    QUIET = "quiet"  # the TUI went idle without an answer: a check-in follows the quiet interval
    ENDING = "ending"  # its outcome is decided; it settles once its CLI is gone


class Timer(enum.Enum):
    DEADLINE = "deadline"
    RELEASE = "release"
    WAIT = "wait"
    QUIET = "quiet"  # the quiet interval is over: check in
    RESPONSE = "response"  # a received check-in's response window is over


class StartTurn(msgspec.Struct, frozen=True, kw_only=True):
    """Asked by the workflow: run a turn; answered with its `Turn` once it settles."""

    call_id: str
    n: int
    prompt: str
    nudge_prompt: str
    taught: Taught
    deadline: float  # on the event loop's clock; math.inf for none
    nudge: bool = True


class StartOp(msgspec.Struct, frozen=True, kw_only=True):
    """Asked by the workflow: an operation on the agent, queued in order with its turns; answered with its record.

    A compaction, a switch of model or effort, or the copy of the session a fork starts from.
    """

    call_id: str  # the operation's id on the record
    n: int
    kind: OpKind
    deadline: float
    focus: str = ""  # a compaction's
    model: str | None = None  # a set's
    effort: str | None = None
    fork: str = ""  # a fork's key
    refusal: str | None = None  # why the harness can't: it fails at once, sending nothing


Queued = StartTurn | StartOp


# State --------------------------------------------------------------------------------


class Liveness(msgspec.Struct, frozen=True):
    """How an agent whose harness confirms delivery is checked in on (seconds)."""

    quiet: float = QUIET_SECONDS
    response: float = RESPONSE_WINDOW_SECONDS


DEFAULT_LIVENESS = Liveness()


class TurnState(msgspec.Struct, frozen=True):
    """The turn the agent is in."""

    call_id: str
    n: int
    prompt: str
    nudge_prompt: str
    taught: Taught
    deadline: float  # fixed when the turn was asked for: nothing moves it
    nudge_allowed: bool
    kind: TurnKind
    started_at: float  # loop clock
    phase: Phase = Phase.RUNNING
    nudged: bool = False
    reminded: bool = False  # of a reply it owes, once
    last_refusal: str | None = None  # why its last answer was refused, for the outcome's reason
    value: Any = None  # the accepted answer, once RELEASING
    waiting_until: float | None = None  # a granted wait's end
    check_ins: int = 0  # sent, where delivery is confirmed (each also sets `nudged`)
    waited: bool = False  # a wait was granted since the last check-in
    response_until: float | None = None  # the check-in's response window's end, once it was received
    outcome: Outcome | None = None  # once ENDING
    usage: Usage | None = None
    session: str | None = None


class OpState(msgspec.Struct, frozen=True):
    """The operation the agent is in (between turns): its CLI runs until it reports, or `outcome` stops it."""

    op: StartOp
    started_at: float  # loop clock
    outcome: Outcome | None = None  # once stopping: it settles when its CLI is gone


class ToolRun(msgspec.Struct, frozen=True):
    """The one tool call the agent has running; `joined` once the same call came again."""

    call_id: str
    name: str
    args: tuple[str, ...]
    input: str | None
    joined: bool = False


class AgentState(msgspec.Struct, frozen=True):
    """An agent's state as the turn rules read it. `calls` is never changed in place: replaced."""

    key: str
    launcher: str  # the agent's `wfa`, for the usage lines of hints
    supports_waiting: bool
    run_deadline: float
    tools: Mapping[str, float | None] = msgspec.field(default_factory=dict)  # name -> its timeout, seconds
    turn: TurnState | None = None
    queue: tuple[Queued, ...] = ()
    calls: Mapping[str, CallView] = msgspec.field(default_factory=dict)
    tool: ToolRun | None = None
    session: str | None = None  # the CLI's native session, resumed by every attempt after the first
    message_turns: int = 0
    op: OpState | None = None
    stopped: str | None = None  # why it was stopped: nothing more runs, and whatever is asked is refused
    model: str | None = None  # the settings its next attempt runs with, as `set` left them
    effort: str | None = None
    forked_from: str | None = None
    liveness: Liveness | None = None  # check-ins, where the harness confirms delivery; None: one nudge


# Events: what happened, with the time it happened -----------------------------------


class TurnAsked(msgspec.Struct, frozen=True):
    start: StartTurn
    at: Instant


class QueuedExpired(msgspec.Struct, frozen=True):
    call_id: str
    at: Instant


class AttemptEnded(msgspec.Struct, frozen=True):
    call_id: str
    result: AttemptResult
    at: Instant


class AttemptNotStarted(msgspec.Struct, frozen=True):
    """Its socket couldn't be opened (no descriptor, no room on disk)."""

    call_id: str
    error: str


class MailTaken(msgspec.Struct, frozen=True):
    """The answer to `TakeMail`: the agent's unread mail, and its standing after."""

    mail: tuple[Mail, ...]
    standing: StandingView
    at: Instant


class MailArrived(msgspec.Struct, frozen=True):
    at: Instant


class MessageTurnReady(msgspec.Struct, frozen=True):
    """The answer to `OpenMessageTurn`: its call id and prompt."""

    call_id: str
    prompt: str
    deadline: float
    at: Instant


class TimerFired(msgspec.Struct, frozen=True):
    call_id: str
    timer: Timer
    at: Instant


class CancelAsked(msgspec.Struct, frozen=True):
    call_id: str
    outcome: Outcome  # Cancelled, or TimedOut when the caller's deadline passed
    at: Instant


class Settled(msgspec.Struct, frozen=True):
    """The turn's CLI is gone."""

    call_id: str
    standing: StandingView
    at: Instant


class ResultAsked(msgspec.Struct, frozen=True):
    request: ResultRequest
    standing: StandingView
    foreign: CallView | None  # the call as the run knows it, when it isn't this agent's
    at: Instant


class AnswerRecorded(msgspec.Struct, frozen=True):
    """The answer to `RecordAnswer`: whether the run has the answer on its record."""

    request: ResultRequest
    value: Any
    ok: bool
    standing: StandingView
    at: Instant


class WaitingAsked(msgspec.Struct, frozen=True):
    request: WaitingRequest
    standing: StandingView
    foreign: CallView | None
    at: Instant


class ToolAsked(msgspec.Struct, frozen=True):
    request: ToolRequest
    standing: StandingView
    new_call_id: str  # the id the call gets if it runs
    at: Instant


class ToolFinished(msgspec.Struct, frozen=True):
    call_id: str
    response: Response
    standing: StandingView


class PostAsked(msgspec.Struct, frozen=True):
    request: SendRequest | ReplyRequest
    at: Instant


class PostAnswered(msgspec.Struct, frozen=True):
    request: SendRequest | ReplyRequest
    until: float
    answer: Posted | Refusal
    standing: StandingView
    at: Instant


class ToolsSet(msgspec.Struct, frozen=True):
    tools: Mapping[str, float | None]


class OpAsked(msgspec.Struct, frozen=True):
    op: StartOp
    at: Instant


class OpEnded(msgspec.Struct, frozen=True):
    call_id: str
    result: OperationResult
    at: Instant


class StopAsked(msgspec.Struct, frozen=True):
    """`wf.agents.stop`: what runs ends cancelled, what is queued never starts, nothing is taken after."""

    call_id: str  # the stop's own id on the record
    reason: str
    at: Instant


class DeliveryReceived(msgspec.Struct, frozen=True):
    """The harness saw the model receive the attempt's prompt (claude's transcript)."""

    call_id: str
    at: Instant


class Closing(msgspec.Struct, frozen=True):
    """The agent is closing: what it hadn't settled ends cancelled, on the record."""

    at: Instant


Event = (
    TurnAsked | QueuedExpired | AttemptEnded | AttemptNotStarted | MailTaken | MailArrived | MessageTurnReady
    | TimerFired | CancelAsked | Settled | ResultAsked | AnswerRecorded | WaitingAsked | ToolAsked | ToolFinished
    | PostAsked | PostAnswered | ToolsSet | DeliveryReceived | Closing | OpAsked | OpEnded | StopAsked
)


# Effects: what the actor does, in order -----------------------------------------------


class Respond(msgspec.Struct, frozen=True):
    """Answer the request being handled."""

    response: Response | None


class Continue(msgspec.Struct, frozen=True):
    """An attempt's prompt: the agent's mail (`taught` None in a turn a message started)."""

    mail: tuple[Mail, ...]
    taught: Taught | None


class Remind(msgspec.Struct, frozen=True):
    """An attempt's prompt: the reminder of a reply owed, then `then` (None: a message turn's, rebuilt)."""

    text: str
    then: str | None


class CheckIn(msgspec.Struct, frozen=True):
    """An attempt's prompt: a check-in, `text` (the nudge prompt) then the fixed deadline."""

    text: str
    deadline_ms: int | None


Prompt = str | Continue | Remind | CheckIn


class StartAttempt(msgspec.Struct, frozen=True):
    call_id: str
    n: int
    nudge: bool
    prompt: Prompt
    started_by: TurnKind
    session: str | None


AttemptReason = Literal["turn", "nudge", "reply", "mail", "reminder", "check-in"]


def attempt_reason(effect: StartAttempt) -> AttemptReason:
    """Why the attempt starts, told to the agent (`WFA_ATTEMPT_REASON`): the turn's first attempt, its
    nudge, a reply or other mail that continues it (or starts a turn of its own), a reminder of a reply
    owed, a check-in on a silent turn."""
    prompt = effect.prompt
    if isinstance(prompt, CheckIn):
        return "check-in"
    if isinstance(prompt, Remind):
        return "reminder"
    if isinstance(prompt, Continue):
        return "reply" if any(mail.kind == "reply" for mail in prompt.mail) else "mail"
    return "nudge" if effect.nudge else "turn"


class RunOp(msgspec.Struct, frozen=True):
    """Run the operation's CLI on `session`; the actor steps `OpEnded` (or, stopped, `Settled`)."""

    op: StartOp
    session: str | None


class SwitchSettings(msgspec.Struct, frozen=True):
    """Later attempts run with these settings (None keeps what it had)."""

    model: str | None
    effort: str | None


class ArmTimer(msgspec.Struct, frozen=True):
    """Fire `timer` at `at`; the turn's timers stop with it."""

    call_id: str
    timer: Timer
    at: float


class ArmQueuedTimer(msgspec.Struct, frozen=True):
    call_id: str
    at: float


class StopTurn(msgspec.Struct, frozen=True):
    """Cancel the turn's attempt and timers; tell `Settled` once its CLI is gone."""

    call_id: str


class Unlisten(msgspec.Struct, frozen=True):
    """The turn is over: the agent's socket gives its descriptor back."""


class Announce(msgspec.Struct, frozen=True):
    """The agent's state as `wfa peers` shows it."""

    state: str
    reason: str = ""


class RegisterCall(msgspec.Struct, frozen=True):
    call_id: str


class RecordCallOpened(msgspec.Struct, frozen=True):
    call_id: str
    n: int
    prompt: str
    schema: Any
    deadline_ms: int | None


class RecordTurnEnded(msgspec.Struct, frozen=True):
    record: Turn


class RecordCandidate(msgspec.Struct, frozen=True):
    call_id: str
    at: float  # Unix seconds
    args: list[str]
    input: str | None
    ok: bool
    error: str | None = None


class RecordAnswer(msgspec.Struct, frozen=True):
    """Put the answer on the record; the actor steps `AnswerRecorded` with whether it could."""

    request: ResultRequest
    value: Any
    standing: StandingView


class RecordToolRefused(msgspec.Struct, frozen=True):
    request: ToolRequest
    code: Code
    message: str
    turn_call_id: str


class StartTool(msgspec.Struct, frozen=True):
    """Hold the request for the call's answer, and have the broker run it."""

    call_id: str
    request: ToolRequest
    deadline: float
    turn_call_id: str


class JoinTool(msgspec.Struct, frozen=True):
    """Hold the request: it gets the running call's answer."""


class AnswerTool(msgspec.Struct, frozen=True):
    """Answer every request held for the running call."""

    response: Response


class StopTool(msgspec.Struct, frozen=True):
    call_id: str


class TakeMail(msgspec.Struct, frozen=True):
    """Take the agent's unread mail; the actor steps `MailTaken`."""


class OpenMessageTurn(msgspec.Struct, frozen=True):
    """Build a turn of its own for `mail` (its id, its prompt); the actor steps `MessageTurnReady`."""

    mail: tuple[Mail, ...]
    deadline: float


class SendPost(msgspec.Struct, frozen=True):
    """Pass the message to the switchboard; the actor steps `PostAnswered`."""

    post: Post
    request: SendRequest | ReplyRequest


class TellBoard(msgspec.Struct, frozen=True):
    message: DropAwait | GiveUp | StateChanged


class HoldUntilSettled(msgspec.Struct, frozen=True):
    """Answer the request being handled once the turn `call_id` has settled."""

    call_id: str


class Finished(msgspec.Struct, frozen=True):
    """The turn's record is final: its asker gets it, and whoever waits for it to settle is answered."""

    call_id: str
    record: Turn


Effect = (
    Respond | StartAttempt | ArmTimer | ArmQueuedTimer | StopTurn | Unlisten | Announce | RegisterCall
    | RecordCallOpened | RecordTurnEnded | RecordCandidate | RecordAnswer | RecordToolRefused | StartTool | JoinTool
    | AnswerTool | StopTool | TakeMail | OpenMessageTurn | SendPost | TellBoard | HoldUntilSettled | Finished
    | RunOp | SwitchSettings
)
Step = tuple[AgentState, list[Effect]]


# The machine --------------------------------------------------------------------------


def step(state: AgentState, event: Event) -> Step:
    """The agent's next state, and what to do to get there, after `event`."""
    handle = _HANDLERS[type(event)]
    return handle(state, event)


def _current(state: AgentState, call_id: str) -> TurnState | None:
    """The turn `call_id`, if it is the agent's and not yet ending; a late timer or attempt finds None."""
    turn = state.turn
    if turn is None or turn.call_id != call_id or turn.phase is Phase.ENDING:
        return None
    return turn


def _in_turn(state: AgentState) -> TurnState | None:
    turn = state.turn
    return None if turn is None or turn.phase is Phase.ENDING else turn


def _with_call(state: AgentState, call_id: str, call: CallView) -> dict[str, CallView]:
    return {**state.calls, call_id: call}


def _record(state: AgentState, turn: TurnState, outcome: Outcome, at: Instant) -> Turn:
    return Turn(
        outcome=outcome,
        agent=state.key,
        call_id=turn.call_id,
        n=turn.n,
        nudged=turn.nudged,
        started_at=at.wall_of(turn.started_at),
        ended_at=at.wall,
        usage=turn.usage,
        session=turn.session,
        started_by=turn.kind,
        model=state.model,
        effort=state.effort,
        forked_from=state.forked_from,
    )


def _never_started(state: AgentState, start: Queued, outcome: Outcome, at: Instant) -> Turn:
    kind = start.kind if isinstance(start, StartOp) else "turn"
    return Turn(
        outcome=outcome, agent=state.key, call_id=start.call_id, n=start.n, started_at=at.wall, ended_at=at.wall,
        kind=kind, model=state.model, effort=state.effort, forked_from=state.forked_from,
    )


# Turns starting ---------------------------------------------------------------------


def _turn_asked(state: AgentState, event: TurnAsked) -> Step:
    """Start the turn, or queue it behind the one running; its deadline runs while queued."""
    start = event.start
    if state.stopped is not None:
        return _refused_stopped(state, start, event.at)
    if _busy(state):
        effects: list[Effect] = [] if math.isinf(start.deadline) else [ArmQueuedTimer(start.call_id, start.deadline)]
        return replace(state, queue=(*state.queue, start)), effects
    return _begin(state, start, event.at)


def _begin(state: AgentState, start: StartTurn, at: Instant) -> Step:
    turn = TurnState(
        start.call_id, start.n, start.prompt, start.nudge_prompt, start.taught, start.deadline,
        start.nudge, "workflow", at.loop,
    )
    state = replace(state, turn=turn, calls=_with_call(state, start.call_id, CallView(state.key, "open", start.deadline)))
    effects: list[Effect] = [
        RegisterCall(start.call_id),
        RecordCallOpened(start.call_id, start.n, start.prompt, start.taught.schema, at.ms(start.deadline)),
    ]
    if at.loop >= start.deadline:
        return _finish(state, turn, TimedOut(QUEUED_TOO_LONG), effects)
    if not math.isinf(start.deadline):
        effects.append(ArmTimer(start.call_id, Timer.DEADLINE, start.deadline))
    return _launch(state, turn, start.prompt, effects)


def _end_queued(state: AgentState, call_id: str, call_state: rules.CallState, outcome: Outcome, at: Instant) -> Step:
    """A turn that never started ends now: its call is recorded, and so is how it ended."""
    start = next(start for start in state.queue if start.call_id == call_id)
    queue = tuple(queued for queued in state.queue if queued.call_id != call_id)
    record = _never_started(state, start, outcome, at)
    if isinstance(start, StartOp):
        return replace(state, queue=queue), [RecordTurnEnded(record), Finished(call_id, record)]
    calls = _with_call(state, call_id, CallView(state.key, call_state, start.deadline))
    return replace(state, queue=queue, calls=calls), [
        RegisterCall(call_id),
        RecordCallOpened(call_id, start.n, start.prompt, start.taught.schema, at.ms(start.deadline)),
        RecordTurnEnded(record),
        Finished(call_id, record),
    ]


def _queued_expired(state: AgentState, event: QueuedExpired) -> Step:
    if not any(start.call_id == event.call_id for start in state.queue):
        return state, []
    return _end_queued(state, event.call_id, "expired", TimedOut(QUEUED_TOO_LONG), event.at)


def _message_turn_ready(state: AgentState, event: MessageTurnReady) -> Step:
    """A turn of its own for mail that found the agent with nothing to do; it takes no result."""
    n = state.message_turns + 1
    turn = TurnState(event.call_id, n, event.prompt, "", NO_RESULT, event.deadline, False, "message", event.at.loop)
    call = CallView(state.key, "open", event.deadline, takes_result=False)
    state = replace(state, turn=turn, message_turns=n, calls=_with_call(state, event.call_id, call))
    effects: list[Effect] = [
        RegisterCall(event.call_id),
        RecordCallOpened(event.call_id, n, event.prompt, None, event.at.ms(event.deadline)),
    ]
    if not math.isinf(event.deadline):
        effects.append(ArmTimer(event.call_id, Timer.DEADLINE, event.deadline))
    return _launch(state, turn, event.prompt, effects)


def _launch(state: AgentState, turn: TurnState, prompt: Prompt, effects: list[Effect]) -> Step:
    turn = replace(turn, phase=Phase.RUNNING)
    effects.append(StartAttempt(turn.call_id, turn.n, turn.nudged, prompt, turn.kind, state.session))
    return replace(state, turn=turn), effects


def _attempt_not_started(state: AgentState, event: AttemptNotStarted) -> Step:
    turn = _current(state, event.call_id)
    if turn is None:
        return state, []
    return _finish(state, turn, Failed(f"the agent's socket could not be opened: {event.error}", False), [])


# An attempt ending ------------------------------------------------------------------


def _attempt_ended(state: AgentState, event: AttemptEnded) -> Step:
    turn = _current(state, event.call_id)
    if turn is None:
        return state, []
    result = event.result
    session = result.session or state.session
    turn = replace(turn, session=session, usage=add_usage(turn.usage, result.usage))
    state = replace(state, session=session, turn=turn)
    ending = result.ending
    if turn.phase is Phase.RUNNING and ending.kind == "exited" and ending.exit_code == 0:
        return replace(state, turn=replace(turn, phase=Phase.READING_MAIL)), [TakeMail()]
    return _after(state, turn, ending, event.at, [])


def _after(state: AgentState, turn: TurnState, ending: AttemptEnding, at: Instant, effects: list[Effect]) -> Step:
    """The attempt is over and nothing continues the turn: finish, nudge once, or hold for a granted wait."""
    if state.liveness is not None:
        return _after_checked(state, turn, ending, at, effects)
    waiting = turn.waiting_until is not None and at.loop < turn.waiting_until
    next_ = rules.after_attempt(
        ending, accepted=turn.phase is Phase.RELEASING, nudged=turn.nudged, nudge_allowed=turn.nudge_allowed,
        waiting=waiting,
    )
    if next_ == "answered":
        return _finish(state, turn, Answered(turn.value), effects)
    if next_ == "nudge":
        turn = replace(turn, nudged=True, waiting_until=None)
        return _launch(state, turn, turn.nudge_prompt, effects)
    if next_ == "wait":
        assert turn.waiting_until is not None
        effects.append(ArmTimer(turn.call_id, Timer.WAIT, turn.waiting_until))
        return replace(state, turn=replace(turn, phase=Phase.WAITING)), effects
    if next_ == "unanswered":
        after = " after a nudge" if turn.nudged else ""
        why = f"; its last answer was refused: {turn.last_refusal}" if turn.last_refusal else ""
        return _finish(state, turn, Unanswered(f"the agent finished{after} without an accepted answer{why}"), effects)
    if next_ == "failed":
        return _finish(state, turn, Failed(ending.reason, ending.retryable), effects)
    if next_ == "blocked":
        return _finish(state, turn, Blocked(ending.reason), effects)
    return _finish(state, turn, TimedOut(ending.reason), effects)


# Check-ins, where delivery is confirmed -----------------------------------------------


def _after_checked(state: AgentState, turn: TurnState, ending: AttemptEnding, at: Instant, effects: list[Effect]) -> Step:
    """As `_after`, for a harness that confirms delivery: a quiet interval, then a check-in; a
    wait granted since permits another; a check-in that got neither a result nor a wait ends
    the turn `unanswered`."""
    liveness = state.liveness
    assert liveness is not None
    waiting = turn.waiting_until is not None and at.loop < turn.waiting_until
    next_ = rules.after_attempt(
        ending, accepted=turn.phase is Phase.RELEASING, nudged=False, nudge_allowed=turn.nudge_allowed, waiting=waiting
    )
    if next_ == "wait":
        assert turn.waiting_until is not None
        effects.append(ArmTimer(turn.call_id, Timer.WAIT, turn.waiting_until))
        return replace(state, turn=replace(turn, phase=Phase.WAITING)), effects
    if next_ != "nudge":
        return _unchecked(state, turn, ending, at, effects)
    if turn.check_ins and not turn.waited:
        return _finish(state, turn, Unanswered(CHECK_IN_UNANSWERED), effects)
    if turn.waited:  # the wait was the quiet: check in now
        return _check_in(state, turn, at, effects)
    effects.append(ArmTimer(turn.call_id, Timer.QUIET, min(turn.deadline, at.loop + liveness.quiet)))
    return replace(state, turn=replace(turn, phase=Phase.QUIET)), effects


def _unchecked(state: AgentState, turn: TurnState, ending: AttemptEnding, at: Instant, effects: list[Effect]) -> Step:
    """What `_after` does for an ending no check-in follows (answered, failed, blocked, timed out)."""
    liveness = state.liveness
    state, effects = _after(replace(state, liveness=None), turn, ending, at, effects)
    return replace(state, liveness=liveness), effects


def _check_in(state: AgentState, turn: TurnState, at: Instant, effects: list[Effect]) -> Step:
    """Send a check-in: the nudge prompt with the fixed deadline; its window starts once received."""
    turn = replace(turn, nudged=True, check_ins=turn.check_ins + 1, waited=False, waiting_until=None, response_until=None)
    return _launch(state, turn, CheckIn(turn.nudge_prompt, at.ms(turn.deadline)), effects)


def _check_in_timer(state: AgentState, turn: TurnState, event: TimerFired) -> Step:
    """The quiet interval ended (check in), or a received check-in's response window did."""
    if event.timer is Timer.QUIET:
        if turn.phase is not Phase.QUIET:
            return state, []
        if turn.waiting_until is not None and event.at.loop < turn.waiting_until:  # granted while quiet
            effects: list[Effect] = [ArmTimer(turn.call_id, Timer.WAIT, turn.waiting_until)]
            return replace(state, turn=replace(turn, phase=Phase.WAITING)), effects
        return _check_in(state, turn, event.at, [])
    due = turn.response_until is not None and event.at.loop >= turn.response_until
    if turn.phase is not Phase.RUNNING or not turn.check_ins or turn.waited or not due:
        return state, []
    return _finish(state, turn, Unanswered(CHECK_IN_UNANSWERED), [])


def _delivery_received(state: AgentState, event: DeliveryReceived) -> Step:
    """A check-in reached the model: its response window starts now."""
    turn = _current(state, event.call_id)
    liveness = state.liveness
    if turn is None or liveness is None or not turn.check_ins or turn.response_until is not None:
        return state, []
    until = min(turn.deadline, event.at.loop + liveness.response)
    turn = replace(turn, response_until=until)
    return replace(state, turn=turn), [ArmTimer(turn.call_id, Timer.RESPONSE, until)]


def _mail_arrived(state: AgentState, event: MailArrived) -> Step:
    """Mail arrived: read now if the agent has nothing running, else when its attempt ends."""
    turn = state.turn
    if state.op is not None or state.stopped is not None:  # read once the operation is over; never once stopped
        return state, []
    if turn is None or turn.phase in (Phase.AWAITING, Phase.WAITING, Phase.QUIET):
        return state, [TakeMail()]
    return state, []


def _mail_taken(state: AgentState, event: MailTaken) -> Step:
    turn = state.turn
    if turn is None:
        return _next(state, event)
    if turn.phase in (Phase.AWAITING, Phase.WAITING, Phase.QUIET):
        return _continue(state, turn, event.mail) if event.mail else (state, [])
    if turn.phase is not Phase.READING_MAIL:
        return state, []
    if event.mail:
        return _continue(state, turn, event.mail)
    standing = event.standing
    if standing.awaits is not None:  # the reply (or word that none comes) continues the turn
        return replace(state, turn=replace(turn, phase=Phase.AWAITING)), [Announce("awaiting-reply")]
    if standing.owes and not turn.reminded:
        text = OWED_REMINDER.format(peers=", ".join(standing.owes), first=standing.owes[0])
        then = None if turn.kind == "message" else (turn.nudge_prompt or turn.prompt)
        return _launch(state, replace(turn, reminded=True), Remind(text, then), [])
    effects: list[Effect] = [TellBoard(GiveUp(state.key))] if standing.owes else []
    if turn.kind == "message":
        return _finish(state, turn, Answered(None), effects)
    return _after(state, turn, AttemptEnding("exited"), event.at, effects)


def _continue(state: AgentState, turn: TurnState, mail: tuple[Mail, ...]) -> Step:
    """The turn's next attempt starts with its unread mail."""
    taught = None if turn.kind == "message" else turn.taught
    return _launch(state, replace(turn, waiting_until=None), Continue(mail, taught), [])


def _next(state: AgentState, event: MailTaken) -> Step:
    """Between turns: mail first (in a turn of its own), then the workflow's next turn or operation."""
    if state.op is not None or state.stopped is not None:
        return state, []
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
        return _begin(replace(state, queue=tuple(rest)), start, event.at)
    return state, [Announce("idle")]


# Time -------------------------------------------------------------------------------


def _timer_fired(state: AgentState, event: TimerFired) -> Step:
    op = state.op
    if op is not None and op.op.call_id == event.call_id and op.outcome is None:
        return _stop_op(state, op, TimedOut(f"the {op.op.kind}'s deadline passed before its CLI reported"), [])
    turn = _current(state, event.call_id)
    if turn is None:
        return state, []
    if event.timer is Timer.DEADLINE and turn.phase is not Phase.RELEASING:
        calls = _with_call(state, turn.call_id, CallView(state.key, "expired", turn.deadline))
        return _finish(replace(state, calls=calls), turn, TimedOut("the turn's deadline passed before an answer was accepted"), [])
    if event.timer in (Timer.DEADLINE, Timer.RELEASE):
        return _finish(state, turn, Answered(turn.value), [])
    if event.timer in (Timer.QUIET, Timer.RESPONSE):
        return _check_in_timer(state, turn, event)
    if turn.phase is Phase.WAITING and event.at.loop < turn.deadline:
        # a wait that runs to the deadline ends there: the deadline, not a nudge, ends the turn
        return _after(state, replace(turn, waiting_until=None), AttemptEnding("exited"), event.at, [])
    return state, []


# Ending -----------------------------------------------------------------------------


def _finish(state: AgentState, turn: TurnState, outcome: Outcome, effects: list[Effect]) -> Step:
    """End the turn: its CLI and timers stop, and it settles once the CLI is gone."""
    calls = state.calls
    if calls[turn.call_id].state == "open":
        calls = _with_call(state, turn.call_id, CallView(state.key, "ended", turn.deadline))
    turn = replace(turn, phase=Phase.ENDING, outcome=outcome)
    effects.append(StopTurn(turn.call_id))
    if state.tool is not None:
        effects.append(StopTool(state.tool.call_id))
    return replace(state, turn=turn, calls=calls), effects


def _cancel_asked(state: AgentState, event: CancelAsked) -> Step:
    """Cancel a running or queued turn (or operation); answered once its CLI is gone."""
    if any(start.call_id == event.call_id for start in state.queue):
        state, ended = _end_queued(state, event.call_id, "ended", event.outcome, event.at)
        return state, [*ended, Respond(None)]
    op = state.op
    if op is not None and op.op.call_id == event.call_id:
        if op.outcome is not None:
            return state, [HoldUntilSettled(event.call_id)]
        return _stop_op(state, op, event.outcome, [HoldUntilSettled(event.call_id)])
    turn = state.turn
    if turn is None or turn.call_id != event.call_id:
        return state, [Respond(None)]
    if turn.phase is Phase.ENDING:
        return state, [HoldUntilSettled(turn.call_id)]
    return _finish(state, turn, event.outcome, [HoldUntilSettled(turn.call_id)])


def _settled(state: AgentState, event: Settled) -> Step:
    op = state.op
    if op is not None and op.op.call_id == event.call_id and op.outcome is not None:
        return _end_op(state, op, op.outcome, None, event.at)
    turn = state.turn
    if turn is None or turn.call_id != event.call_id or turn.outcome is None:
        return state, []
    record = _record(state, turn, turn.outcome, event.at)
    effects: list[Effect] = [Unlisten(), RecordTurnEnded(record)]
    if event.standing.owes:  # its askers get no answer from this turn, and are told so
        why = f"{state.key}'s turn ended {turn.outcome.kind} without replying"
        effects.append(TellBoard(GiveUp(state.key, why)))
    if event.standing.awaits is not None:  # a question dies with the turn that asked it
        effects.append(TellBoard(DropAwait(state.key)))
    effects.append(Finished(turn.call_id, record))
    if state.stopped is None:  # a stopped agent's mail stays unread: it is never taken again
        effects.append(TakeMail())
    return replace(state, turn=None), effects


def _closing(state: AgentState, event: Closing) -> Step:
    reason = "the agent was closed (the run ended) before the turn did"
    effects: list[Effect] = [
        Announce("stopped", "its agent was closed"),
        TellBoard(StateChanged(state.key, "stopped", "its agent was closed")),  # its questions end
    ]
    if state.turn is not None:
        effects.append(RecordTurnEnded(_record(state, state.turn, state.turn.outcome or Cancelled(reason), event.at)))
    if state.op is not None:
        effects.append(RecordTurnEnded(_op_record(state, state.op, state.op.outcome or Cancelled(reason), None, event.at)))
    effects += [RecordTurnEnded(_never_started(state, start, Cancelled(reason), event.at)) for start in state.queue]
    return state, effects


# wfa requests -----------------------------------------------------------------------


def _view(state: AgentState, standing: StandingView) -> rules.AgentView:
    return rules.AgentView(
        state.key,
        tool_running=state.tool is not None,
        owes=standing.owes,
        supports_waiting=state.supports_waiting,
        owed_text=standing.owed_text,
    )


def _lead(response: Response, standing: StandingView, *, stderr: bool = False) -> Response:
    """The response, led by the owed/awaits notice (on standard error for a tool: stdout is its result)."""
    lead = notice(standing)
    if not lead:
        return response
    if stderr:
        return replace(response, stderr=lead + response.stderr)
    return replace(response, stdout=lead + response.stdout)


def _refuse(command: str, refusal: Refusal, standing: StandingView) -> list[Effect]:
    return [Respond(_lead(refused(command, refusal.code, refusal.message), standing))]


def _result_asked(state: AgentState, event: ResultAsked) -> Step:
    request, standing = event.request, event.standing
    call = state.calls.get(request.call_id, event.foreign)
    refusal = rules.judge_result(_view(state, standing), request.call_id, call, event.at.loop)
    if refusal is not None:
        return state, _refuse("result", refusal, standing)
    turn = state.turn
    assert turn is not None and turn.call_id == request.call_id
    try:
        value = turn.taught.read(request.args, request.input)
    except ReadError as error:
        usage = usage_line(f"{state.launcher} result {turn.call_id}", turn.taught)
        hint = f"the answer doesn't fit: {error}\nFix it and run wfa result again.\n{usage}"
        return replace(state, turn=replace(turn, last_refusal=str(error))), [
            RecordCandidate(request.call_id, event.at.wall, request.args, request.input, False, str(error)),
            *_refuse("result", Refusal("invalid-result", hint), standing),
        ]
    return state, [RecordAnswer(request, value, standing)]


def _answer_recorded(state: AgentState, event: AnswerRecorded) -> Step:
    request, standing, at = event.request, event.standing, event.at
    turn = _current(state, request.call_id)
    if not event.ok or turn is None:
        message = "the run couldn't record your answer, so it isn't accepted; try again."
        return state, _refuse("result", Refusal("internal-error", message), standing)
    effects: list[Effect] = [RecordCandidate(request.call_id, at.wall, request.args, request.input, True)]
    calls = _with_call(state, turn.call_id, CallView(state.key, "accepted", turn.deadline))
    state = replace(state, calls=calls)
    if standing.awaits is not None:
        effects.append(TellBoard(DropAwait(state.key)))  # answered: the wait for a reply is dropped
    turn = replace(turn, value=event.value)
    if turn.phase is Phase.RUNNING:
        effects.append(ArmTimer(turn.call_id, Timer.RELEASE, min(turn.deadline, at.loop + RELEASE_GRACE_SECONDS)))
        state = replace(state, turn=replace(turn, phase=Phase.RELEASING))
    else:
        state, effects = _finish(state, turn, Answered(event.value), effects)
    effects.append(Respond(_lead(accepted("result", stdout="wfa: result accepted.\n"), standing)))
    return state, effects


def _waiting_asked(state: AgentState, event: WaitingAsked) -> Step:
    request, standing, at = event.request, event.standing, event.at
    call = state.calls.get(request.call_id, event.foreign)
    refusal = rules.judge_waiting(_view(state, standing), request.call_id, call, at.loop)
    if refusal is not None:
        return state, _refuse("waiting", refusal, standing)
    if standing.awaits is not None:
        text = f"wfa: {standing.awaits}'s reply is already awaited; nothing changed.\n"
        return state, [Respond(_lead(accepted("waiting", stdout=text), standing))]
    refusal = rules.judge_waiting_reason(request.reason)
    if refusal is not None:
        return state, _refuse("waiting", refusal, standing)
    turn = state.turn
    assert turn is not None
    requested = None if request.timeout_ms is None else request.timeout_ms / 1000
    until = rules.waiting_until(at.loop, turn.deadline, requested, default=DEFAULT_WAITING_SECONDS, minimum=MIN_WAITING_SECONDS)
    until_ms, deadline_ms, now_ms = at.ms(until), at.ms(turn.deadline), int(at.wall * 1000)
    text = f"wfa: waiting granted until {told(until_ms, now_ms)}"
    text += f"; the turn's deadline is {told(deadline_ms, now_ms)}.\n" if deadline_ms is not None else ".\n"
    response = accepted("waiting", stdout=text, value={"wait_until_ms": until_ms, "deadline_ms": deadline_ms})
    return replace(state, turn=replace(turn, waiting_until=until, waited=True)), [Respond(_lead(response, standing))]


def _tool_asked(state: AgentState, event: ToolAsked) -> Step:
    """A refusal now, or the call runs (or joins the one running) and is answered when it ends."""
    request, standing = event.request, event.standing
    turn = _in_turn(state)
    running = state.tool
    # The same call again joins the running one and gets its answer, once; more are tool-busy.
    same = (
        running is not None
        and not running.joined
        and (running.name, running.args, running.input) == (request.name, tuple(request.args), request.input)
    )
    refusal = rules.judge_tool(
        _view(state, standing),
        in_turn=turn is not None,
        accepted=turn is not None and turn.phase is Phase.RELEASING,
        busy_with=running.name if running is not None else None,
        same_call=same,
        name=request.name,
        tools=tuple(state.tools),
    )
    if refusal is not None:
        turn_call_id = state.turn.call_id if state.turn is not None else ""
        response = _lead(refused("tool", refusal.code, refusal.message), standing, stderr=True)
        return state, [RecordToolRefused(request, refusal.code, refusal.message, turn_call_id), Respond(response)]
    if running is not None:  # the same call again: it gets the running call's answer
        return replace(state, tool=replace(running, joined=True)), [JoinTool()]
    assert turn is not None
    timeout = state.tools[request.name]
    deadline = turn.deadline if timeout is None else min(turn.deadline, event.at.loop + timeout)
    run = ToolRun(event.new_call_id, request.name, tuple(request.args), request.input)
    return replace(state, tool=run), [StartTool(run.call_id, request, deadline, turn.call_id)]


def tool_answer(response: Response, standing: StandingView) -> Response:
    """A tool call's answer as its callers are told it: led by the owed/awaits notice, on
    standard error (standard output is the tool's result)."""
    return _lead(response, standing, stderr=True)


def _tool_finished(state: AgentState, event: ToolFinished) -> Step:
    if state.tool is None or state.tool.call_id != event.call_id:
        return state, []
    return replace(state, tool=None), [AnswerTool(tool_answer(event.response, event.standing))]


def _post_asked(state: AgentState, event: PostAsked) -> Step:
    request = event.request
    turn = _in_turn(state)
    until = turn.deadline if turn is not None else math.inf
    if request.timeout_ms is not None:
        until = min(until, event.at.loop + request.timeout_ms / 1000)
    post = Post(
        sender=state.key,
        peer=request.peer,
        text=request.message,
        reply=isinstance(request, ReplyRequest),
        question=request.await_reply,
        until=until,
        in_turn=turn is not None,
    )
    return state, [SendPost(post, request)]


def _post_answered(state: AgentState, event: PostAnswered) -> Step:
    request, answer = event.request, event.answer
    command = "reply" if isinstance(request, ReplyRequest) else "send"
    if isinstance(answer, Refusal):
        return state, _refuse(command, answer, event.standing)
    verb = "replied to" if command == "reply" else "sent to"
    text = f"wfa: {verb} {request.peer}; it reads it {answer.read}.\n"
    if request.await_reply:
        when = event.at.ms(event.until)
        text += "wfa: its reply starts your next turn"
        text += f"; the wait ends at {told(when, int(event.at.wall * 1000))}.\n" if when is not None else ".\n"
    response = accepted(command, stdout=text, value={"message_id": answer.message_id, "read": answer.read})
    return state, [Respond(_lead(response, event.standing))]


def _tools_set(state: AgentState, event: ToolsSet) -> Step:
    return replace(state, tools=dict(event.tools)), []


# Operations: compactions, sets, a fork's copy, and stopping --------------------------


def _busy(state: AgentState) -> bool:
    """In a turn or an operation: what is asked now waits its place in the queue."""
    return state.turn is not None or state.op is not None


def _refused_stopped(state: AgentState, start: Queued, at: Instant) -> Step:
    """Asked of a stopped agent: it never starts, and says why."""
    record = _never_started(state, start, Cancelled(f"{state.stopped}; it takes no more work"), at)
    return state, [RecordTurnEnded(record), Finished(start.call_id, record)]


def _op_asked(state: AgentState, event: OpAsked) -> Step:
    """Run the operation now, or queue it behind what the agent is doing; a harness that can't fails it at once."""
    op = event.op
    if state.stopped is not None:
        return _refused_stopped(state, op, event.at)
    if op.refusal is not None:
        record = _never_started(state, op, Failed(op.refusal, False), event.at)
        return state, [RecordTurnEnded(record), Finished(op.call_id, record)]
    if _busy(state):
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
        return _end_op(state, running, Answered(None), None, at, [SwitchSettings(op.model, op.effort)])
    effects: list[Effect] = [Announce("working"), RunOp(op, state.session)]
    if not math.isinf(op.deadline):
        effects.append(ArmTimer(op.call_id, Timer.DEADLINE, op.deadline))
    return replace(state, op=running), effects


def _op_ended(state: AgentState, event: OpEnded) -> Step:
    op = state.op
    if op is None or op.op.call_id != event.call_id or op.outcome is not None:
        return state, []  # stopped already: it settles when its CLI is gone
    result = event.result
    ending = result.ending
    if ending.kind != "exited":
        outcome: Outcome = (
            Failed(ending.reason, ending.retryable) if ending.kind == "failed"
            else Blocked(ending.reason) if ending.kind == "blocked" else TimedOut(ending.reason)
        )
        return _end_op(state, op, outcome, result, event.at, [StopTurn(op.op.call_id)])
    if op.op.kind == "compaction":
        state = replace(state, session=result.session or state.session)
        return _end_op(state, op, Answered(result.summary), result, event.at, [StopTurn(op.op.call_id)])
    return _end_op(state, op, Answered(op.op.fork), result, event.at, [StopTurn(op.op.call_id)])


def _stop_op(state: AgentState, op: OpState, outcome: Outcome, effects: list[Effect]) -> Step:
    """Stop the operation's CLI; it ends with `outcome` once the CLI is gone, the context as it was."""
    return replace(state, op=replace(op, outcome=outcome)), [StopTurn(op.op.call_id), *effects]


def _op_record(state: AgentState, op: OpState, outcome: Outcome, result: OperationResult | None, at: Instant) -> Turn:
    session = result.session if result is not None and op.op.kind == "fork" else state.session
    return Turn(
        outcome=outcome, agent=state.key, call_id=op.op.call_id, n=op.op.n, started_at=at.wall_of(op.started_at),
        ended_at=at.wall, usage=result.usage if result is not None else None, session=session, kind=op.op.kind,
        model=state.model, effort=state.effort, forked_from=state.forked_from,
    )


def _end_op(
    state: AgentState, op: OpState, outcome: Outcome, result: OperationResult | None, at: Instant,
    effects: list[Effect] | None = None,
) -> Step:
    """The operation is over: recorded, its asker answered, and the agent takes its next work."""
    record = _op_record(state, op, outcome, result, at)
    after: list[Effect] = [TakeMail()] if state.stopped is None else []
    return replace(state, op=None), [*(effects or []), RecordTurnEnded(record), Finished(op.op.call_id, record), *after]


def _stop_asked(state: AgentState, event: StopAsked) -> Step:
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
            state, stopped = _stop_op(state, op, Cancelled(why), [])
            effects += stopped
        return state, [*effects, HoldUntilSettled(op.op.call_id)]
    if turn is None:
        return state, [*effects, Respond(None)]
    if turn.phase is Phase.ENDING:
        return state, [*effects, HoldUntilSettled(turn.call_id)]
    return _finish(state, turn, Cancelled(why), [*effects, HoldUntilSettled(turn.call_id)])


_HANDLERS: dict[type, Any] = {
    TurnAsked: _turn_asked,
    QueuedExpired: _queued_expired,
    AttemptEnded: _attempt_ended,
    AttemptNotStarted: _attempt_not_started,
    MailTaken: _mail_taken,
    MailArrived: _mail_arrived,
    MessageTurnReady: _message_turn_ready,
    TimerFired: _timer_fired,
    CancelAsked: _cancel_asked,
    Settled: _settled,
    ResultAsked: _result_asked,
    AnswerRecorded: _answer_recorded,
    WaitingAsked: _waiting_asked,
    ToolAsked: _tool_asked,
    ToolFinished: _tool_finished,
    PostAsked: _post_asked,
    PostAnswered: _post_answered,
    ToolsSet: _tools_set,
    DeliveryReceived: _delivery_received,
    Closing: _closing,
    OpAsked: _op_asked,
    OpEnded: _op_ended,
    StopAsked: _stop_asked,
}
