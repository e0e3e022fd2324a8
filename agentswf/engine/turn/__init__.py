"""An agent's turn as a state machine: one pure `step(state, event) -> (state, effects)`.

Everything a turn does is decided here, and nowhere else: whether a `wfa` request is
accepted or refused, when an attempt starts (the first, a continuation with mail, the one
reminder of a reply owed, the one nudge), when a wait is granted and runs out, when the
deadline ends the turn, when an accepted answer releases it, and how it settles. The
AgentActor turns its messages into events, calls `step`, and carries out the effects;
`step` does no I/O and reads no clock: time, the agent's standing among its peers and
anything an effect asked for arrive on events. Decisions of one request (who may answer
which call, what a tool call may do) are the pure tables of `rules.py`; this package
strings them into the turn's life.

A turn is always in one `Phase`; only `step` moves it, and only as `machine.TRANSITIONS` says. The agent's state (`AgentState`)
is frozen: each event gives a new one.

By job: `state` (where a turn stands), `events`, `effects`, `machine` (the table and `step`), and
the moves it makes: `turns` (a turn's life), `checkins`, `requests` (`wfa`'s) and `operations`
(the queue, operations, stopping).
"""

from __future__ import annotations

from .effects import (
    Announce as Announce,
)
from .effects import (
    AnswerTool as AnswerTool,
)
from .effects import (
    ArmQueuedTimer as ArmQueuedTimer,
)
from .effects import (
    ArmTimer as ArmTimer,
)
from .effects import (
    AttemptReason as AttemptReason,
)
from .effects import (
    CheckIn as CheckIn,
)
from .effects import (
    Continue as Continue,
)
from .effects import (
    Effect as Effect,
)
from .effects import (
    Finished as Finished,
)
from .effects import (
    HoldUntilSettled as HoldUntilSettled,
)
from .effects import (
    JoinTool as JoinTool,
)
from .effects import (
    OpenMessageTurn as OpenMessageTurn,
)
from .effects import (
    Prompt as Prompt,
)
from .effects import (
    RecordAnswer as RecordAnswer,
)
from .effects import (
    RecordCallOpened as RecordCallOpened,
)
from .effects import (
    RecordCandidate as RecordCandidate,
)
from .effects import (
    RecordToolRefused as RecordToolRefused,
)
from .effects import (
    RecordTurnEnded as RecordTurnEnded,
)
from .effects import (
    RegisterCall as RegisterCall,
)
from .effects import (
    Remind as Remind,
)
from .effects import (
    Respond as Respond,
)
from .effects import (
    RunOp as RunOp,
)
from .effects import (
    SendPost as SendPost,
)
from .effects import (
    StartAttempt as StartAttempt,
)
from .effects import (
    StartTool as StartTool,
)
from .effects import (
    Step as Step,
)
from .effects import (
    StopTool as StopTool,
)
from .effects import (
    StopTurn as StopTurn,
)
from .effects import (
    SwitchSettings as SwitchSettings,
)
from .effects import (
    TakeMail as TakeMail,
)
from .effects import (
    TellBoard as TellBoard,
)
from .effects import (
    Unlisten as Unlisten,
)
from .effects import (
    attempt_reason as attempt_reason,
)
from .events import (
    AnswerRecorded as AnswerRecorded,
)
from .events import (
    AttemptEnded as AttemptEnded,
)
from .events import (
    AttemptNotStarted as AttemptNotStarted,
)
from .events import (
    CancelAsked as CancelAsked,
)
from .events import (
    Closing as Closing,
)
from .events import (
    DeliveryReceived as DeliveryReceived,
)
from .events import (
    Event as Event,
)
from .events import (
    MailArrived as MailArrived,
)
from .events import (
    MailTaken as MailTaken,
)
from .events import (
    MessageTurnReady as MessageTurnReady,
)
from .events import (
    OpAsked as OpAsked,
)
from .events import (
    OpEnded as OpEnded,
)
from .events import (
    PostAnswered as PostAnswered,
)
from .events import (
    PostAsked as PostAsked,
)
from .events import (
    QueuedExpired as QueuedExpired,
)
from .events import (
    ResultAsked as ResultAsked,
)
from .events import (
    Settled as Settled,
)
from .events import (
    StopAsked as StopAsked,
)
from .events import (
    TimerFired as TimerFired,
)
from .events import (
    ToolAsked as ToolAsked,
)
from .events import (
    ToolFinished as ToolFinished,
)
from .events import (
    ToolsSet as ToolsSet,
)
from .events import (
    TurnAsked as TurnAsked,
)
from .events import (
    WaitingAsked as WaitingAsked,
)
from .machine import (
    TRANSITIONS as TRANSITIONS,
)
from .machine import (
    Entry as Entry,
)
from .machine import (
    EventKind as EventKind,
)
from .machine import (
    Ignored as Ignored,
)
from .machine import (
    Move as Move,
)
from .machine import (
    TurnProtocolError as TurnProtocolError,
)
from .machine import (
    When as When,
)
from .machine import (
    decide as decide,
)
from .machine import (
    diagram as diagram,
)
from .machine import (
    kind_of as kind_of,
)
from .machine import (
    row_of as row_of,
)
from .machine import (
    stand as stand,
)
from .machine import (
    step as step,
)
from .requests import (
    tool_answer as tool_answer,
)
from .state import (
    CHECK_IN_UNANSWERED as CHECK_IN_UNANSWERED,
)
from .state import (
    DEFAULT_LIVENESS as DEFAULT_LIVENESS,
)
from .state import (
    NO_RESULT as NO_RESULT,
)
from .state import (
    QUEUED_TOO_LONG as QUEUED_TOO_LONG,
)
from .state import (
    QUIET_SECONDS as QUIET_SECONDS,
)
from .state import (
    RELEASE_GRACE_SECONDS as RELEASE_GRACE_SECONDS,
)
from .state import (
    RESPONSE_WINDOW_SECONDS as RESPONSE_WINDOW_SECONDS,
)
from .state import (
    AgentState as AgentState,
)
from .state import (
    Liveness as Liveness,
)
from .state import (
    OpKind as OpKind,
)
from .state import (
    OpState as OpState,
)
from .state import (
    Phase as Phase,
)
from .state import (
    Queued as Queued,
)
from .state import (
    Row as Row,
)
from .state import (
    Stand as Stand,
)
from .state import (
    StartOp as StartOp,
)
from .state import (
    StartTurn as StartTurn,
)
from .state import (
    Timer as Timer,
)
from .state import (
    ToolRun as ToolRun,
)
from .state import (
    TurnKind as TurnKind,
)
from .state import (
    TurnState as TurnState,
)
