"""The engine port: what the one author surface asks of the engine that runs it.

`Workflow`, `Route`, `Participants` and `Approvals` are written once, in workflow/, over
this port; the local engine (its actors, on anyio: workflow/local.py) and Temporal (workflow
state, in Temporal's deterministic asyncio: temporal/flow.py) each implement it. A feature an
engine doesn't have is refused here, by `refused`, naming the feature and the engine, so the
author surface has one shape on both and says plainly what one of them can't do.
"""

from __future__ import annotations

from typing import Protocol

from ..engine.approvals import ApprovalDecision, ApprovalRequest
from ..engine.rules import Refusal
from ..engine.switchboard import Mail, Posted


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
