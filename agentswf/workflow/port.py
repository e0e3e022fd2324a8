"""The engine port: what the one author surface asks of the engine that runs it.

`Workflow`, `Route`, `Participants` and `Approvals` are written once, in workflow/, over
this port; the local engine (its actors, on anyio: workflow/local.py) and Temporal (workflow
state, in Temporal's deterministic asyncio: temporal/flow.py) each implement it. A feature an
engine doesn't have is refused here, by `refused`, naming the feature and the engine, so the
author surface has one shape on both and says plainly what one of them can't do.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeVar

from ..engine.lines import ApprovalDecision, ApprovalRequest
from ..engine.rules import Refusal
from ..engine.switchboard import Mail, Posted
from ..errors import WorkflowError

if TYPE_CHECKING:
    from .sandboxes import Sandboxes
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
