"""The Switchboard: the run's inboxes, open questions, and who awaits whom.

Agents ask it to send, reply and take their mail; what each owes or awaits it tells them,
in the agent's `StandingSlot`, whenever a question opens or closes. It asks only route
actors, which never ask back, and the Recorder (through its `Appends`), which asks no one; it only tells agents,
from a task beside its handlers. So no cycle of asks (or of waits for a full mailbox) can
form however agents message each other. Every decision is a pure rule of `mailrules`."""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import anyio
import msgspec

from ...actors import Actor, ActorRef, Reply, Supervisor, handler
from ...harnesses.said import Said
from ..clock import wall, wall_ms
from ..ids import new_id
from ..record.lines import MessageRead, MessageSent
from ..rules import Refusal
from . import rules as mailrules
from .route import CloseRoute, RouteActor, Spend
from .rules import QuestionView, RouteView
from .words import DropAwait, GiveUp, Mail, MailKind, Post, Posted, StandingView, StateChanged

ROUTE_MAILBOX_CAPACITY = 64
WORKFLOW_KEY = "workflow"  # the workflow itself, as a participant: wf.receive()
UNRECORDED_MESSAGE = "the run couldn't record your message, so it wasn't sent; nothing changed."


# Asks and tells -----------------------------------------------------------------------


@dataclass
class Presence:
    """An agent's state as its peers see it (`wfa peers`), in a slot the agent sets and the switchboard reads.

    A state is a value, so the latest wins: the agent never sends a message per change,
    and a run of thousands of agents can't fill the switchboard's mailbox with them.
    """

    state: str = "not-started"  # PeerState
    reason: str = ""
    said: Said | None = None  # its latest attempt's output as it comes: `awf status` reads its latest line


_NO_STANDING = StandingView()


@dataclass
class StandingSlot:
    """An agent's standing, in a slot the switchboard sets whenever it changes and the agent reads.

    The agent is told, never asks: its rules and the notice heading its answers read the slot,
    with no round trip to the switchboard on any request. `unread` says mail may wait in its
    inbox: the Switchboard keeps it exact, so a turn that settles with nothing unread takes no
    `TakeMail` round trip (mail that comes later wakes the agent, `MailWaiting`); a board that
    doesn't keep it leaves it True, and the agent asks. `routed` says a route of the agent's
    may be open: while the Switchboard knows none ever was, its peers are none, and a turn's
    prompt is made without a `PeersOf` round trip.
    """

    view: StandingView = _NO_STANDING
    unread: bool = True
    routed: bool = True


class Register(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    kind: Literal["agent", "participant"]
    ref: ActorRef | None = None  # an agent's
    can_await: bool = True
    presence: Presence | None = None  # an agent's, which it sets
    standing: StandingSlot | None = None  # an agent's, which the switchboard sets


class OpenRouteRequest(msgspec.Struct, frozen=True, kw_only=True):
    sender: str
    receiver: str
    purpose: str
    both_ways: bool
    max_messages: int


class CloseRouteRequest(msgspec.Struct, frozen=True):
    route: str


class TakeMail(msgspec.Struct, frozen=True):
    key: str


class Standing(msgspec.Struct, frozen=True):
    """Asked (by a test or a tool): whom `key` owes a reply, whose reply it awaits."""

    key: str


class PeersOf(msgspec.Struct, frozen=True):
    key: str


class Receive(msgspec.Struct, frozen=True):
    """A participant's next unread message, waiting for one; answered when one comes."""

    key: str


class Inbox(msgspec.Struct, frozen=True):
    """A participant's unread messages, now (possibly none)."""

    key: str


class Participants(msgspec.Struct, frozen=True):
    """The keys of the run's participants."""


class _Expire(msgspec.Struct, frozen=True):
    question: str


class MailWaiting(msgspec.Struct, frozen=True, kw_only=True):
    """Told to an agent: it has unread mail (a reply it awaits, with `reply`)."""

    reply: bool = False


class CloseAll(msgspec.Struct, frozen=True):
    """The workflow is finishing: every route closes."""


# State --------------------------------------------------------------------------------


@dataclass
class MailEnd:
    """An agent or participant the board delivers to: its inbox, its waiting receivers, its presence
    and standing (the Temporal board keeps the same ends as workflow state)."""
    key: str
    kind: Literal["agent", "participant"]
    ref: ActorRef | None = None
    can_await: bool = True
    presence: Presence = field(default_factory=Presence)
    standing: StandingSlot = field(default_factory=StandingSlot)
    inbox: deque[Mail] = field(default_factory=deque)
    receivers: deque[Reply] = field(default_factory=deque)
    waking: bool = False  # a MailWaiting is on its way to the agent

    @property
    def state(self) -> str:
        return self.presence.state

    @property
    def reason(self) -> str:
        return self.presence.reason


def standing_in(questions: Mapping[str, QuestionView], key: str) -> StandingView:
    """`key`'s standing among the run's `questions`: whom it owes a reply, whose it awaits."""
    if not questions:
        return _NO_STANDING
    owed = [q for q in questions.values() if q.open and q.askee == key]
    awaiting = next((q for q in questions.values() if q.open and q.asker == key), None)
    return StandingView(
        tuple(q.asker for q in owed),
        awaiting.askee if awaiting else None,
        awaiting.until if awaiting else None,
        max((q.until for q in owed), default=None),
        owed[0].text if owed else "",
    )


Append = Callable[[Any], Awaitable[bool | None]]
"""Puts a message's line on the record, answering once it is written: the Recorder's
`Appends.ask` in a run (no mailbox message a line)."""


class Switchboard(Actor, mailrules.QuestionBook):
    def __init__(self, supervisor: Supervisor, append: Append) -> None:
        super().__init__()
        self.supervisor = supervisor
        self.append = append
        self.ends: dict[str, MailEnd] = {}
        self.routes: dict[str, ActorRef] = {}
        self.views: dict[str, RouteView] = {}
        self.questions: dict[str, QuestionView] = {}
        self.expired: set[tuple[str, str]] = set()  # (asker, askee) whose question ran out
        self.closed_questions: set[tuple[str, str]] = set()  # (asker, askee) whose route closed under it
        self.closing = False

    # Ends and routes ----------------------------------------------------------------

    @handler
    def register(self, msg: Register) -> None:
        end = MailEnd(msg.key, msg.kind, msg.ref, msg.can_await, msg.presence or Presence(), msg.standing or StandingSlot())
        end.standing.view = standing_in(self.questions, msg.key)
        end.standing.unread = False  # its inbox is new
        end.standing.routed = any(view.open and view.can(msg.key) is not None for view in self.views.values())
        self.ends[msg.key] = end

    def _restand(self, question: QuestionView) -> None:
        """A question opened or closed: its two ends are told their standing now, in their slots."""
        for key in (question.asker, question.askee):
            end = self.ends.get(key)
            if end is not None:
                end.standing.view = standing_in(self.questions, key)

    @handler
    def state_changed(self, msg: StateChanged) -> None:
        end = self.ends.get(msg.key)
        if end is None:
            return
        end.presence.state, end.presence.reason = msg.state, msg.reason
        if msg.state == "stopped":
            for question in list(self.questions.values()):
                if question.askee == msg.key:
                    self._end_question(question, f"{msg.key} stopped: {msg.reason}".rstrip(": "))
                elif question.asker == msg.key:
                    self._settle(question, answered=False)

    @handler
    async def open_route(self, msg: OpenRouteRequest) -> str | Refusal:
        """A new route's id, or a Refusal saying what is wrong with it.

        Never raises: an exception in a handler would stop the switchboard, and the run with it.
        """
        problem = mailrules.check_purpose(msg.purpose)
        for key in (msg.sender, msg.receiver):
            if key not in self.ends:
                problem = problem or f"{key} is not an open agent or participant of this run"
        if msg.sender == msg.receiver:
            problem = problem or "a route joins two different ends"
        if not 1 <= msg.max_messages <= mailrules.MAX_ROUTE_MESSAGES:
            problem = problem or f"max_messages is at least 1 and at most {mailrules.MAX_ROUTE_MESSAGES}"
        if problem:
            return Refusal("invalid-request", problem)
        for view in self.views.values():
            if view.open and {view.sender, view.receiver} == {msg.sender, msg.receiver}:
                return Refusal(
                    "invalid-request", f"{msg.sender} and {msg.receiver} already have an open route; close it first"
                )
        route_id = f"r{len(self.views) + 1}"
        view = RouteView(route_id, msg.sender, msg.receiver, msg.both_ways, msg.purpose.strip(), msg.max_messages)
        self.routes[route_id] = self.supervisor.spawn(
            RouteActor, view, name=f"route:{msg.sender}>{msg.receiver}", capacity=ROUTE_MAILBOX_CAPACITY
        )
        self.views[route_id] = view
        for key in (msg.sender, msg.receiver):
            self.ends[key].standing.routed = True  # from now on its turns ask for their peers
        return route_id

    @handler
    async def close_route_request(self, msg: CloseRouteRequest) -> None:
        ref = self.routes.get(msg.route)
        if ref is not None and self.views[msg.route].open:
            self.views[msg.route] = await ref.ask(CloseRoute())
            for question in list(self.questions.values()):  # no reply can travel it any more
                if question.open and question.route == msg.route:
                    self.closed_questions.add((question.asker, question.askee))
                    await self._end_question_async(question, "the route closed")

    @handler
    async def close_all(self, msg: CloseAll) -> None:
        self.closing = True
        for route_id, ref in self.routes.items():
            if self.views[route_id].open:
                self.views[route_id] = await ref.ask(CloseRoute())

    # Sending ------------------------------------------------------------------------

    @handler
    async def post(self, msg: Post) -> Posted | Refusal:
        sender = self.ends.get(msg.sender)
        peer = self.ends.get(msg.peer)
        route = mailrules.route_between(self.views.values(), msg.sender, msg.peer) if peer is not None else None
        if route is not None and self.closing:
            route = replace(route, open=False)
        size = len(msg.text.encode())
        awaiting = mailrules.awaiting(self.questions.values(), msg.sender)
        can_await = sender.can_await if sender is not None else False
        if msg.reply:
            owed = mailrules.owed(self.questions.values(), msg.sender, msg.peer)
            waits = mailrules.open_waits(self.questions.values())
            if owed is not None:
                waits.pop(owed.asker, None)  # this reply answers it: asking back closes no loop
            refusal = mailrules.judge_reply(
                sender=msg.sender,
                peer=msg.peer,
                in_turn=msg.in_turn,
                owed=owed,
                closed_under=(msg.peer, msg.sender) in self.closed_questions,
                expired=(msg.peer, msg.sender) in self.expired,
                route=route,
                size=size,
                question=msg.question,
                awaiting=awaiting.askee if awaiting else None,
                can_await=can_await,
                waits=waits,
            )
        else:
            owed = None
            sendable = route if route is not None and route.can(msg.sender) in ("send", "both") else None
            refusal = mailrules.judge_send(
                sender=msg.sender,
                peer=msg.peer,
                in_turn=msg.in_turn,
                route=sendable,
                any_route=route is not None,
                peer_state=peer.state if peer is not None else None,  # type: ignore[arg-type]
                size=size,
                question=msg.question,
                awaiting=awaiting.askee if awaiting else None,
                can_await=can_await,
                waits=mailrules.open_waits(self.questions.values()),
                peer_unread=len(peer.inbox) if peer is not None else 0,
            )
        if refusal is not None:
            return refusal
        assert route is not None and peer is not None
        # A reply was paid for by its question; asking back pays for the next question and its reply.
        cost = mailrules.message_cost(msg.question) if not msg.reply else (mailrules.message_cost(True) if msg.question else 0)
        message_id = new_id()
        kind: MailKind = "question" if msg.question else ("reply" if msg.reply else "message")
        question_id = message_id if msg.question else (owed.id if owed is not None else "")
        mail = Mail(
            id=message_id,
            sender=msg.sender,
            to=msg.peer,
            text=msg.text,
            kind=kind,
            purpose=route.purpose,
            question=question_id,
            at=wall(),
        )
        read = mailrules.how_read(peer.kind, peer.state, reply=owed is not None)
        # On the record before anything changes: a message that can't be recorded isn't sent.
        if not await self.append(MessageSent(mail, route.id, read)):
            return Refusal("internal-error", UNRECORDED_MESSAGE)
        self.views[route.id] = await self.routes[route.id].ask(Spend(message_id, cost))
        if owed is not None:
            self._settle(owed)
            if sender is not None:  # answered before it was read: its mail is no longer news
                sender.inbox = deque(mail for mail in sender.inbox if mail.question != owed.id)
                sender.standing.unread = bool(sender.inbox)
        if msg.question:
            question = QuestionView(question_id, msg.sender, msg.peer, route.id, msg.until, text=msg.text)
            self.questions[question_id] = question
            self._restand(question)
            self.expired.discard((msg.sender, msg.peer))
            self.closed_questions.discard((msg.sender, msg.peer))
            if msg.until != float("inf"):
                self.start_soon(self._expire_at, question_id, msg.until)
        await self._deliver(peer, mail, reply=owed is not None)
        return Posted(message_id, read)

    async def _deliver(self, peer: MailEnd, mail: Mail, *, reply: bool) -> None:
        peer.inbox.append(mail)
        peer.standing.unread = True
        if peer.kind == "participant":
            while peer.receivers and peer.inbox:
                waiter = peer.receivers.popleft()
                if waiter.pending:
                    waiter.set((await self._read_now(peer, 1))[0])
            return
        if peer.state == "awaiting-reply" and not reply:
            return  # read with the reply it awaits (or word that none comes), as the sender was told
        if peer.ref is not None and not peer.waking:
            peer.waking = True
            self.start_soon(self._wake, peer, reply)

    async def _wake(self, peer: MailEnd, reply: bool) -> None:
        """Tell `peer` it has mail, beside the handlers: the switchboard never waits on an agent's
        mailbox (that agent may be waiting on the switchboard). One wake at a time per agent: the
        agent takes all its mail when it wakes, so a second would say nothing new."""
        try:
            assert peer.ref is not None
            await peer.ref.tell(MailWaiting(reply=reply))
        finally:
            peer.waking = False

    async def _read_now(self, peer: MailEnd, most: int | None = None) -> list[Mail]:
        """Take mail from `peer`'s inbox; each is on the record as read before it is handed over."""
        taken: list[Mail] = []
        while peer.inbox and (most is None or len(taken) < most):
            taken.append(peer.inbox.popleft())
        peer.standing.unread = bool(peer.inbox)
        now = wall()
        for mail in taken:
            await self.append(MessageRead(mail.id, peer.key, now))
            question = self.questions.get(mail.question) if mail.kind == "question" else None
            if question is not None:
                self.questions[question.id] = replace(question, read=True)  # now it is owed
        return taken

    # Questions ----------------------------------------------------------------------

    async def _expire_at(self, question_id: str, until: float) -> None:
        await anyio.sleep_until(until)
        await self.ref.tell(_Expire(question_id))

    @handler
    async def expire(self, msg: _Expire) -> None:
        question = self.questions.get(msg.question)
        if question is not None and question.open:
            await self._end_question_async(question, f"{question.askee} did not reply in time")

    def _end_question(self, question: QuestionView, why: str) -> None:
        self.start_soon(self._end_question_async, question, why)

    async def _end_question_async(self, question: QuestionView, why: str) -> None:
        """The asker gets no answer: the question closes, and the asker is told why."""
        if not self._close_unanswered(question):
            return
        asker = self.ends.get(question.asker)
        if asker is None:
            return
        notice = mailrules.no_answer(question, why, id=new_id(), at=wall())
        await self.append(MessageSent(notice, question.route, "with the reply it awaited"))
        await self._deliver(asker, notice, reply=True)

    @handler
    def drop_await(self, msg: DropAwait) -> None:
        question = mailrules.awaiting(self.questions.values(), msg.key)
        if question is not None:
            self._settle(question, answered=False)

    @handler
    async def give_up(self, msg: GiveUp) -> None:
        for question in list(self.questions.values()):
            if question.read_and_open and question.askee == msg.key:  # one still unread goes to its next turn
                await self._end_question_async(question, msg.why or f"{msg.key} ended its turn without replying")

    # Reading ------------------------------------------------------------------------

    @handler
    async def take_mail(self, msg: TakeMail) -> list[Mail]:
        end = self.ends.get(msg.key)
        return await self._read_now(end) if end is not None else []

    @handler
    def standing(self, msg: Standing) -> StandingView:
        return standing_in(self.questions, msg.key)

    @handler
    async def receive(self, msg: Receive) -> None:
        reply = self.defer()
        end = self.ends.get(msg.key)
        if end is None:
            reply.fail(ValueError(f"{msg.key} is not a participant of this run"))
        elif end.inbox:
            reply.set((await self._read_now(end, 1))[0])
        else:
            end.receivers.append(reply)

    @handler
    async def inbox(self, msg: Inbox) -> list[Mail]:
        end = self.ends.get(msg.key)
        return await self._read_now(end) if end is not None else []

    @handler
    def participants(self, msg: Participants) -> list[str]:
        return [key for key, end in self.ends.items() if end.kind == "participant"]

    @handler
    def peers_of(self, msg: PeersOf) -> dict[str, Any]:
        return peers_table(msg.key, self.views.values(), self.ends, self.questions.values())


def peers_table(
    key: str, views: Any, ends: dict[str, MailEnd], questions: Any
) -> dict[str, Any]:
    """`wfa peers --json`: one row per route of `key`, then whom it owes a reply."""
    rows: list[dict[str, Any]] = []
    for view in views:
        can = view.can(key)
        if can is None or not view.open:
            continue
        peer_key = view.peer_of(key)
        peer = ends[peer_key]
        row: dict[str, Any] = {"peer": peer_key, "can": can, "kind": peer.kind}
        if peer.kind == "agent":
            row["state"] = peer.state
            if peer.state == "stopped" and peer.reason:
                row["reason"] = peer.reason
            awaited = next((q for q in questions if q.open and q.asker == peer_key), None)
            if peer.state == "awaiting-reply" and awaited is not None:
                row["awaits"] = awaited.askee
        row["queued"] = sum(1 for mail in peer.inbox if mail.sender == key) if peer.kind == "agent" else 0
        row["purpose"] = view.purpose
        rows.append(row)
    owes = [q.asker for q in questions if q.open and q.askee == key]
    result: dict[str, Any] = {"peers": rows, "owes": owes}
    mine = next((q for q in questions if q.open and q.asker == key), None)
    if mine is not None:
        result["awaits"] = {"peer": mine.askee, "until": wall_ms(mine.until)}
    return result
