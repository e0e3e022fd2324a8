"""A tell queued at once where the mailbox has room.

`ActorRef.tell` passes a schedule point before it queues (and so costs its sender a
reschedule, and the scheduler a round, each time); a tell sent where nothing needs that
point (an attempt's report, a word to the board) is queued at once instead, and waits for
space only when there is none, as `tell` does. The receiver sees the same messages in the
same order: one sender's tells are never reordered.
"""

from __future__ import annotations

from typing import Any

from ..actors import ActorRef
from ..errors import MailboxFull


async def tell(ref: ActorRef, message: Any) -> None:
    """`ref.tell(message)`, without its schedule point where the mailbox has room."""
    try:
        ref.tell_nowait(message)
    except MailboxFull:
        await ref.tell(message)
