"""The run's watchdog: a process of its own that outlives a run killed with `kill -9`.

While the run lives it holds one end of a pipe; when the run ends, or dies, the pipe closes and
the watchdog kills whatever still carries the run's mark and removes the run's directory of
sockets (`harnesses/keeper.py`'s `watch`). The run's end waits for it to do so, in real time:
it is a process, and under a virtual clock (`agentswf.testing.virtual_clock`) a sweep slower than
the clock's threshold of idleness (on a loaded machine) let the clock jump its whole grace, and
the watchdog was killed mid-sweep.
"""

from __future__ import annotations

import functools
import os
import select
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio

from ..harnesses.keeper import MARK_VARIABLE, watch_command
from .clock import in_real_time

WATCHDOG_GRACE_SECONDS = 5.0  # of real time, for the run's watchdog to sweep and exit once the run ends


@asynccontextmanager
async def watched(run_dir: Path) -> AsyncIterator[None]:
    """A watchdog for the run whose directory is `run_dir` (its name is the run's mark): when
    the block ends, or the process dies (`kill -9`), it kills what carries the mark and
    removes the directory. The block's end waits for it."""
    read, write = os.pipe()
    try:
        with anyio.CancelScope(shield=True):
            watchdog = await anyio.open_process(
                watch_command(sys.executable, read, str(run_dir)),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=None,
                env={key: value for key, value in os.environ.items() if key != MARK_VARIABLE},
                start_new_session=True,
                pass_fds=(read,),
            )
    finally:
        os.close(read)
    try:
        yield
    finally:
        os.close(write)
        with anyio.CancelScope(shield=True):
            if not await in_real_time(functools.partial(_exits_within, watchdog.pid, WATCHDOG_GRACE_SECONDS)):
                watchdog.kill()
            await watchdog.aclose()


def _exits_within(pid: int, seconds: float) -> bool:
    """Whether the child `pid` ends within `seconds` of real time; it is left for its parent to reap."""
    descriptor = os.pidfd_open(pid)
    try:
        return bool(select.select([descriptor], [], [], seconds)[0])
    finally:
        os.close(descriptor)
