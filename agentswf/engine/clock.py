"""The event loop's clock, as people read time: this moment as an `Instant` (engine/instant.py).

Apart from `Instant` because reading the loop's clock asks the running backend (the actor
kernel's), which the pure rules that take an `Instant` never import.

Every time the engine decides by, or writes to the record, or tells an agent, is read here: the
loop's time, and Unix time as `wall()`. Under a virtual clock (`agentswf.testing.virtual_clock`,
which marks its trio clock or asyncio loop with `keep_virtual`) the loop's time jumps, and Unix
time is the virtual clock's own: the wall time at its first reading plus the virtual time since,
so a turn of "20m" is recorded as twenty minutes long and every timestamp of the run agrees. Out
of virtual time (no clock ever marked in this process) `wall()` is `time.time()`, read at once.
"""

from __future__ import annotations

import asyncio
import time
import weakref

from sniffio import thread_local as _running

from ..actors.backend import current_time
from .instant import Instant

_virtual: weakref.WeakKeyDictionary[object, Instant | None] = weakref.WeakKeyDictionary()
"""Each virtual clock (trio's) or loop (asyncio's), with where its time met the wall (once read)."""
_any_virtual = False  # whether a clock was ever marked: until then a reading asks nothing more


def keep_virtual(timekeeper: object) -> None:
    """Mark a trio `Clock` or an asyncio loop as virtual: its wall time runs with its own time."""
    global _any_virtual
    _virtual[timekeeper] = None
    _any_virtual = True


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
