"""The turn's effects: what the AgentActor does after a step, in order.

An effect that asks (the record of an answer, the agent's mail, a message posted, a turn of its
own for mail) is answered by an event the actor steps in turn.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ...wire import Code, ReplyRequest, Response, ResultRequest, SendRequest, ToolRequest
from ...wire.teaching import Taught
from ..mail.words import DropAwait, GiveUp, Mail, Post, StandingView, StateChanged
from ..outcomes import Turn
from .state import AgentState, StartOp, Timer, TurnKind


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
