"""The event loop's clock, as people read time: this moment as an `Instant` (engine/instant.py).

Apart from `Instant` because reading the loop's clock asks the running backend (the actor
kernel's), which the pure rules that take an `Instant` never import.

Every time the engine decides by, or writes to the record, or tells an agent, is read here: the
loop's time, and Unix time as `wall()`. Under a virtual clock (`agentswf.testing.virtual_clock`,
which marks its trio clock or asyncio loop with `keep_virtual`) the loop's time jumps, and Unix
time is the virtual clock's own: the wall time at its first reading plus the virtual time since,
so a turn of "20m" is recorded as twenty minutes long and every timestamp of the run agrees. Out
of virtual time (no clock ever marked in this process) `wall()` is `time.time()`, read at once.

Work whose time is real goes through `in_real_time`, which holds a virtual clock's jumps while it
runs in a worker thread: the record's writes and fsyncs (the disk's time), the wait for the run's
watchdog to exit (a process's). On a loaded machine an fsync or a process's exit outlasts the
clock's threshold of idleness, after which the clock would jump to the run's next deadline (its
timeout, twenty minutes on) with the work still under way.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable
from typing import TypeVar

import anyio
from sniffio import thread_local as _running

from ..actors.backend import current_time
from .instant import Instant

_virtual: weakref.WeakKeyDictionary[object, Instant | None] = weakref.WeakKeyDictionary()
"""Each virtual clock (trio's) or loop (asyncio's), with where its time met the wall (once read)."""
_any_virtual = False  # whether a clock was ever marked: until then a reading asks nothing more
_holds: weakref.WeakKeyDictionary[object, tuple[Callable[[bool], None], int]] = weakref.WeakKeyDictionary()
"""Each virtual clock's way to hold its jumps (True) and let them go (False), and its calls on disk now."""

T = TypeVar("T")


def keep_virtual(timekeeper: object, hold: Callable[[bool], None]) -> None:
    """Mark a trio `Clock` or an asyncio loop as virtual: its wall time runs with its own time, and
    `hold(True)` stops its jumps while work in real time runs (`in_real_time`), `hold(False)` lets them go."""
    global _any_virtual
    _virtual[timekeeper] = None
    _holds[timekeeper] = (hold, 0)
    _any_virtual = True


async def in_real_time(work: Callable[[], T], limiter: anyio.CapacityLimiter | None = None) -> T:
    """`work` (the record's writes and fsyncs, a wait for a process) in a worker thread, the running
    virtual clock's jumps held while it runs."""
    keeper = _timekeeper() if _any_virtual else None
    if keeper not in _holds:
        return await anyio.to_thread.run_sync(work, limiter=limiter)
    _hold(keeper, +1)
    try:
        return await anyio.to_thread.run_sync(work, limiter=limiter)
    finally:
        _hold(keeper, -1)


def _hold(keeper: object, change: int) -> None:
    hold, calls = _holds[keeper]
    _holds[keeper] = (hold, calls + change)
    if calls == 0 or calls + change == 0:  # the first call on disk, or the last one over
        hold(calls == 0)


def _timekeeper() -> object:
    """What keeps the running loop's time: trio's clock, or the asyncio loop itself.

    Raises RuntimeError outside a running loop."""
    if _running.name == "trio":
        import trio

        return trio.lowlevel.current_clock()
    return asyncio.get_running_loop()


def _anchor(loop_time: float) -> Instant | None:
    """Where the running virtual clock's time meets the wall; None out of virtual time."""
    try:
        keeper = _timekeeper()
    except RuntimeError:
        return None
    if keeper not in _virtual:
        return None
    anchor = _virtual[keeper]
    if anchor is None:  # its first reading: the wall is now, as the run sees it start
        anchor = _virtual[keeper] = Instant(loop_time, time.time())
    return anchor


def virtual() -> bool:
    """Whether the running loop's time is virtual."""
    if not _any_virtual:
        return False
    try:
        return _timekeeper() in _virtual
    except RuntimeError:
        return False


def now() -> Instant:
    """This moment, on both clocks."""
    loop = current_time()
    anchor = _anchor(loop) if _any_virtual else None
    return Instant(loop, time.time() if anchor is None else anchor.wall_of(loop))


def wall() -> float:
    """Unix seconds now, as the run reads them (the virtual clock's, under one)."""
    if not _any_virtual:
        return time.time()
    try:
        return now().wall
    except RuntimeError:  # no loop running here (a thread's work): the wall itself
        return time.time()


def wall_ms(loop_time: float) -> int | None:
    """A time on the event loop's clock as Unix milliseconds (None for no time at all)."""
    return now().ms(loop_time)
