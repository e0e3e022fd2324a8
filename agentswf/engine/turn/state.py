"""The turn's state: where an agent stands, what it was asked, and the numbers its rules read.

Frozen: each event gives a new `AgentState` (`machine.step`), nothing changes one in place.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from ...harnesses.usage import Usage
from ...wire.teaching import Taught
from ..outcomes import Outcome
from ..rules import CallView

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

    __hash__ = object.__hash__  # a member is a singleton: hashed by identity, in C (the table is keyed by them)


class Stand(enum.Enum):
    """The transition table's rows besides a turn's phases: the agent with no turn, or what an
    event names when that is not the turn the agent is in."""

    IDLE = "idle"  # no turn, no operation: what is asked starts at once
    OPERATING = "operating"  # an operation's CLI runs
    OP_STOPPING = "op-stopping"  # the operation was stopped or timed out: it ends once its CLI is gone
    STOPPED = "stopped"  # stopped, nothing running: it takes no more work
    QUEUED = "queued"  # the event names a turn or operation still in the queue
    GONE = "gone"  # the event names a call that is no longer (or never was) the agent's

    __hash__ = object.__hash__  # a member is a singleton: hashed by identity, in C (the table is keyed by them)


Row = Phase | Stand


class Timer(enum.Enum):
    DEADLINE = "deadline"
    RELEASE = "release"
    WAIT = "wait"
    QUIET = "quiet"  # the quiet interval is over: check in
    RESPONSE = "response"  # a received check-in's response window is over

    __hash__ = object.__hash__  # a member is a singleton: hashed by identity, in C (the table is keyed by them)


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
