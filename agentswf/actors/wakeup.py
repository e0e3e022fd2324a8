"""`Wakeup`: a one-shot event with at most one waiter, woken at the event loop's own cost.

Every idle mailbox waits on one, and every ask's reply is one (a `Waitable`, the same
parking place without `set`, as a reply is answered through `Reply.set`). An `anyio.Event` costs more than
the exchange needs: making one looks the backend up (`sniffio`) and builds the backend's
event inside it; waiting on it goes through that event's own waiter list. A wakeup has a
single waiter (the asker, the actor), so it keeps only that: on asyncio the future the
waiter awaits, on trio the parked task itself, rescheduled when set.

Cancellation is the backend's own: on asyncio a cancelled waiter's future is cancelled (a
later `set` passes it over); on trio the parked task is unparked and forgotten.

`checkpoint` is `anyio.lowlevel.checkpoint` for the kernel's hot paths, at the same saving:
the backend's own checkpoint, without looking the backend up each time (`backend` has the
kernel's other such primitives; `cancel_scope` is here too, where the engine imports it).
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Generator
from types import ModuleType
from typing import TYPE_CHECKING, Any

from sniffio import thread_local as _running

from .backend import cancel_scope as cancel_scope

if TYPE_CHECKING:
    from trio.lowlevel import Task

_trio: ModuleType | None = None  # trio.lowlevel, imported at the first wait on trio (an asyncio run never needs it)


def _trio_lowlevel() -> ModuleType:
    global _trio
    if _trio is None:
        import trio.lowlevel

        _trio = trio.lowlevel
    return _trio


@types.coroutine
def _asyncio_checkpoint() -> Generator[None, None, None]:
    yield  # what `asyncio.sleep(0)` does (anyio's checkpoint there): the task steps again next round


def checkpoint() -> Awaitable[None]:
    """A schedule point and a cancel point: what `anyio.lowlevel.checkpoint()` does on either backend."""
    if _running.name != "trio":  # which backend runs: see `backend`
        return _asyncio_checkpoint()
    trio = _trio if _trio is not None else _trio_lowlevel()
    return trio.checkpoint()  # type: ignore[no-any-return]


class Waitable:
    """One waiter's parking place: `wait` returns once `_wake` is called (at once, after a
    checkpoint, if it was). A `Wakeup` is one; so is an ask's reply, its asker's own."""

    __slots__ = ("_set", "_future", "_task")

    def __init__(self) -> None:
        self._set = False
        self._future: asyncio.Future[None] | None = None
        self._task: Task | None = None

    def _wake(self) -> None:
        if self._set:
            return
        self._set = True
        future = self._future
        if future is not None:
            self._future = None
            if not future.done():
                future.set_result(None)
        elif self._task is not None:
            task, self._task = self._task, None
            (_trio if _trio is not None else _trio_lowlevel()).reschedule(task)

    async def wait(self) -> None:
        if self._set:
            await checkpoint()
            return
        if _running.name != "trio":
            self._future = future = asyncio.get_running_loop().create_future()
            await future
            return
        trio = _trio if _trio is not None else _trio_lowlevel()
        self._task = trio.current_task()
        await trio.wait_task_rescheduled(self._abort)

    def _abort(self, _: Any) -> Any:
        """Trio's abort callback: the parked task is cancelled, so forget it."""
        self._task = None
        return _trio_lowlevel().Abort.SUCCEEDED


class Wakeup(Waitable):
    """`set` once; `wait` returns once it is set (at once, after a checkpoint, if it was).

    `rearm` makes a set wakeup unset again, for a waiter that parks on the same one each
    time (a mailbox's actor): only while nobody waits on it.
    """

    __slots__ = ()

    set = Waitable._wake

    def is_set(self) -> bool:
        return self._set

    def rearm(self) -> None:
        self._set = False
