"""The one-shot answer to an ask: a slot and a wakeup, which is all a reply needs.

A second stream per ask would cost more than the exchange itself; so would a second
object: a reply is its asker's wakeup itself. A ``Reply`` is
answered at most once: by the kernel when the handler returns or raises, or by the
actor later if the handler took it over with ``Actor.defer()``. Once answered or
abandoned (its asker timed out or was cancelled) further answers are dropped.
"""

from __future__ import annotations

from typing import Any

from .wakeup import Waitable


class Reply(Waitable):
    """An ask's pending answer; ``set`` or ``fail`` it once, later calls do nothing.

    Its asker waits on it (`wait`, the kernel's side); an actor only answers it.
    """

    __slots__ = ("_value", "_error", "_open", "_owner")

    def __init__(self, open: bool = True) -> None:
        self._set = False  # the waitable's own, set here rather than through a call: one per ask
        self._future = None
        self._task = None
        self._value: Any = None
        self._error: BaseException | None = None
        self._open = open
        # The set of deferred replies this one is listed in, if the handler deferred it.
        self._owner: set[Reply] | None = None

    @property
    def pending(self) -> bool:
        """Whether an answer is still awaited (false once answered, abandoned, or for a tell)."""
        return self._open

    def set(self, value: Any) -> None:
        """Answer the ask with ``value``."""
        if self._open:
            self._value = value
            self._close()

    def fail(self, error: BaseException) -> None:
        """Make the ask raise ``error``."""
        if self._open:
            self._error = error
            self._close()

    def _close(self) -> None:
        self._open = False
        if self._owner is not None:
            self._owner.discard(self)
            self._owner = None
        self._wake()

    def _abandon(self) -> None:
        """The asker is gone: drop any later answer and any deferral listing."""
        self._open = False
        if self._owner is not None:
            self._owner.discard(self)
            self._owner = None

    def _result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value


NO_REPLY = Reply(open=False)
"""What ``defer()`` returns while handling a tell: answering it does nothing."""

INLINE_ASK = Reply()
"""Where an inline step's reply would be (`ActorRef.ask_inline`): an open ask, made a reply of its
own only if its handler defers it. Never set, never waited on."""
