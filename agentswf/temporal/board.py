"""The run's switchboard as Temporal workflow state: routes, inboxes, questions owed and awaited.

The local Switchboard is an actor; on Temporal the same state lives in the workflow and
changes only in its code (signals, updates and the workflow function), so it is replayed
with the rest. Every decision is the local engine's own: `mailrules.judge_send`,
`judge_reply`, `message_cost` and `check_purpose`, `standing_in` for what an agent owes or
awaits, `peers_table` for `wfa peers`. What differs is only where time and ids come from
(workflow time, ids made from the workflow's seeded randomness) and how an agent hears of
mail: its worker watches for it (the update `agentswf.mail`, op `watch`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

import msgspec

from ..engine.mail import rules as mailrules
from ..engine.mail.rules import QuestionView, RouteView
from ..engine.mail.switchboard import MailEnd, peers_table, standing_in
from ..engine.mail.words import Mail, MailKind, Posted, StandingView
from ..engine.rules import Refusal

EndKind = Literal["agent", "participant"]


class WorkflowBoard(mailrules.QuestionBook):
    """Routes, inboxes and questions of a Temporal run. `now` is workflow time (Unix seconds),
    `new_id` a deterministic id; `on_mail(key)` is called when mail is delivered to an agent,
    `on_question(id, until)` when a question that runs out opens."""

    def __init__(
        self, *, now: Callable[[], float], new_id: Callable[[], str], on_mail: Callable[[str], None],
        on_question: Callable[[str, float], None],
    ) -> None:
        self._now = now
        self._new_id = new_id
        self._on_mail = on_mail
        self._on_question = on_question
        self.ends: dict[str, MailEnd] = {}
        self.views: dict[str, RouteView] = {}
        self.questions: dict[str, QuestionView] = {}
        self.expired: set[tuple[str, str]] = set()
        self.closed_questions: set[tuple[str, str]] = set()
        self.closing = False
        self.lines: list[dict[str, Any]] = []  # the record's messages.jsonl, as the local Recorder writes it
        self.delivered: dict[str, int] = {}  # mail delivered to each end, ever: its worker's watch compares
        self.versions: dict[str, int] = {}  # each end's standing, changed this many times

    # Ends and routes ----------------------------------------------------------------

    def register(self, key: str, kind: EndKind, *, can_await: bool = True) -> None:
        self.ends[key] = MailEnd(key, kind, can_await=can_await)

    def set_state(self, key: str, state: str, reason: str = "") -> None:
        """An agent's state as its peers see it: the workflow knows when its turns run."""
        end = self.ends.get(key)
        if end is not None and end.state != "stopped":
            end.presence.state, end.presence.reason = state, reason

    def open_route(self, sender: str, receiver: str, purpose: str, both_ways: bool, max_messages: int) -> str | Refusal:
        problem = mailrules.check_purpose(purpose)
        for key in (sender, receiver):
            if key not in self.ends:
                problem = problem or f"{key} is not an open agent or participant of this run"
        if sender == receiver:
            problem = problem or "a route joins two different ends"
        if not 1 <= max_messages <= mailrules.MAX_ROUTE_MESSAGES:
            problem = problem or f"max_messages is at least 1 and at most {mailrules.MAX_ROUTE_MESSAGES}"
        if problem:
            return Refusal("invalid-request", problem)
        for view in self.views.values():
            if view.open and {view.sender, view.receiver} == {sender, receiver}:
                return Refusal("invalid-request", f"{sender} and {receiver} already have an open route; close it first")
        route_id = f"r{len(self.views) + 1}"
        self.views[route_id] = RouteView(route_id, sender, receiver, both_ways, purpose.strip(), max_messages)
        return route_id

    def close_route(self, route_id: str) -> None:
        view = self.views.get(route_id)
        if view is None or not view.open:
            return
        self.views[route_id] = replace(view, open=False)
        for question in list(self.questions.values()):  # no reply can travel it any more
            if question.open and question.route == route_id:
                self.closed_questions.add((question.asker, question.askee))
                self._end_question(question, "the route closed")

    def close_all(self) -> None:
        self.closing = True
        for route_id, view in self.views.items():
            self.views[route_id] = replace(view, open=False)

    def stopped(self, key: str, reason: str) -> None:
        """`key` stopped (its agent was closed): the questions it owes or asked end."""
        end = self.ends.get(key)
        if end is None:
            return
        end.presence.state, end.presence.reason = "stopped", reason
        for question in list(self.questions.values()):
            if question.askee == key:
                self._end_question(question, f"{key} stopped: {reason}".rstrip(": "))
            elif question.asker == key:
                self._settle(question, answered=False)

    # Sending ------------------------------------------------------------------------

    def post(
        self, *, sender: str, peer: str, text: str, reply: bool, question: bool, until: float, in_turn: bool,
    ) -> Posted | Refusal:
        """`wfa send`/`wfa reply` (or a participant's): as the local Switchboard's `post`, decided by mailrules."""
        sending = self.ends.get(sender)
        receiving = self.ends.get(peer)
        route = mailrules.route_between(self.views.values(), sender, peer) if receiving is not None else None
        if route is not None and self.closing:
            route = replace(route, open=False)
        size = len(text.encode())
        awaiting = mailrules.awaiting(self.questions.values(), sender)
        can_await = sending.can_await if sending is not None else False
        owed = None
        if reply:
            owed = mailrules.owed(self.questions.values(), sender, peer)
            waits = mailrules.open_waits(self.questions.values())
            if owed is not None:
                waits.pop(owed.asker, None)  # this reply answers it: asking back closes no loop
            refusal = mailrules.judge_reply(
                sender=sender, peer=peer, in_turn=in_turn, owed=owed,
                closed_under=(peer, sender) in self.closed_questions, expired=(peer, sender) in self.expired,
                route=route, size=size, question=question, awaiting=awaiting.askee if awaiting else None,
                can_await=can_await, waits=waits,
            )
        else:
            sendable = route if route is not None and route.can(sender) in ("send", "both") else None
            refusal = mailrules.judge_send(
                sender=sender, peer=peer, in_turn=in_turn, route=sendable, any_route=route is not None,
                peer_state=receiving.state if receiving is not None else None,  # type: ignore[arg-type]
                size=size, question=question, awaiting=awaiting.askee if awaiting else None, can_await=can_await,
                waits=mailrules.open_waits(self.questions.values()), peer_unread=len(receiving.inbox) if receiving is not None else 0,
            )
        if refusal is not None:
            return refusal
        assert route is not None and receiving is not None
        cost = mailrules.message_cost(question) if not reply else (mailrules.message_cost(True) if question else 0)
        message_id = self._new_id()
        kind: MailKind = "question" if question else ("reply" if reply else "message")
        question_id = message_id if question else (owed.id if owed is not None else "")
        mail = Mail(
            id=message_id, sender=sender, to=peer, text=text, kind=kind, purpose=route.purpose, question=question_id,
            at=self._now(),
        )
        read = mailrules.how_read(receiving.kind, receiving.state, reply=owed is not None)
        self.lines.append({"event": "sent", "mail": msgspec.to_builtins(mail), "route": route.id, "read": read})
        spent = self.views[route.id]
        self.views[route.id] = replace(spent, used=spent.used + cost)
        if owed is not None:
            self._settle(owed)
            if sending is not None:  # answered before it was read: its mail is no longer news
                sending.inbox = deque(m for m in sending.inbox if m.question != owed.id)
        if question:
            asked = QuestionView(question_id, sender, peer, route.id, until, text=text)
            self.questions[question_id] = asked
            self._restand(asked)
            self.expired.discard((sender, peer))
            self.closed_questions.discard((sender, peer))
            if not math.isinf(until):
                self._on_question(question_id, until)
        self._deliver(receiving, mail)
        return Posted(message_id, read)

    def _deliver(self, end: MailEnd, mail: Mail) -> None:
        end.inbox.append(mail)
        self.delivered[end.key] = self.delivered.get(end.key, 0) + 1
        if end.kind == "agent":
            self._on_mail(end.key)

    # Reading ------------------------------------------------------------------------

    def take(self, key: str, most: int | None = None) -> list[Mail]:
        """Take `key`'s unread mail; each is on the record as read before it is handed over."""
        end = self.ends.get(key)
        if end is None:
            return []
        taken: list[Mail] = []
        while end.inbox and (most is None or len(taken) < most):
            taken.append(end.inbox.popleft())
        now = self._now()
        for mail in taken:
            self.lines.append({"event": "read", "message_id": mail.id, "by": key, "at": now})
            question = self.questions.get(mail.question) if mail.kind == "question" else None
            if question is not None:
                self.questions[question.id] = replace(question, read=True)
        return taken

    def unread(self, key: str) -> int:
        end = self.ends.get(key)
        return 0 if end is None else len(end.inbox)

    def replies_waiting(self, key: str) -> bool:
        """Whether `key`'s unread mail holds a reply or a notice (what continues a turn that awaits one)."""
        end = self.ends.get(key)
        return end is not None and any(mail.kind in ("reply", "notice") for mail in end.inbox)

    def standing(self, key: str) -> StandingView:
        return standing_in(self.questions, key)

    def peers(self, key: str) -> dict[str, Any]:
        table = peers_table(key, self.views.values(), self.ends, self.questions.values())
        mine = mailrules.awaiting(self.questions.values(), key)
        if mine is not None:  # the question's wait ends at Unix seconds here, not on a loop's clock
            table["awaits"]["until"] = None if math.isinf(mine.until) else int(mine.until * 1000)
        return table

    def participants(self) -> list[str]:
        return [key for key, end in self.ends.items() if end.kind == "participant"]

    # Questions ----------------------------------------------------------------------

    def _restand(self, question: QuestionView) -> None:
        for key in (question.asker, question.askee):
            self.versions[key] = self.versions.get(key, 0) + 1

    def _end_question(self, question: QuestionView, why: str) -> None:
        """The asker gets no answer: the question closes, and the asker is told why."""
        if not self._close_unanswered(question):
            return
        asker = self.ends.get(question.asker)
        if asker is None:
            return
        notice = mailrules.no_answer(question, why, id=self._new_id(), at=self._now())
        self.lines.append({"event": "sent", "mail": msgspec.to_builtins(notice), "route": question.route,
                           "read": "with the reply it awaited"})
        self._deliver(asker, notice)

    def expire(self, question_id: str) -> None:
        question = self.questions.get(question_id)
        if question is not None and question.open:
            self._end_question(question, f"{question.askee} did not reply in time")

    def drop_await(self, key: str) -> None:
        question = mailrules.awaiting(self.questions.values(), key)
        if question is not None:
            self._settle(question, answered=False)

    def give_up(self, key: str, why: str) -> None:
        for question in list(self.questions.values()):
            if question.read_and_open and question.askee == key:  # one still unread goes to its next turn
                self._end_question(question, why or f"{key} ended its turn without replying")

