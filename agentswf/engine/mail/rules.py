"""Messaging rules: what `wfa send` and `wfa reply` may do now, as pure functions of state.

The state is the run's switchboard: routes, inboxes, open questions and who awaits
whom. Each agent awaits at most one reply at a time, so the wait-for graph is a set of
chains; a question that would close a chain into a loop is refused `cycle`, and so no
cycle is ever admitted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Literal

from ..rules import Refusal
from .words import Mail

MAX_MESSAGE_BYTES = 16 * 1024
MAX_ROUTE_MESSAGES = 40  # replies included; a question counts its reply
MAX_UNREAD_MESSAGES = 16  # in one peer's inbox
MAX_PURPOSE_CHARS = 200
MESSAGE_TURN_SECONDS = 15 * 60.0

Can = Literal["send", "reply", "both"]
PeerState = Literal["not-started", "working", "idle", "awaiting-reply", "stopped"]
IN_A_TURN: frozenset[PeerState] = frozenset({"working", "awaiting-reply"})  # the states of an agent whose turn is open


@dataclass(frozen=True, slots=True)
class RouteView:
    """A route as the rules see it: its ends, direction, budget and whether it is open."""

    id: str
    sender: str
    receiver: str
    both_ways: bool
    purpose: str
    max_messages: int
    used: int = 0
    open: bool = True

    def can(self, key: str) -> Can | None:
        """What `key` can do on this route: send on its own, reply only, or both."""
        if key not in (self.sender, self.receiver):
            return None
        if self.both_ways:
            return "both"
        return "send" if key == self.sender else "reply"

    def peer_of(self, key: str) -> str:
        return self.receiver if key == self.sender else self.sender

    def room(self) -> int:
        return self.max_messages - self.used


@dataclass(frozen=True, slots=True)
class QuestionView:
    """A question: `asker` awaits a reply from `askee` until `until` (loop clock)."""

    id: str
    asker: str
    askee: str
    route: str
    until: float
    open: bool = True
    text: str = ""
    read: bool = False  # the askee has had it in a prompt

    @property
    def read_and_open(self) -> bool:
        return self.open and self.read


def waits_on(waits: Mapping[str, str], start: str, target: str) -> bool:
    """Does `start` wait, directly or through others, on `target`?"""
    seen: set[str] = set()
    current = start
    while current in waits and current not in seen:
        seen.add(current)
        current = waits[current]
        if current == target:
            return True
    return False


def message_cost(question: bool) -> int:
    """What a message takes from its route's budget: a question reserves its reply too."""
    return 2 if question else 1


def _closed(peer: str) -> Refusal:
    return Refusal("closed", f"the route to {peer} is closed: its stage ended, or the workflow is finishing.")


def _too_large(what: str, size: int) -> Refusal:
    return Refusal(
        "too-large",
        f"the {what} is {size} bytes, over the limit of {MAX_MESSAGE_BYTES}; write it to a file and send its path.",
    )


def judge_send(
    *,
    sender: str,
    peer: str,
    in_turn: bool,
    route: RouteView | None,
    any_route: bool,
    peer_state: PeerState | None,
    size: int,
    question: bool,
    awaiting: str | None,
    can_await: bool,
    waits: Mapping[str, str],
    peer_unread: int,
) -> Refusal | None:
    """May `sender` send `peer` a message (a question with `question`) now?

    `route` is the open-or-closed route `sender` can send on to `peer`; `any_route` says
    whether some route joins them at all (one it can only reply on).
    """
    if not in_turn:
        return Refusal("no-operation", "you aren't in a turn; messages are sent while you work on one.")
    if route is None:
        if any_route:
            return Refusal(
                "no-route", f"you can only reply to {peer} (wfa reply {peer}), not send it messages of your own."
            )
        return Refusal("no-route", f"there is no route to {peer}; wfa peers lists the peers you can message.")
    if peer_state == "stopped":
        return Refusal("peer-stopped", f"{peer} has stopped; it won't read messages any more.")
    if not route.open:
        return _closed(peer)
    if size > MAX_MESSAGE_BYTES:
        return _too_large("message", size)
    if question:
        refusal = judge_question(sender, peer, awaiting=awaiting, can_await=can_await, waits=waits)
        if refusal is not None:
            return refusal
    if route.room() < message_cost(question):
        if question and route.room() > 0:
            return Refusal(
                "limit",
                f"the route to {peer} has room for one more message but not a question and its reply; "
                "send without --await-reply.",
            )
        return Refusal("limit", f"the route to {peer} has used all its {route.max_messages} messages.")
    if peer_unread >= MAX_UNREAD_MESSAGES:
        return Refusal(
            "inbox-full", f"{peer} has {peer_unread} unread messages; try again after its turn ends."
        )
    return None


def judge_question(
    asker: str, peer: str, *, awaiting: str | None, can_await: bool, waits: Mapping[str, str]
) -> Refusal | None:
    """May `asker` await a reply from `peer`?"""
    if awaiting is not None:
        return Refusal(
            "already-awaiting", f"you already await a reply from {awaiting}; one question at a time."
        )
    if not can_await:
        return Refusal(
            "unsupported",
            "you can't await a reply where you run: send without --await-reply and say where the answer "
            "should go, such as a file.",
        )
    if peer == asker or waits_on(waits, peer, asker):
        return Refusal("cycle", f"{peer} already waits, directly or through others, on you; answer it instead.")
    return None


def judge_reply(
    *,
    sender: str,
    peer: str,
    in_turn: bool,
    owed: QuestionView | None,
    expired: bool,
    route: RouteView | None,
    size: int,
    question: bool,
    awaiting: str | None,
    can_await: bool,
    waits: Mapping[str, str],
    closed_under: bool = False,
) -> Refusal | None:
    """May `sender` reply to `peer` now (asking back with `question`)?

    `owed` is the open question `peer` asked `sender`; `closed_under` says one was asked but
    its route closed before the reply; `expired` says one was asked but the asker stopped waiting.
    """
    if owed is None and closed_under:
        return Refusal("closed", f"the route to {peer} closed before you replied; {peer} was told.")
    if not in_turn:
        return Refusal("no-operation", "you aren't in a turn; replies are sent while you work on one.")
    if owed is None:
        if expired:
            return Refusal("expired", f"{peer} stopped waiting for your reply, or stopped.")
        return Refusal(
            "none-owed", f"{peer} asked you nothing open, or was answered already; to message it, use wfa send {peer}."
        )
    if route is None or not route.open:
        return _closed(peer)
    if size > MAX_MESSAGE_BYTES:
        return _too_large("reply", size)
    if question:
        refusal = judge_question(sender, peer, awaiting=awaiting, can_await=can_await, waits=waits)
        if refusal is not None:
            return refusal
        if route.room() < message_cost(True):
            return Refusal(
                "limit", f"the route to {peer} has room for your reply but not a question back; reply without --await-reply."
            )
    return None


def check_purpose(purpose: str) -> str | None:
    """Why `purpose` can't be a route's purpose, or None."""
    if not isinstance(purpose, str) or not purpose.strip():
        return "a route needs a purpose: one line saying what it is for"
    if "\n" in purpose or len(purpose) > MAX_PURPOSE_CHARS:
        return f"a route's purpose is one line of at most {MAX_PURPOSE_CHARS} characters"
    return None


def route_between(views: Iterable[RouteView], a: str, b: str) -> RouteView | None:
    """The latest route between `a` and `b`, either way round."""
    for view in reversed(list(views)):
        if {view.sender, view.receiver} == {a, b}:
            return view
    return None


def open_waits(questions: Iterable[QuestionView]) -> dict[str, str]:
    """Who awaits whose reply: asker -> askee, for every open question."""
    return {q.asker: q.askee for q in questions if q.open}


def awaiting(questions: Iterable[QuestionView], key: str) -> QuestionView | None:
    """The open question `key` asked and awaits the reply to."""
    return next((q for q in questions if q.open and q.asker == key), None)


def owed(questions: Iterable[QuestionView], askee: str, asker: str) -> QuestionView | None:
    """The open question `askee` owes `asker` a reply to."""
    return next((q for q in questions if q.open and q.askee == askee and q.asker == asker), None)


def how_read(kind: Literal["agent", "participant"], state: str, *, reply: bool) -> str:
    """When a message's sender is told its peer reads it, from the peer's kind and state (and
    whether the message is the reply it owes): the same words on every engine."""
    if kind == "participant":
        return "when they read their inbox"
    if reply and state in ("awaiting-reply", "idle", "not-started"):
        return "now: your reply starts its next turn"
    if state == "working":
        return "when its current turn ends"
    if state == "awaiting-reply":
        return "with the reply it awaits"
    return "now, in a turn of its own"


class QuestionBook:
    """A board's questions, the same on both engines (the local Switchboard, Temporal's
    WorkflowBoard): each as it stands, and the (asker, askee) pairs whose question closed with no
    answer, so that a late reply is refused `expired` rather than `none-owed`. A board says how
    its ends learn their standing when a question opens or closes (`_restand`)."""

    questions: dict[str, QuestionView]
    expired: set[tuple[str, str]]

    def _restand(self, question: QuestionView) -> None:
        raise NotImplementedError

    def _settle(self, question: QuestionView, *, answered: bool = True) -> None:
        """`question` closed: answered, or not (it ran out, or an end of it went)."""
        self.questions[question.id] = replace(question, open=False)
        if not answered:
            self.expired.add((question.asker, question.askee))
        self._restand(question)

    def _close_unanswered(self, question: QuestionView) -> bool:
        """`question` closed with no answer, if it was open: whether it was (its asker is then told, `no_answer`)."""
        if not self.questions[question.id].open:
            return False
        self._settle(question, answered=False)
        return True


def no_answer(question: QuestionView, why: str, *, id: str, at: float) -> Mail:
    """The notice that tells `question`'s asker no answer comes, and `why`."""
    return Mail(
        id=id, sender=question.askee, to=question.asker, text=f"There is no answer to your question: {why}.",
        kind="notice", question=question.id, at=at,
    )  # fmt: skip
