"""The local engine's side of the engine port (port.py): the run's actors, asked on anyio."""

from __future__ import annotations

import math

from ..actors import ActorRef
from ..engine.approvals import ApprovalDecision, ApprovalRequest, Decide, ListPending
from ..engine.rules import Refusal
from ..engine.switchboard import (
    CloseRouteRequest,
    Inbox,
    Mail,
    OpenRouteRequest,
    Post,
    Posted,
    Receive,
    Register,
)


class LocalMail:
    """The mail port over the run's Switchboard actor."""

    def __init__(self, board: ActorRef) -> None:
        self._board = board

    async def register(self, key: str) -> None:
        await self._board.ask(Register(key=key, kind="participant", can_await=False))

    async def open_route(
        self, sender: str, receiver: str, purpose: str, both_ways: bool, max_messages: int
    ) -> str | Refusal:
        return await self._board.ask(
            OpenRouteRequest(sender=sender, receiver=receiver, purpose=purpose, both_ways=both_ways, max_messages=max_messages)
        )

    async def close_route(self, route_id: str) -> None:
        await self._board.ask(CloseRouteRequest(route_id))

    async def post(self, sender: str, peer: str, text: str, *, reply: bool) -> Posted | Refusal:
        return await self._board.ask(
            Post(sender=sender, peer=peer, text=text, reply=reply, question=False, until=math.inf, in_turn=True)
        )

    async def inbox(self, key: str) -> list[Mail]:
        return await self._board.ask(Inbox(key))

    async def receive(self, key: str) -> Mail:
        return await self._board.ask(Receive(key))


class LocalDesk:
    """The approvals port over the run's approval desk actor."""

    def __init__(self, desk: ActorRef) -> None:
        self._desk = desk

    async def pending(self) -> list[ApprovalRequest]:
        return await self._desk.ask(ListPending())

    async def decide(self, call_id: str, decision: ApprovalDecision) -> bool:
        return await self._desk.ask(Decide(call_id, decision))
