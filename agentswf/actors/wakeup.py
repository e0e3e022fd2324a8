"""`Wakeup`: a one-shot event with at most one waiter, woken at the event loop's own cost.

Every ask's reply and every idle mailbox waits on one. An `anyio.Event` costs more than
the exchange needs: making one looks the backend up (`sniffio`) and builds the backend's
event inside it; waiting on it goes through that event's own waiter list. A wakeup has a
single waiter (the asker, the actor), so it keeps only that: on asyncio the future the
waiter awaits, on trio the parked task itself, rescheduled when set.

Cancellation is the backend's own: on asyncio a cancelled waiter's future is cancelled (a
later `set` passes it over); on trio the parked task is unparked and forgotten.

`checkpoint` is `anyio.lowlevel.checkpoint` for the kernel's hot paths, at the same saving:
the backend's own checkpoint, without looking the backend up each time; `cancel_scope` is
`anyio.CancelScope()` so (trio's own scope on trio, which anyio's wraps).
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Awaitable, Generator
from types import ModuleType
from typing import TYPE_CHECKING, Any

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
    if asyncio._get_running_loop() is not None:
        return _asyncio_checkpoint()
    trio = _trio if _trio is not None else _trio_lowlevel()
    return trio.checkpoint()  # type: ignore[no-any-return]


_asyncio_scope: type | None = None  # anyio's cancel scope class on asyncio, found at the first scope made there
_trio_scope: type | None = None  # trio.CancelScope, imported at the first scope made on trio


def cancel_scope() -> Any:
    """A new cancel scope without a deadline, as `anyio.CancelScope()` makes one (`cancel`,
    `cancelled_caught`, `with`), without looking the backend up: trio's own on trio."""
    global _asyncio_scope, _trio_scope
    if asyncio._get_running_loop() is not None:
        if _asyncio_scope is None:
            import anyio

            _asyncio_scope = type(anyio.CancelScope())
        return _asyncio_scope()
    if _trio_scope is None:
        import trio

        _trio_scope = trio.CancelScope
    return _trio_scope()


class Wakeup:
    """`set` once; `wait` returns once it is set (at once, after a checkpoint, if it was)."""

    __slots__ = ("_set", "_future", "_task")

    def __init__(self) -> None:
        self._set = False
        self._future: asyncio.Future[None] | None = None
        self._task: Task | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
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
            _trio_lowlevel().reschedule(task)

    async def wait(self) -> None:
        if self._set:
            await checkpoint()
            return
        loop = asyncio._get_running_loop()
        if loop is not None:
            self._future = future = loop.create_future()
            await future
            return
        trio = _trio if _trio is not None else _trio_lowlevel()
        self._task = trio.current_task()
        succeeded = trio.Abort.SUCCEEDED

        def abort(_: Any) -> Any:
            self._task = None
            return succeeded

        await trio.wait_task_rescheduled(abort)
