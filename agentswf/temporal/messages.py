"""What crosses Temporal between a workflow and the workers that run its agents' turns.

Plain msgspec Structs, sent as their builtins (Temporal's JSON payloads): a worker needs
none of the workflow's code or types, only these. Names are part of the wire: a running
workflow and a newer worker must agree on them.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ..harnesses.runtime import Runtime
from ..sandbox.spec import SandboxSpec

WORKFLOW_TYPE = "agentswf"
TURN_ACTIVITY = "agentswf.turn"
FORK_ACTIVITY = "agentswf.fork"
TOOL_UPDATE = "agentswf.tool"
LOG_QUERY = "agentswf.log"
PENDING_QUERY = "agentswf.pending"
LINES_QUERY = "agentswf.lines"  # the record's lines so far, from given offsets: `awf tail` of a live run
DECIDE_UPDATE = "agentswf.decide"
MAIL_UPDATE = "agentswf.mail"  # an agent's wfa send/reply/peers and its mail, from its worker
OPERATOR_UPDATE = "agentswf.operator"  # a person's awf inbox / send / reply --as KEY: an operator request


class Sealed(msgspec.Struct, frozen=True, kw_only=True):
    """What a holder of the deployment's run key sent (keys.py): `body` (a request's builtins), who sent
    it, a nonce, the id of the key it was signed with, and the HMAC over them and where they belong."""

    body: Any
    by: str
    nonce: str = ""
    key: str
    tag: str


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
    kind: Literal["turn", "compaction", "message"] = "turn"  # a compaction's focus is its `prompt`; a
    # message turn's activity has no prompt of its own: the agent's mail starts its turn on the worker
    can_message: bool = False  # the agent has a route: its worker reaches the workflow's board
    sandbox: SandboxSpec | None = None  # the agent runs in it on the worker (its cwd an absolute path there)


MailOp = Literal["post", "take", "peers", "drop-await", "give-up", "watch"]


class MailRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What an agent's local engine asks of the run's switchboard, from its worker: the update
    `agentswf.mail`. `activity` names the turn's activity (a watch ends with it). Times are Unix seconds."""

    op: MailOp
    agent: str
    activity: str
    peer: str = ""
    text: str = ""
    reply: bool = False
    question: bool = False
    until: float | None = None  # a question's wait ends then; None: never
    in_turn: bool = False
    can_await: bool = True
    why: str = ""
    seen: int = 0  # watch: mail delivered to the agent that its worker has heard of
    version: int = 0  # watch: the agent's standing as its worker has it


class MailReply(msgspec.Struct, frozen=True, kw_only=True):
    """The board's answer, with the agent's standing after (its worker keeps the agent's slot)."""

    standing: dict[str, Any]
    value: Any = None  # post: {"posted": ...} or {"refused": ...}; take: mails; peers: the table
    seen: int = 0
    version: int = 0
    replies: bool = False  # watch: a reply or a notice is among the unread mail


class ForkRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Copy an agent's native session on a worker (the harness's fork: no model call): the
    activity `agentswf.fork`'s input; it answers the copy's session. A sandboxed agent's (`sandbox`)
    is forked in its sandbox with its home kept on the worker for run `run_id` of `workflow`, and the
    copy placed in the kept home of the fork `fork` (working in `fork_cwd`)."""

    agent: str
    runtime: Runtime
    cwd: str
    session: str
    sandbox: SandboxSpec | None = None  # the parent's, as its turns open it (its cwd an absolute path there)
    workflow: str = ""
    run_id: str = ""
    fork: str = ""
    fork_cwd: str = ""


class ToolRequest(msgspec.Struct, frozen=True):
    """A tool call from an agent, read and checked by the worker: the update's argument."""

    agent: str
    tool: str
    call_id: str
    input: Any
    turn: int  # the agent's turn it was made in
    activity: str = ""  # the id of that turn's activity: a call is taken only while it runs


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
    sealed_at: float = 0.0  # Unix seconds, when its starter sealed it: good for a start then, not one copied later
    budget: dict[str, Any] | None = None  # the run's Budget, as builtins: the workflow keeps its spend
    attempt: dict[str, Any] | None = None  # attempts.AttemptInput: the attempt, and what the attempts before left


class RunLines(msgspec.Struct, kw_only=True):
    """What the run's record holds, kept as workflow state: each as the local Recorder writes it
    (a Turn, a ToolCalled, a Logged), as builtins. The host writes them through its Recorder."""

    turns: list[Any] = []
    tools: list[Any] = []
    log: list[Any] = []
    messages: list[Any] = []  # MessageSent and MessageRead, as messages.jsonl's lines
    calls: list[Any] = []  # each turn's call files from its worker: call.json, result.json, attempts and candidates
    durable: list[Any] = []  # the stage records and id'd turns the attempt wrote (attempts.WorkflowDurable)
    attempt: Any = None  # the attempt's record as the workflow left it


class RunEnding(msgspec.Struct, frozen=True, kw_only=True):
    """How the workflow function ended, and its record's lines: the Temporal workflow's result."""

    outcome: Literal["completed", "stopped", "failed", "timed-out", "cancelled"]
    value: Any = None
    reason: str | None = None
    where: str | None = None
    traceback: str | None = None
    lines: RunLines = msgspec.field(default_factory=RunLines)
