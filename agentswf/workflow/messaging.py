"""Routes between agents and people, participants outside the run, and the workflow's own inbox."""

from __future__ import annotations

from typing import Any

import anyio

from ..engine.mail.rules import MAX_ROUTE_MESSAGES
from ..engine.mail.switchboard import WORKFLOW_KEY, Mail
from ..engine.rules import Refusal
from ..engine.tools.call import CURRENT_TOOL_CALL
from ..errors import DefinitionError, MessageRefused, WorkflowError
from .port import MailPort


def not_in_handler(what: str) -> None:
    call = CURRENT_TOOL_CALL.get()
    if call is not None:
        raise WorkflowError(
            f"{what} can't be used inside a tool handler ({call.tool}): the agent that called it is waiting "
            "for the handler to return"
        )


class Route:
    """An open route between two ends; `close()` ends it (later sends are refused `closed`)."""

    def __init__(self, mail: MailPort, route_id: str, sender: str, receiver: str, purpose: str) -> None:
        self._mail = mail
        self.id = route_id
        self.sender = sender
        self.receiver = receiver
        self.purpose = purpose
        self.closed = False

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await self._mail.close_route(self.id)

    def __repr__(self) -> str:
        return f"<Route {self.sender}→{self.receiver} {self.purpose!r}{' closed' if self.closed else ''}>"


class Participant:
    """Someone outside the run (or the workflow itself): reads and answers through `awf inbox` /
    `awf reply`, or these calls."""

    def __init__(self, mail: MailPort, key: str) -> None:
        self._mail = mail
        self.key = key

    async def inbox(self) -> list[Mail]:
        """Unread messages, now (marks them read)."""
        return await self._mail.inbox(self.key)

    async def receive(self) -> Mail:
        """The next unread message, waiting for one."""
        not_in_handler("receive")
        return await self._mail.receive(self.key)

    async def send(self, peer: str, text: str) -> str:
        """Send `peer` a message; returns when it reads it. Raises MessageRefused."""
        return await self._post(peer, text, reply=False)

    async def reply(self, peer: str, text: str) -> str:
        """Answer the question `peer` asked. Raises MessageRefused (`none-owed`, `expired`, …)."""
        return await self._post(peer, text, reply=True)

    async def _post(self, peer: str, text: str, *, reply: bool) -> str:
        answer = await self._mail.post(self.key, peer, text, reply=reply)
        if isinstance(answer, Refusal):
            raise MessageRefused(answer.code, answer.message)
        return answer.read


class Participants:
    """`wf.participants.open(key)`: people and programs outside the run."""

    def __init__(self, mail: MailPort, keys: set[str]) -> None:
        self._mail = mail
        self._keys = keys  # shared with the agents: one key namespace
        self._open: dict[str, Participant] = {}
        self._opening: dict[str, anyio.Event] = {}  # waited on until the key opens: a test's scripted participant

    def _opened(self, key: str) -> anyio.Event:
        """Set once the workflow has opened `key`: agentswf.testing's scripted participants wait on it."""
        event = self._opening.setdefault(key, anyio.Event())
        if key in self._open:
            event.set()
        return event

    async def open(self, key: str) -> Participant:
        if key in self._open:
            return self._open[key]
        if key in self._keys or key == WORKFLOW_KEY:
            raise DefinitionError(f"{key} is already an agent or participant of this run; keys are shared")
        self._keys.add(key)
        await self._mail.register(key)
        participant = self._open[key] = Participant(self._mail, key)
        if key in self._opening:
            self._opening[key].set()
        return participant


def end_key(end: Any) -> str:
    """The key of a route's end: an Agent, a Participant, the Workflow, or a key."""
    if isinstance(end, str):
        return end
    key = getattr(end, "key", None)
    if isinstance(key, str):
        return key
    if getattr(end, "is_workflow", False):
        return WORKFLOW_KEY
    raise DefinitionError(f"{end!r} is not an agent, a participant or a key")


async def open_route(
    mail: MailPort, sender: Any, receiver: Any, *, purpose: str, both_ways: bool, max_messages: int | None
) -> Route:
    limit = MAX_ROUTE_MESSAGES if max_messages is None else max_messages
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_ROUTE_MESSAGES:
        raise DefinitionError(f"max_messages can only lower the limit of {MAX_ROUTE_MESSAGES}; got {max_messages!r}")
    a, b = end_key(sender), end_key(receiver)
    route_id = await mail.open_route(a, b, purpose, both_ways, limit)
    if isinstance(route_id, Refusal):
        raise DefinitionError(f"route {a} → {b}: {route_id.message}")
    return Route(mail, route_id, a, b, purpose)

