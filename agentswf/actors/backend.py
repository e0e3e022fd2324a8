"""The backend's own task groups, cancel scopes, events and current task, looked up once.

Each costs a backend lookup through anyio (`sniffio`, then anyio's backend class) every
time it is made, and on trio anyio wraps trio's own: a task group's every task gets a
handle, a cancel scope and an event of its own besides trio's task. An actor system makes
these per actor and per stop, so the kernel makes what anyio would make underneath: trio's
own on trio (a nursery, `trio.CancelScope`, `trio.Event`), anyio's asyncio classes on
asyncio, found at the first one made there. Which backend runs is sniffio's answer, read
where it is cheapest: `sniffio.thread_local.name`, which trio sets to "trio" in the thread it
runs in, for as long as it runs (the hook sniffio documents for an async library); asyncio sets
nothing, and anyio runs on nothing else. `sniffio.current_async_library()` itself would read
the same first, but on asyncio goes on to `asyncio.current_task()`: 0.6 µs a call against
0.03 µs, and the kernel asks on every message. This module and `wakeup` are the only places
outside `testing` that use an asyncio- or trio-specific API; the rest of the engine uses them.

Semantics are anyio's: a task group whose tasks all ended cancelled raises the backend's
cancellation, not a group of them, as anyio's does; deadlines are on the backend's clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from types import ModuleType, TracebackType
from typing import Any, Protocol

from sniffio import thread_local as _running

_trio: ModuleType | None = None  # trio, imported when first needed (an asyncio run never needs it)
_asyncio_scope: type | None = None  # anyio's asyncio cancel scope class
_asyncio_event: type | None = None  # anyio's asyncio event class
_asyncio_group: type | None = None  # anyio's asyncio task group class


class Tasks(Protocol):
    """What the kernel uses of a task group: anyio's on asyncio, a trio nursery on trio."""

    @property
    def cancel_scope(self) -> Any: ...

    def start_soon(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any, name: object = None) -> None: ...


class Event(Protocol):
    """What the kernel uses of an event: trio's on trio, anyio's on asyncio."""

    def set(self) -> None: ...
    def is_set(self) -> bool: ...
    async def wait(self) -> None: ...


def _trio_module() -> ModuleType:
    """trio itself, imported at the first call."""
    global _trio
    if _trio is None:
        import trio

        _trio = trio
    return _trio


def _anyio_classes() -> None:
    """Find anyio's asyncio classes by making one of each (anyio looks the backend up for it)."""
    global _asyncio_scope, _asyncio_event, _asyncio_group
    import anyio

    _asyncio_scope = type(anyio.CancelScope())
    _asyncio_event = type(anyio.Event())
    _asyncio_group = type(anyio.create_task_group())


def cancel_scope(shield: bool = False) -> Any:
    """`anyio.CancelScope(shield=shield)`: a new cancel scope without a deadline (`cancel`, `cancelled_caught`, `with`)."""
    if _running.name != "trio":
        if _asyncio_scope is None:
            _anyio_classes()
        return _asyncio_scope(shield=shield)  # type: ignore[misc]
    trio = _trio if _trio is not None else _trio_module()
    return trio.CancelScope(shield=shield)


def current_time() -> float:
    """`anyio.current_time()`: the running loop's clock (a turn reads it several times)."""
    if _running.name != "trio":
        return asyncio.get_running_loop().time()
    trio = _trio if _trio is not None else _trio_module()
    return trio.current_time()  # type: ignore[no-any-return]


def move_on_after(seconds: float, shield: bool = False) -> Any:
    """`anyio.move_on_after(seconds, shield=shield)`: a cancel scope whose deadline is `seconds` from now."""
    if _running.name != "trio":
        if _asyncio_scope is None:
            _anyio_classes()
        return _asyncio_scope(deadline=asyncio.get_running_loop().time() + seconds, shield=shield)  # type: ignore[misc]
    trio = _trio if _trio is not None else _trio_module()
    return trio.CancelScope(deadline=trio.current_time() + seconds, shield=shield)


def event() -> Event:
    """`anyio.Event()`: trio's own on trio."""
    if _running.name != "trio":
        if _asyncio_event is None:
            _anyio_classes()
        return _asyncio_event()  # type: ignore[misc, no-any-return]
    trio = _trio if _trio is not None else _trio_module()
    return trio.Event()  # type: ignore[no-any-return]


def current_task() -> object:
    """The running task itself (asyncio's or trio's), to tell one task from another by identity."""
    if _running.name != "trio":
        return asyncio.current_task()
    trio = _trio if _trio is not None else _trio_module()
    return trio.lowlevel.current_task()


def task_group() -> Any:
    """`anyio.create_task_group()`: on trio a nursery, its tasks trio's alone."""
    if _running.name != "trio":
        if _asyncio_group is None:
            _anyio_classes()
        return _asyncio_group()  # type: ignore[misc]
    return _Nursery()


class _Nursery:
    """`trio.open_nursery()`, leaving as anyio's task group leaves: all cancelled is one `Cancelled`."""

    __slots__ = ("_manager",)

    def __init__(self) -> None:
        trio = _trio if _trio is not None else _trio_module()
        self._manager = trio.open_nursery()

    async def __aenter__(self) -> Tasks:
        return await self._manager.__aenter__()  # type: ignore[no-any-return]

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        trio = _trio if _trio is not None else _trio_module()
        try:
            return await self._manager.__aexit__(exc_type, exc, tb)  # type: ignore[no-any-return]
        except BaseExceptionGroup as group:
            if not group.split(trio.Cancelled)[1]:
                raise trio.Cancelled._create() from group
            raise
        finally:
            del exc, tb
