"""`Wakeup`, the one-waiter event under every ask's reply and every idle mailbox."""

from __future__ import annotations

import anyio
import pytest

from agentswf.actors.wakeup import Wakeup

pytestmark = pytest.mark.anyio


async def test_a_waiter_is_woken_when_it_is_set() -> None:
    wakeup, woken = Wakeup(), []

    async def waiter() -> None:
        await wakeup.wait()
        woken.append(anyio.current_time())

    async with anyio.create_task_group() as group:
        group.start_soon(waiter)
        await anyio.sleep(0.05)
        assert not woken and not wakeup.is_set()
        wakeup.set()
    assert len(woken) == 1 and wakeup.is_set()


async def test_a_wait_after_it_is_set_returns_after_a_checkpoint() -> None:
    wakeup = Wakeup()
    wakeup.set()
    wakeup.set()  # a second set does nothing
    with anyio.CancelScope() as scope:
        scope.cancel()
        await wakeup.wait()  # the checkpoint: a cancelled scope stops it there
        pytest.fail("wait returned without a checkpoint")
    with anyio.fail_after(1):
        await wakeup.wait()


async def test_a_cancelled_waiter_is_forgotten_and_a_later_set_is_harmless() -> None:
    wakeup = Wakeup()
    with anyio.move_on_after(0.05) as scope:
        await wakeup.wait()
    assert scope.cancelled_caught
    wakeup.set()  # nobody waits now: nothing is rescheduled or resolved
    await anyio.sleep(0.01)
    with anyio.fail_after(1):
        await wakeup.wait()


async def test_a_set_wakes_its_waiter_once_even_if_set_again_before_it_runs() -> None:
    wakeup, woken = Wakeup(), []

    async def waiter() -> None:
        await wakeup.wait()
        woken.append(1)

    async with anyio.create_task_group() as group:
        group.start_soon(waiter)
        await anyio.sleep(0.01)
        wakeup.set()
        wakeup.set()
    assert woken == [1]
