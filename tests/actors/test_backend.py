"""`backend`: the kernel's task groups, scopes, events and current task are the backend's own,
and behave as anyio's do."""

from __future__ import annotations

import anyio
import pytest

from agentswf.actors import backend

pytestmark = pytest.mark.anyio


async def test_a_task_group_whose_tasks_all_ended_cancelled_raises_the_cancellation_alone() -> None:
    raised: list[BaseException] = []
    with anyio.CancelScope() as outer:
        try:
            async with backend.task_group() as tasks:
                tasks.start_soon(anyio.sleep_forever)
                tasks.start_soon(anyio.sleep_forever)
                await anyio.lowlevel.checkpoint()
                outer.cancel()
                await anyio.sleep_forever()
        except BaseException as exc:
            raised.append(exc)
            raise
    assert outer.cancelled_caught
    assert [type(exc) for exc in raised] == [anyio.get_cancelled_exc_class()]  # as anyio's, not a group


async def test_a_task_groups_error_is_raised_in_a_group_and_cancels_the_rest() -> None:
    async def fail() -> None:
        raise ValueError("fail")

    with pytest.raises(BaseExceptionGroup) as raised:
        async with backend.task_group() as tasks:
            tasks.start_soon(anyio.sleep_forever)
            tasks.start_soon(fail, name="failing")
    assert [type(exc) for exc in raised.value.exceptions] == [ValueError]


async def test_move_on_after_times_out_on_the_backends_clock_and_shields() -> None:
    start = anyio.current_time()
    with backend.move_on_after(0.01) as scope:
        await anyio.sleep_forever()
    assert scope.cancelled_caught and anyio.current_time() - start >= 0.01
    with anyio.CancelScope() as outer:
        outer.cancel()
        with backend.move_on_after(0.01, shield=True) as shielded:
            await anyio.sleep_forever()  # only the deadline ends it: the outer cancel is shielded
        assert shielded.cancelled_caught
        await anyio.lowlevel.checkpoint()
        pytest.fail("the outer cancel did not reach the checkpoint after the shield")
    assert outer.cancelled_caught


async def test_event_and_current_task() -> None:
    event = backend.event()
    assert not event.is_set()
    me = backend.current_task()
    seen: list[object] = []

    async def other() -> None:
        seen.append(backend.current_task())
        event.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        await event.wait()
    assert event.is_set() and seen and seen[0] is not me and backend.current_task() is me
