"""What crosses Temporal between a workflow and the workers that run its agents' turns.

Plain msgspec Structs, sent as their builtins (Temporal's JSON payloads): a worker needs
none of the workflow's code or types, only these. Names are part of the wire: a running
workflow and a newer worker must agree on them.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ..harnesses.runtime import Runtime

WORKFLOW_TYPE = "agentswf"
TURN_ACTIVITY = "agentswf.turn"
TOOL_UPDATE = "agentswf.tool"
LOG_QUERY = "agentswf.log"
PENDING_QUERY = "agentswf.pending"
DECIDE_UPDATE = "agentswf.decide"
RECORD_FILE = "temporal.json"  # beside a Temporal run's record: its workflow id, address, namespace, task queue


class ToolSpec(msgspec.Struct, frozen=True):
    """A tool as the agent sees it: its input's JSON Schema, rebuilt as a type on the worker."""

    name: str
    description: str
    input: dict[str, Any]
    timeout: float | None


class TurnRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One turn of one agent, whole: the activity's input. `deadline` is Unix seconds, fixed by
    the workflow before the turn is scheduled, so a retried attempt has the same one."""

    workflow: str
    run_id: str
    agent: str
    n: int
    runtime: Runtime
    cwd: str
    instructions: str | None  # only on the agent's first turn, as the local engine teaches them
    prompt: str
    schema: dict[str, Any]
    tools: tuple[ToolSpec, ...] = ()
    deadline: float
    nudge: bool = True
    session: str | None = None  # the agent's native session to resume, from its last turn
    kind: Literal["turn", "compaction"] = "turn"  # a compaction's focus is its `prompt`


class ToolRequest(msgspec.Struct, frozen=True):
    """A tool call from an agent, read and checked by the worker: the update's argument."""

    agent: str
    tool: str
    call_id: str
    input: Any
    turn: int  # the agent's turn it was made in


class ToolReply(msgspec.Struct, frozen=True):
    """The handler's result, or why it failed (the agent reads it as the call's error)."""

    outcome: Literal["result", "failed"]
    result: Any = None
    error: str = ""


class DecideRequest(msgspec.Struct, frozen=True):
    """A person's (or code's) decision on a tool call waiting for approval: `awf approve`/`reject`."""

    call_id: str
    approved: bool
    reason: str = ""
    by: str = ""


class RunRequest(msgspec.Struct, frozen=True, kw_only=True):
    """The Temporal workflow's input: which agentswf workflow to run, with what."""

    workflow: str
    run_id: str
    args: Any = None
    cwd: str
    run_dir: str  # the record's directory on the run's host
    timeout: float
    turn_queue: str  # where agents' turns go unless their Runtime names a queue


class RunLines(msgspec.Struct, kw_only=True):
    """What the run's record holds, kept as workflow state: each as the local Recorder writes it
    (a Turn, a ToolCalled, a Logged), as builtins. The host writes them through its Recorder."""

    turns: list[Any] = []
    tools: list[Any] = []
    log: list[Any] = []


class RunEnding(msgspec.Struct, frozen=True, kw_only=True):
    """How the workflow function ended, and its record's lines: the Temporal workflow's result."""

    outcome: Literal["completed", "stopped", "failed", "timed-out", "cancelled"]
    value: Any = None
    reason: str | None = None
    where: str | None = None
    traceback: str | None = None
    lines: RunLines = msgspec.field(default_factory=RunLines)
