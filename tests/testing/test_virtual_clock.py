"""The virtual clock itself: the mark on one test, the backend options outside pytest, and the
wall time the engine reads (engine/clock.py) on a virtual clock and off one."""

from __future__ import annotations

import time

import anyio
import pytest

from agentswf.engine import clock
from agentswf.testing import virtual_clock
from agentswf.testing.clock import AUTOJUMP_THRESHOLD_SECONDS


@pytest.mark.virtual_time
async def test_the_mark_on_one_test_makes_an_hour_pass_at_once():
    started, wall, real = anyio.current_time(), clock.wall(), time.monotonic()
    await anyio.sleep(3600)
    assert anyio.current_time() - started == pytest.approx(3600)
    assert clock.wall() - wall == pytest.approx(3600)  # the wall the engine records runs with it
    assert clock.virtual()
    assert time.monotonic() - real < 1


@pytest.mark.virtual_time
async def test_real_work_in_a_thread_finishes_before_the_clock_jumps():
    """A wait shorter than the threshold in a worker thread (an fsync, a sync tool handler) is not
    overtaken by a deadline: the clock jumps only once the loop has been idle that long."""
    with anyio.move_on_after(60) as scope:
        await anyio.to_thread.run_sync(time.sleep, AUTOJUMP_THRESHOLD_SECONDS / 4)
    assert not scope.cancelled_caught


async def test_off_the_virtual_clock_the_wall_is_the_wall():
    assert not clock.virtual()
    assert clock.wall() == pytest.approx(time.time(), abs=1)
    assert clock.now().wall == pytest.approx(time.time(), abs=1)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_virtual_clock_runs_a_program_outside_pytest(backend):
    async def main() -> tuple[float, float, bool]:
        started, wall = anyio.current_time(), clock.wall()
        await anyio.sleep(24 * 3600)
        return anyio.current_time() - started, clock.wall() - wall, clock.virtual()

    real = time.monotonic()
    waited, walled, virtual = anyio.run(main, backend=backend, backend_options=virtual_clock(backend))
    assert (waited, virtual) == (pytest.approx(24 * 3600), True)
    assert walled == pytest.approx(24 * 3600)
    assert time.monotonic() - real < 1


def test_an_unknown_backend_is_named():
    with pytest.raises(ValueError, match="curio"):
        virtual_clock("curio")
