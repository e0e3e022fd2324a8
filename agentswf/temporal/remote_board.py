"""The switchboard an agent's local engine talks to on a worker: the workflow's, through updates.

A turn's activity runs the agent in a local run of its own; its AgentActor asks its board
what it asks the local Switchboard (`Register`, `Post`, `TakeMail`, `PeersOf`, and tells it
`DropAwait`, `GiveUp`, `StateChanged`). This actor answers each with the update
`agentswf.mail` to the run's workflow, where the board is, and keeps the agent's
`StandingSlot` as each answer says. A watch beside the handlers (the same update, op
`watch`, answered once mail comes or the agent's standing changes) tells the agent
`MailWaiting`, as the local board does: a message that is no reply doesn't wake an agent
that awaits one. Times cross as Unix seconds; the agent's engine keeps them on its loop clock.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import msgspec
import structlog
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError

from ..actors import Actor, ActorRef, handler
from ..engine.mail.switchboard import (
    UNRECORDED_MESSAGE,
    MailWaiting,
    PeersOf,
    Presence,
    Register,
    StandingSlot,
    TakeMail,
)
from ..engine.mail.words import DropAwait, GiveUp, Mail, Post, Posted, StandingView, StateChanged
from ..engine.rules import Refusal
from .keys import RunKey, seal
from .messages import MAIL_UPDATE, MailOp, MailReply, MailRequest

_log = structlog.get_logger("agentswf.temporal")


def seal_update(key: RunKey, handle: WorkflowHandle[Any, Any], name: str, body: Any, agent: str) -> dict[str, Any]:
    """An update to the turn's workflow run, sealed as sent for `agent` by the worker running its turn."""
    return seal(key, body, kind="update", workflow=handle.id, run=handle.run_id or "", name=name, by=f"worker:{agent}")


def to_unix(loop_time: float) -> float | None:
    """A time on the loop's clock as Unix seconds (None for never)."""
    return None if math.isinf(loop_time) else time.time() + (loop_time - anyio.current_time())


def to_loop(unix: float | None) -> float | None:
    return None if unix is None else anyio.current_time() + (unix - time.time())


@dataclass
class Seen:
    """What the turn's activity reads of its agent, kept by its RemoteBoard: its presence (the
    agent's own slot, once registered) and whether it has taken its mail yet."""

    presence: Presence = field(default_factory=Presence)
    took: bool = False
    taking: bool = False  # a take is on its way to the workflow
    handed: bool = False  # mail was handed over that no turn has started on yet
    closing: bool = False  # the activity is ending: mail stays on the workflow's board, unread

    def idle(self) -> bool:
        """Whether the agent has nothing to do: its turns over, no mail on its way to it."""
        if self.presence.state == "working":
            self.handed = False
        return self.presence.state in ("idle", "stopped") and not self.taking and not self.handed

class RemoteBoard(Actor):
    """The board of one agent's turn on a worker; `handle` is its run's workflow, `key` the run key
    its requests are sealed with, `activity` the turn's; with `wake` (a message turn's) the agent
    is told of its mail at once."""

    def __init__(
        self, handle: WorkflowHandle[Any, Any], key: RunKey, agent: str, activity: str, wake: bool, seen: Seen
    ) -> None:
        super().__init__()
        self.handle = handle
        self.key = key
        self.agent = agent
        self.activity = activity
        self.wake = wake
        self.seen = seen
        self.ref_of_agent: ActorRef | None = None
        self.slot = StandingSlot()
        self.can_await = True

    async def _ask(self, op: MailOp, **fields: Any) -> MailReply | None:
        """The workflow's answer; None if it couldn't be reached (the agent's request then changes
        nothing: an error here would stop the board, and the turn with it)."""
        request = MailRequest(op=op, agent=self.agent, activity=self.activity, **fields)
        try:
            raw = await self.handle.execute_update(MAIL_UPDATE, seal_update(self.key, self.handle, MAIL_UPDATE, request, self.agent))
        except WorkflowUpdateRPCTimeoutOrCancelledError:  # the turn's local run ending: its watch with it
            return None
        except (RPCError, WorkflowUpdateFailedError) as error:
            _log.warning("the run's workflow did not answer the agent's mail request", op=op, error=str(error))
            return None
        reply = msgspec.convert(raw, MailReply)
        self._stand(reply.standing)
        return reply

    def _stand(self, standing: dict[str, Any]) -> None:
        view = msgspec.convert(standing, StandingView)
        self.slot.view = msgspec.structs.replace(
            view, awaits_until=to_loop(view.awaits_until), latest_asker_until=to_loop(view.latest_asker_until)
        )

    @handler
    async def register(self, msg: Register) -> None:
        if msg.key != self.agent or msg.ref is None:
            return  # only the turn's own agent is on this board
        self.ref_of_agent = msg.ref
        self.can_await = msg.can_await
        self.seen.presence = msg.presence or self.seen.presence
        self.slot = msg.standing or self.slot
        self._stand(msgspec.to_builtins(self.slot.view))
        self.start_soon(self._watch)

    async def _watch(self) -> None:
        """Tell the agent when mail comes (or its standing changes), for as long as the turn's activity runs."""
        seen, version = 0, -1
        if self.wake and self.ref_of_agent is not None:
            await self.ref_of_agent.tell(MailWaiting())
        while True:
            reply = await self._ask("watch", seen=seen, version=version)
            if reply is None:
                return
            if reply.seen > seen and self.ref_of_agent is not None:
                if self.seen.presence.state != "awaiting-reply" or reply.replies:
                    await self.ref_of_agent.tell(MailWaiting(reply=reply.replies))
            if reply.seen == seen and reply.version == version:
                return  # the activity is over for the workflow: nothing more comes
            seen, version = reply.seen, reply.version

    @handler
    async def post(self, msg: Post) -> Posted | Refusal:
        reply = await self._ask(
            "post", peer=msg.peer, text=msg.text, reply=msg.reply, question=msg.question,
            until=to_unix(msg.until), in_turn=msg.in_turn, can_await=self.can_await,
        )
        if reply is None:
            return Refusal("internal-error", UNRECORDED_MESSAGE)
        value = reply.value
        if "refused" in value:
            return Refusal(value["refused"]["code"], value["refused"]["message"])
        return msgspec.convert(value["posted"], Posted)

    @handler
    async def take_mail(self, msg: TakeMail) -> list[Mail]:
        if self.seen.closing:
            return []  # read in a turn of its own, once this activity has ended
        self.seen.taking = True
        try:
            reply = await self._ask("take")
        finally:
            self.seen.taking = False
        self.seen.took = True
        mail = [] if reply is None else msgspec.convert(reply.value, list[Mail])
        self.seen.handed = self.seen.handed or bool(mail)
        return mail

    @handler
    async def peers_of(self, msg: PeersOf) -> dict[str, Any]:
        reply = await self._ask("peers")
        table: dict[str, Any] = reply.value if reply is not None else {"peers": [], "owes": []}
        return table

    @handler
    async def drop_await(self, msg: DropAwait) -> None:
        await self._ask("drop-await")

    @handler
    async def give_up(self, msg: GiveUp) -> None:
        await self._ask("give-up", why=msg.why)

    @handler
    def state_changed(self, msg: StateChanged) -> None:
        """Its local agent closing as the activity ends: not the agent stopping (the workflow says when)."""
