"""The turn's events: what happened, with the time it happened.

The AgentActor makes one of each message it gets (and of each answer to an effect that asks),
and `machine.step` looks it up in the table by the event's type (a timer's, by which timer).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from ...harnesses.base import AttemptResult, OperationResult
from ...wire import ReplyRequest, Response, ResultRequest, SendRequest, ToolRequest, WaitingRequest
from ..instant import Instant
from ..mail.words import Mail, Posted, StandingView
from ..outcomes import Outcome
from ..rules import CallView, Refusal
from .state import StartOp, StartTurn, Timer


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


class RunsWith(msgspec.Struct, frozen=True):
    """The attempt or operation just started runs with these settings, which its harness chose: not
    the agent's as `set` left them (a fork's agent, switching at its first real turn to those given)."""

    call_id: str
    model: str | None
    effort: str | None


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
    last_lines: tuple[str, ...] = ()  # what an attempt the turn stopped said last (harnesses/said.py)


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
    TurnAsked | QueuedExpired | AttemptEnded | AttemptNotStarted | RunsWith | MailTaken | MailArrived | MessageTurnReady
    | TimerFired | CancelAsked | Settled | ResultAsked | AnswerRecorded | WaitingAsked | ToolAsked | ToolFinished
    | PostAsked | PostAnswered | ToolsSet | DeliveryReceived | Closing | OpAsked | OpEnded | StopAsked
)
