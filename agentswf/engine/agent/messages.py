"""What an AgentActor is started with and the messages it takes from the run and the workflow."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from ...actors import ActorRef
from ...harnesses.base import Harness
from ...launcher.identity import LiveAttempts
from ...launcher.listener import ConnectionBudget
from ...wire import Request
from ..turn import StartOp, StartTurn

if TYPE_CHECKING:
    from ..mail.switchboard import Presence, StandingSlot
    from ..record.recorder import Appends
    from ..tools.broker import ToolCalls
    from ..tools.tool import Tool

__all__ = ["AGENT_MAILBOX_CAPACITY", "AgentSetup", "CancelTurn", "SetTools", "StartOp", "StartTurn", "StopAgent", "WfaCall"]

AGENT_MAILBOX_CAPACITY = 128


@dataclass(frozen=True, slots=True)
class AgentSetup:
    """Everything an AgentActor is started with."""

    key: str
    harness: Harness
    cwd: Path
    env: Mapping[str, str]
    socket_path: Path  # where its socket listens in a turn (`place.agent_paths`: made at its first turn)
    launcher: Path
    presence: Presence  # the agent sets it, the switchboard reads it
    standing: StandingSlot  # the switchboard sets it, the agent reads it
    calls: dict[str, str]  # the run's call ids, each its agent's: the agent adds its own, and reads for `wrong-agent`
    recorder: ActorRef
    appends: Appends  # the Recorder's lines asked without a mailbox message (record/recorder.py)
    budget: ConnectionBudget
    broker: ToolCalls  # the run's: a tool call runs in the connection task that asked for it
    tools: Mapping[str, Tool]
    board: ActorRef  # the switchboard
    run_deadline: float
    attempts: LiveAttempts  # the run's, shared: whose processes the sockets admit
    session: str | None = None  # the session it starts from: a fork's copy of its parent's, or a continued run's on record
    forked_from: str | None = None



class WfaCall(msgspec.Struct, frozen=True):
    """A decoded `wfa` request that arrived on this agent's socket."""

    request: Request


class CancelTurn(msgspec.Struct, frozen=True, kw_only=True):
    call_id: str
    reason: str
    timed_out: bool = False  # the caller's deadline passed: the turn ends timed-out


class StopAgent(msgspec.Struct, frozen=True):
    """`wf.agents.stop`: answered once what ran has settled cancelled."""

    call_id: str
    reason: str


class SetTools(msgspec.Struct, frozen=True):
    """The agent was reopened with the same tools: the new handlers replace the old."""

    tools: dict[str, Tool]

