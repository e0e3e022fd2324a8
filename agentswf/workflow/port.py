"""The engine port: what the one author surface asks of the engine that runs it.

`Workflow`, `Agent`, `Route`, `Participants` and `Approvals` are written once, in workflow/, over
this port; the local engine (its actors, on anyio: workflow/local.py) and Temporal (workflow
state, in Temporal's deterministic asyncio: temporal/flow.py) each implement it. A feature an
engine doesn't have is refused here, by `refused`, naming the feature and the engine, so the
author surface has one shape on both and says plainly what one of them can't do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

from ..engine.mail.words import Mail, Posted
from ..engine.outcomes import Turn
from ..engine.record.lines import ApprovalDecision, ApprovalRequest
from ..engine.rules import Refusal
from ..errors import WorkflowError

if TYPE_CHECKING:
    from pathlib import Path

    from ..harnesses.runtime import Runtime
    from ..wire.teaching import Taught
    from .agents import Agent, AgentSpec, Opened
    from .durations import Duration
    from .sandboxes import Sandboxes
    from .tools import Tool
    from .worktrees import RunWorktrees

T = TypeVar("T")


class MailPort(Protocol):
    """The run's switchboard, as routes, participants and the workflow's own inbox use it."""

    async def register(self, key: str) -> None:
        """`key` is a participant of the run from now (a person's or program's end of routes)."""

    async def open_route(
        self, sender: str, receiver: str, purpose: str, both_ways: bool, max_messages: int
    ) -> str | Refusal:
        """The new route's id, or why it can't be opened."""

    async def close_route(self, route_id: str) -> None:
        """The route is closed: later sends on it are refused `closed`."""

    async def post(self, sender: str, peer: str, text: str, *, reply: bool) -> Posted | Refusal:
        """A participant's message (or reply) to `peer`, with no wait for an answer."""

    async def inbox(self, key: str) -> list[Mail]:
        """The participant's unread messages, now, marked read."""

    async def receive(self, key: str) -> Mail:
        """The participant's next unread message, waiting for one."""


class ApprovalPort(Protocol):
    """The tool calls waiting for a person's decision."""

    async def pending(self) -> list[ApprovalRequest]:
        """The calls waiting now, oldest first."""

    async def decide(self, call_id: str, decision: ApprovalDecision) -> bool:
        """False if no call by that id is waiting."""


class AgentDriver(Protocol):
    """One agent's engine, below the one `Agent` (workflow/agents.py) that checks what it is given,
    keeps its ids, budgets and records: locally the agent's actor, asked in order; on Temporal the
    activity each turn is, the agent's session between them and the turns its mail starts."""

    def clock(self) -> float:
        """Now, on the clock a turn's deadline is on (the loop's locally, Unix seconds on Temporal)."""

    def wall(self) -> float:
        """Now, in Unix seconds, as a record's `started_at` is."""

    def new_id(self) -> str:
        """A fresh call id."""

    def deadline(self, timeout: Duration | None, deadline: object) -> float:
        """The one deadline of a turn or operation on `clock`, fixed now, before it is queued."""

    def check_schema(self, key: str, taught: Taught) -> None:
        """Refuse, before anything is queued, a turn's schema this engine can't carry."""

    async def turn(self, agent: Agent, n: int, prompt: str, taught: Taught, deadline: float, nudge: bool) -> Turn[Any]:
        """Run the turn, after the work asked of the agent before it; its Turn, whatever its outcome."""

    def ended(self, turn: Turn[Any], n: int) -> None:
        """The workflow's turn `n` as it ends for the workflow (a budget may have stopped it), kept where
        the engine keeps it."""

    async def compact(self, agent: Agent, n: int, focus: str, deadline: float, refusal: str | None) -> Turn[str]:
        """The compaction's record; `refusal` says why the harness can't, and it fails at once."""

    async def set(self, agent: Agent, n: int, model: str | None, effort: str | None) -> Turn[None]:
        """The switch's record: later turns run with `model` and `effort`."""

    async def set_tools(self, tools: dict[str, Tool]) -> None:
        """The agent's tools from its next call on (a reopening's handlers replace the old)."""

    async def fork(self, agent: Agent, n: int, key: str) -> Turn[Any]:
        """The record of a copy of the agent's session for the fork `key` (its `session`), taken after
        the work asked of the agent before it."""


class AgentsPort(Protocol):
    """What the one `Agents` asks of its engine: where an agent is placed, and to open, fork, stop and
    close one there; what the engine can't do it refuses (`refused`)."""

    def place(
        self, key: str, runtime: Runtime, instructions: str | None, cwd: str | Path | None, sandbox: Any,
        tools: dict[str, Tool] | None,
    ) -> tuple[AgentSpec, Any]:
        """The agent's spec (its cwd as the engine places it) and its sandbox as the engine keeps it
        (None where it is confined when it opens), refusing what the engine can't carry."""

    def same_sandbox(self, existing: Any, given: Any, placed: Any) -> bool:
        """Whether reopening an agent with `given` keeps the sandbox it has."""

    async def open_agent(self, key: str, spec: AgentSpec, tools: dict[str, Tool], sandbox: Any, placed: Any) -> Opened:
        """The agent opened: its driver, settings, launcher and sandbox."""

    def fork_cwd(self, key: str, parent: Agent, cwd: str | Path | None) -> str:
        """The fork's cwd: the parent's unless given."""

    def check_fork(self, parent: Agent) -> None:
        """Refuse a fork of `parent` the engine can't make."""

    async def open_fork(self, parent: Agent, key: str, spec: AgentSpec, tools: dict[str, Tool], session: str) -> Opened:
        """The fork opened on `session`, the copy its parent's driver made."""

    def stopper(self) -> Callable[[Agent, str], Awaitable[None]]:
        """How an agent is stopped, or `refused`: asked before the agent is marked stopped."""

    async def close_agents(self, agents: dict[str, Agent]) -> None:
        """The agents, by key, are closed (marked so already): their work ends, their keys are not opened again."""


class EnginePort(Protocol):
    """What `Workflow` asks of its engine beside mail: its log, concurrency, stages' records, and
    the features one engine has and another refuses (`refused`)."""

    name: str  # as a refusal names it: "local", "Temporal"

    @property
    def mail(self) -> MailPort:
        """The run's switchboard."""

    def log(self, message: str, fields: Mapping[str, Any]) -> None:
        """A line of the run's log and of its progress."""

    async def parallel(self, work: list[Callable[[], Awaitable[T]]], concurrency: int | None) -> list[T]:
        """Every call at once (at most `concurrency` at a time), results in order; the first error
        cancels the rest and is raised as itself, not in an exception group."""

    async def first(self, awaitables: dict[Any, Awaitable[Any]]) -> tuple[Any, Any]:
        """`(name, value)` of whichever awaitable finishes first; the rest are cancelled."""

    async def shielded(self, work: Callable[[], Awaitable[None]]) -> None:
        """`work()` run to its end even while the caller is being cancelled (a stage's routes closing)."""

    async def stage_entered(self, name: str, result: Any) -> tuple[bool, Any]:
        """A stage begins: (True, its value) where the engine has it already (a continued run's record)."""

    async def stage_completed(self, name: str, value: Any) -> None:
        """The stage's value, kept before the stage returns it."""

    def stage_left(self) -> None:
        """The stage ended, whichever way."""

    def sandboxes(self) -> Sandboxes:
        """`wf.sandboxes`, or `refused`."""

    def worktrees(self) -> RunWorktrees:
        """The run's git worktrees (`wf.worktree`), or `refused`."""


def plain(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A log line's fields as the record keeps them: JSON scalars as they are, anything else its repr."""
    return {k: v if isinstance(v, (str, int, float, bool, type(None))) else repr(v) for k, v in fields.items()}


def refused(feature: str, engine: str) -> NoReturn:
    """What `engine` can't do, refused in one form: the feature, the engine, and where to read more."""
    raise WorkflowError(f"{feature} is not on the {engine} engine yet (docs/guide/temporal.md says what is)")
