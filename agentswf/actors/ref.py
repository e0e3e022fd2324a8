"""``ActorRef``: the only way to talk to an actor, safe to share with any task.

It checks the message type against the actor's handler table before anything is
queued, so a wrong message fails where it was sent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import AskTimeout, UnhandledMessage
from .actor import IN_ASKERS_TASK, WRITE_THROUGH
from .backend import move_on_after
from .mailbox import MailboxStatistics
from .reply import INLINE_ASK, Reply
from .wakeup import checkpoint

if TYPE_CHECKING:
    from .cell import Cell


class ActorRef:
    """A handle on one supervised actor: tell, ask, stop, statistics."""

    __slots__ = ("_cell", "_mailbox", "_handlers")

    def __init__(self, cell: Cell) -> None:
        self._cell = cell
        self._mailbox = cell.mailbox
        self._handlers = cell._factory._handlers

    def __repr__(self) -> str:
        return f"<ActorRef {self.name!r} {'alive' if self.alive else 'stopped'}>"

    @property
    def name(self) -> str:
        return self._mailbox.name

    @property
    def alive(self) -> bool:
        """False once the actor has stopped for good (a restart in progress counts as alive)."""
        return not self._mailbox.closed

    @property
    def error(self) -> BaseException | None:
        """The crash that stopped the actor for good, if one did."""
        return self._cell.error

    def statistics(self) -> MailboxStatistics:
        return self._mailbox.statistics()

    async def tell(self, message: Any) -> None:
        """Send without waiting for an answer; waits for space under ``Overflow.BLOCK``.

        To a stopped actor the message becomes a dead letter and nothing is raised.
        """
        if type(message) not in self._handlers:
            raise self._unhandled(message)
        await checkpoint()
        mailbox = self._mailbox
        if not mailbox.try_send(message, None):
            await mailbox.send(message, None)

    def tell_nowait(self, message: Any) -> None:
        """Send without waiting at all; ``MailboxFull`` if the mailbox is full, whatever its policy."""
        if type(message) not in self._handlers:
            raise self._unhandled(message)
        self._mailbox.send_nowait(message, None)

    async def ask(self, message: Any, timeout: float | None = None) -> Any:
        """Send and wait for the handler's answer (``None`` waits forever).

        Raises ``AskTimeout`` after ``timeout`` seconds (the message is withdrawn if still
        queued; a late answer is dropped), ``ActorStopped`` if the actor is or becomes
        stopped first, ``ActorCrashed`` if its handler raises (the actor goes on) or the
        actor crashes before answering.
        """
        if type(message) not in self._handlers:
            raise self._unhandled(message)
        if timeout is not None:
            return await self._ask_within(message, timeout)
        mailbox = self._mailbox
        reply = Reply()
        if not mailbox.try_send(message, reply):
            await mailbox.send(message, reply)
        try:
            await reply.wait()
        except BaseException:
            if reply._open:  # the asker gave up: leave nothing behind
                reply._abandon()
                mailbox.withdraw(reply)
            raise
        return reply._result()

    async def ask_inline(self, message: Any) -> Any:
        """``ask``, handled in this task at once where the actor would do nothing else first.

        The kernel's one way past a mailbox's round trip, named so a trace shows it: when the
        message's handler is synchronous, nothing is queued ahead of it, and the actor is
        idle (an *inline step of an idle actor*) or the handler is write-through (a
        *write-through ask*, `actor.write_through`: it may run while another handler
        awaits), the handler runs here, now, as the actor's own loop would run it: one
        message at a time, in mailbox order, counted, and traced (enqueue, dequeue and
        handled, each with ``inline: True``). An answer given at once returns with no
        schedule point; a deferred one is waited for as an ask's. A handler marked
        `in_askers_task` runs here whenever an instance of the actor runs, from its `on_start`
        on (`Cell.step_in_askers_task`); before that, its loop runs it.
        Anything else is ``ask``.
        Raises as ``ask`` does.
        """
        entry = self._handlers.get(type(message))
        if entry is None:
            raise self._unhandled(message)
        fn, is_async, how = entry
        cell, mailbox = self._cell, self._mailbox
        if is_async:
            if how is IN_ASKERS_TASK and cell._instance is not None and not cell._exit:
                return await cell.step_in_askers_task(fn, message)
            return await self.ask(message)
        if (
            not cell._looping
            or cell._exit
            or mailbox._queue  # (a closed mailbox's actor has exited or is not looping)
            or not (how is WRITE_THROUGH or (cell._current is None and mailbox._receiver is not None))
        ):
            return await self.ask(message)
        # The step, as the actor's loop takes one (`Cell._loop`), here. No reply is made unless
        # the handler defers: the envelope holds `INLINE_ASK` until then.
        outer = cell._current  # a write-through step while a handler awaits: restored after
        cell._current = (message, INLINE_ASK, 0.0)
        tracer = mailbox.tracer
        traced = tracer is not None and tracer.open
        started = cell.trace_inline("mailbox.enqueue", message) if traced else 0.0
        try:
            value = fn(cell._instance, message)
            reply = cell._current[1]
        except Exception as exc:
            reply = cell._current[1]
            cell._current = outer
            if traced:
                cell.trace_inline("mailbox.failed", message, started)
            reply = cell.inline_failed(message, reply, exc)
        else:
            mailbox.handled += 1
            if traced:
                cell.trace_inline("mailbox.handled", message, started)
            if reply is INLINE_ASK:
                return value
        finally:
            cell._current = outer
        if reply._open:
            try:
                await reply.wait()
            except BaseException:
                if reply._open:  # the asker gave up: a later answer is dropped
                    reply._abandon()
                raise
        return reply._result()

    async def _ask_within(self, message: Any, timeout: float) -> Any:
        with move_on_after(timeout):
            return await self.ask(message)
        raise AskTimeout(f"actor {self.name!r} did not answer {type(message).__name__} within {timeout} s")

    async def stop(self) -> None:
        """Stop this actor: queued messages are refused now, the current one gets the grace.

        Called from the actor's own handler it returns at once and the actor stops after it.
        """
        await self._cell.stop()

    def _unhandled(self, message: Any) -> UnhandledMessage:
        return UnhandledMessage(
            f"actor {self.name!r} ({self._cell._factory.__name__}) has no handler for "
            f"{type(message).__name__}; it handles {', '.join(t.__name__ for t in self._handlers) or 'nothing'}"
        )
