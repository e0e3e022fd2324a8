"""An actor's bounded mailbox: a deque, one wakeup for the waiting actor, a queue of blocked senders.

Cheaper than a memory object stream because it does only what an actor needs: one
receiver, FIFO delivery, a fixed capacity with an explicit overflow policy, removal of
an abandoned ask, and a drain that turns what is left into dead letters when the actor
stops. It outlives the actor instances that read it, so queued messages survive a
restart and the counters cover the child's whole life.
"""

from __future__ import annotations

import enum
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import msgspec
from sniffio import thread_local as _running

from ..errors import ActorStopped, MailboxFull
from .reply import Reply
from .tracing import Tracer
from .wakeup import Wakeup, checkpoint

GET_BURST = 32
"""Queued messages an actor takes in a row before a checkpoint lets the other tasks run."""

Envelope = tuple[Any, Reply | None, float]
"""(message, reply slot or None for a tell, enqueue time or 0.0 when not tracing)."""


class Overflow(enum.Enum):
    """What a send does when the mailbox is full."""

    BLOCK = "block"
    """Wait for space: backpressure on the sender."""
    FAIL = "fail"
    """Raise ``MailboxFull`` at once."""


class MailboxStatistics(msgspec.Struct, frozen=True):
    """A snapshot of one actor's mailbox and its counters since spawn."""

    depth: int
    capacity: int
    waiting_senders: int
    handled: int
    failed: int
    dead_lettered: int
    restarts: int
    abandoned: int
    """Asks withdrawn while still queued because their asker timed out or was cancelled."""


class DeadLetter(msgspec.Struct, frozen=True):
    """A message that no handler will see: sent to, or queued in, a stopped actor."""

    actor: str
    message: Any
    reason: str
    at: float
    """Wall-clock time (``time.time()``) it was recorded."""


class Mailbox:
    """A bounded FIFO of envelopes for one actor; see the module docstring."""

    __slots__ = (
        "name",
        "capacity",
        "overflow",
        "handled",
        "failed",
        "dead_lettered",
        "restarts",
        "abandoned",
        "_queue",
        "_receiver",
        "_parking",
        "_senders",
        "_closed",
        "_on_dead_letter",
        "_burst",
        "tracer",
    )

    def __init__(
        self,
        name: str,
        capacity: int,
        overflow: Overflow = Overflow.BLOCK,
        on_dead_letter: Callable[[DeadLetter], None] | None = None,
        tracer: Tracer | None = None,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"mailbox capacity must be at least 1, got {capacity}")
        self.name = name
        self.capacity = capacity
        self.overflow = overflow
        self.handled = 0
        self.failed = 0
        self.dead_lettered = 0
        self.restarts = 0
        self.abandoned = 0
        self._queue: deque[Envelope] = deque()
        self._receiver: Wakeup | None = None  # `_parking` while the actor is parked in `get`
        self._parking = Wakeup()  # the actor's, rearmed each time it parks
        self._senders: deque[Wakeup] = deque()
        self._closed = False
        self._burst = 0  # messages taken since the last checkpoint
        self._on_dead_letter = on_dead_letter
        self.tracer = tracer  # its actor system's trace, if it has one: its events go there while it is open

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def parked(self) -> bool:
        """Its actor waits in `get` for a message, with none queued (and none on its way to it)."""
        return self._receiver is not None

    @property
    def depth(self) -> int:
        """Messages queued now (`statistics().depth`, without the snapshot)."""
        return len(self._queue)

    def statistics(self) -> MailboxStatistics:
        return MailboxStatistics(
            depth=len(self._queue),
            capacity=self.capacity,
            waiting_senders=len(self._senders),
            handled=self.handled,
            failed=self.failed,
            dead_lettered=self.dead_lettered,
            restarts=self.restarts,
            abandoned=self.abandoned,
        )

    # Sending -------------------------------------------------------------------------

    def send_nowait(self, message: Any, reply: Reply | None) -> None:
        """Enqueue now; ``MailboxFull`` if full. If closed: dead letter, and ``ActorStopped`` for an ask."""
        if self._closed:
            self._refuse(message, reply)
            return
        queue = self._queue
        if len(queue) >= self.capacity:
            raise MailboxFull(
                f"mailbox of actor {self.name!r} is full ({self.capacity} messages); "
                f"{type(message).__name__} was not sent"
            )
        tracer = self.tracer
        if tracer is not None and tracer.open:
            queue.append((message, reply, time.perf_counter()))
            tracer.sink("mailbox.enqueue", self._fields(message))
        else:
            queue.append((message, reply, 0.0))
        receiver = self._receiver
        if receiver is not None:
            self._receiver = None
            receiver.set()

    def try_send(self, message: Any, reply: Reply | None) -> bool:
        """`send` without the wait: false, sending nothing, where `send` would wait for space."""
        if self.overflow is Overflow.FAIL or self._closed or (len(self._queue) < self.capacity and not self._senders):
            self.send_nowait(message, reply)
            return True
        return False

    async def send(self, message: Any, reply: Reply | None) -> None:
        """Enqueue, waiting for space under ``Overflow.BLOCK`` (after senders already waiting)."""
        if not self.try_send(message, reply):
            await self._wait_for_space()
            self.send_nowait(message, reply)

    async def _wait_for_space(self) -> None:
        event = Wakeup()
        self._senders.append(event)
        try:
            while True:
                await event.wait()
                if self._closed or len(self._queue) < self.capacity:
                    return
                event = Wakeup()  # space was taken by a send_nowait: wait again, first in line
                self._senders.appendleft(event)
        except BaseException:
            if event in self._senders:
                self._senders.remove(event)
            elif event.is_set():
                self._wake_sender()  # pass on the space we were given
            raise

    def _wake_sender(self) -> None:
        if self._senders and len(self._queue) < self.capacity:
            self._senders.popleft().set()

    def _refuse(self, message: Any, reply: Reply | None) -> None:
        self.dead_letter(message, "sent after the actor stopped")
        if reply is not None:
            raise ActorStopped(f"actor {self.name!r} has stopped; {type(message).__name__} was not handled")

    # Receiving -----------------------------------------------------------------------

    async def get(self) -> Envelope | None:
        """Take the next envelope, or ``None`` if woken with nothing to take (stop, withdrawal).

        While messages are queued the actor takes them in a row, `GET_BURST` at most between
        checkpoints: a scheduler round per message costs more than most handlers do (and an
        ask's batch, such as the Recorder's, grows only while its actor keeps taking), while
        the checkpoint every `GET_BURST` keeps a busy actor a cancel point and fair to the
        rest. With none queued, on trio it parks at once: parking there costs what a
        checkpoint does and is a schedule point too, so a checkpoint first would be a second
        scheduler round for every message an idle actor gets. On asyncio a checkpoint comes
        first: parking there is a future made, set and awaited, a bare yield much less, and
        a sender that is ready (an asker's next ask, a stream of tells) queues its message
        during it, which the actor then takes without parking at all.
        """
        queue = self._queue
        if (queue and self._burst >= GET_BURST) or (
            not queue and _running.name != "trio"  # asyncio (see `backend`)
        ):
            self._burst = 0
            await checkpoint()
        if not queue:
            if self._closed:
                await checkpoint()  # a closed mailbox's loop stays a schedule point
                return None
            self._burst = 0
            receiver = self._receiver = self._parking
            receiver.rearm()
            try:
                await receiver.wait()
            finally:
                self._receiver = None  # woken, or cancelled: not parked either way
            if not queue:
                return None
        self._burst += 1
        envelope = queue.popleft()
        if self._senders:
            self._senders.popleft().set()
        tracer = self.tracer
        if tracer is not None and tracer.open:
            self._trace_dequeue(envelope, tracer)
        return envelope

    def wake(self) -> None:
        """Wake the actor waiting in ``get`` so it can notice a stop request."""
        receiver = self._receiver
        if receiver is not None:
            self._receiver = None
            receiver.set()

    def withdraw(self, reply: Reply) -> None:
        """Remove the still-queued ask answered by ``reply``; its asker gave up."""
        queue = self._queue
        for index, envelope in enumerate(queue):
            if envelope[1] is reply:
                del queue[index]
                self.abandoned += 1
                self._wake_sender()
                return

    # Stopping ------------------------------------------------------------------------

    def close(self, cause: BaseException | None = None) -> None:
        """Refuse new messages and drain the queue: tells dead-lettered, asks failed ``ActorStopped``.

        ``cause`` (the crash that stopped the actor, if any) is chained to those errors.
        """
        self._closed = True
        queue = self._queue
        while queue:
            message, reply, _ = queue.popleft()
            reason = "queued when the actor crashed" if cause else "queued when the actor stopped"
            self.dead_letter(message, reason)
            if reply is not None:
                error = ActorStopped(
                    f"actor {self.name!r} {'crashed' if cause else 'stopped'} before handling {type(message).__name__}"
                )
                error.__cause__ = cause
                reply.fail(error)
        self.wake()
        while self._senders:
            self._senders.popleft().set()

    def dead_letter(self, message: Any, reason: str) -> None:
        """Record a message no handler will see."""
        self.dead_lettered += 1
        if self._on_dead_letter is not None:
            self._on_dead_letter(DeadLetter(self.name, message, reason, time.time()))
        tracer = self.tracer
        if tracer is not None and tracer.open:
            tracer.sink("mailbox.dead_letter", {**self._fields(message), "reason": reason})

    # Tracing -------------------------------------------------------------------------

    def _fields(self, message: Any) -> dict[str, Any]:
        return {"actor": self.name, "message_type": type(message).__name__, "depth": len(self._queue)}

    def _trace_dequeue(self, envelope: Envelope, tracer: Tracer) -> None:
        message, _, at = envelope
        queued_s = time.perf_counter() - at if at else None
        tracer.sink("mailbox.dequeue", {**self._fields(message), "queued_s": queued_s})
