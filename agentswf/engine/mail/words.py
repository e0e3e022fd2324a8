"""The words agents and the Switchboard exchange, as plain data: a message as its reader gets it,
a post and its acknowledgement, an agent's standing, and what an agent tells the board.

Pure (msgspec and typing only), so the turn machine can speak them without importing the
Switchboard, an actor: `mail/switchboard.py` imports them from here.
"""

from __future__ import annotations

from typing import Literal

import msgspec

MailKind = Literal["message", "question", "reply", "notice"]


class Mail(msgspec.Struct, frozen=True, kw_only=True):
    """One message as its reader gets it."""

    id: str
    sender: str
    to: str
    text: str
    kind: MailKind
    purpose: str = ""
    question: str = ""  # the question's id, for a question or its reply
    at: float = 0.0

    @property
    def is_question(self) -> bool:
        return self.kind == "question"


class StandingView(msgspec.Struct, frozen=True):
    """Whom an agent owes a reply, whose reply it awaits."""

    owes: tuple[str, ...] = ()
    awaits: str | None = None
    awaits_until: float | None = None  # when the wait for that reply ends (`awf status` shows it)
    latest_asker_until: float | None = None  # lengthens a message turn
    owed_text: str = ""  # the first question it owes, for a refusal that names it


class Post(msgspec.Struct, frozen=True, kw_only=True):
    """`wfa send` (reply=False) or `wfa reply` (reply=True) from `sender`."""

    sender: str
    peer: str
    text: str
    reply: bool
    question: bool
    until: float  # when a question's wait ends, on the loop's clock
    in_turn: bool


class Posted(msgspec.Struct, frozen=True):
    """The acknowledgement: when the peer reads it."""

    message_id: str
    read: str


class DropAwait(msgspec.Struct, frozen=True):
    """The asker finished its turn with `wfa result`: its wait is dropped."""

    key: str


class GiveUp(msgspec.Struct, frozen=True):
    """The askee's turn ended owing (after its reminder, or failed, timed out…): its askers get no answer."""

    key: str
    why: str = ""


class StateChanged(msgspec.Struct, frozen=True):
    """Told (and waited for) when an agent stops: the questions it owes or asked end."""

    key: str
    state: str  # "stopped"
    reason: str = ""
