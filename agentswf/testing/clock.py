"""Virtual time: a run's timeouts, nudges and check-ins tested in milliseconds, on asyncio and trio.

`virtual_clock(backend)` gives the backend options that run a loop on a virtual clock:

    anyio.run(main, backend="trio", backend_options=virtual_clock("trio"))
    anyio.run(main, backend="asyncio", backend_options=virtual_clock("asyncio"))

(`trio.run(main, clock=virtual_clock("trio")["clock"])`, and for asyncio
`asyncio.Runner(loop_factory=virtual_clock("asyncio")["loop_factory"])`, without anyio.) In a
test, `@pytest.mark.virtual_time` does it (agentswf's pytest plugin).

The clock stands still while anything runs, and jumps to the next deadline once the loop has
been idle for `AUTOJUMP_THRESHOLD_SECONDS` of real time: so a wait of twenty minutes passes in a
tenth of a second, while real I/O (a scripted agent's socket, the Recorder's writes and fsyncs in
worker threads) still completes between jumps. A clock that jumps the moment no task is runnable
jumps while a worker thread or a socket is still busy, and a deadline fires early; a short real
idleness held in every measurement (issue 33).

On trio it is trio's own `MockClock` with that autojump threshold. On asyncio it is
`VirtualTimeLoop`, our own: a selector loop whose `time()` is virtual and whose waits jump the
same way, some thirty lines. Not `looptime` (PyPI), which fast-forwards after a count of idle loop
cycles rather than a real idleness, and so jumps while anyio's worker threads (which it doesn't
see: they don't go through `run_in_executor`) are still writing; its pytest plugin also fails
every test's setup where pytest-asyncio isn't installed. Both clocks are marked virtual for the
engine (`engine.clock.keep_virtual`), whose every timestamp then reads the virtual clock's wall,
and neither jumps while work in real time runs in a worker thread (`engine.clock.in_real_time`: the
record's fsyncs, the wait for the run's watchdog to exit): on a loaded machine an fsync outlasted
the threshold, and the clock jumped to the run's timeout.
"""

from __future__ import annotations

import asyncio
import functools
import math
import selectors
import time
from typing import Any

from ..engine.clock import keep_virtual

AUTOJUMP_THRESHOLD_SECONDS = 0.1  # of real idleness before the clock jumps to the next deadline


class _JumpingSelector(selectors.DefaultSelector):
    """The loop's selector, keeping its virtual time: a wait for a timer is at most the threshold
    of real time, and when nothing came in that long the time jumps to the timer."""

    def __init__(self, autojump_threshold: float) -> None:
        super().__init__()
        self.virtual_time = time.monotonic()  # where a real loop's clock would start: no zero to mistake for "never"
        self.autojump_threshold = autojump_threshold
        self.held = False  # while work in real time runs (engine.clock.in_real_time): no jump

    def hold(self, held: bool) -> None:
        self.held = held

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        """`timeout` is the time to the loop's next timer (None: it has none, 0: work is ready).
        A timer nearer than the threshold is waited for in real time (trio's clock would wait the
        threshold): the same safety, sooner."""
        if timeout is None or timeout <= 0:
            return super().select(timeout)
        ready = super().select(min(timeout, self.autojump_threshold))
        if not ready and not self.held:
            self.virtual_time += timeout
        return ready


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio loop whose clock stands still and jumps, as trio's `MockClock` with autojump does."""

    def __init__(self, autojump_threshold: float = AUTOJUMP_THRESHOLD_SECONDS) -> None:
        self._jumps = _JumpingSelector(autojump_threshold)
        super().__init__(self._jumps)
        keep_virtual(self, self._jumps.hold)

    def time(self) -> float:
        return self._jumps.virtual_time


def virtual_clock(backend: str = "asyncio", *, autojump_threshold: float = AUTOJUMP_THRESHOLD_SECONDS) -> dict[str, Any]:
    """anyio's `backend_options` for a loop on a virtual clock: `{"clock": ...}` on trio,
    `{"loop_factory": ...}` on asyncio. A trio clock is for one run at a time."""
    if backend == "trio":
        from trio.testing import MockClock

        clock = MockClock(autojump_threshold=autojump_threshold)
        clock.jump(time.monotonic())  # as the asyncio loop's, from where a real clock would be

        def hold(held: bool) -> None:  # MockClock is final: its jumps are held by its threshold
            clock.autojump_threshold = math.inf if held else autojump_threshold

        keep_virtual(clock, hold)
        return {"clock": clock}
    if backend == "asyncio":
        return {"loop_factory": functools.partial(VirtualTimeLoop, autojump_threshold)}
    raise ValueError(f"virtual_clock: no backend {backend!r}; it is asyncio or trio")
