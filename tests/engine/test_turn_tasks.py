"""A turn's task is cancelled by its stop only while it runs: one that has ended leaves no scope
behind to cancel (on asyncio, anyio's cancel formats the cancelling task's repr each time)."""

from __future__ import annotations

import anyio
import pytest

from agentswf.engine.agent.attempt import TurnTasks

pytestmark = pytest.mark.anyio


async def test_an_ended_task_leaves_no_scope_and_a_running_one_is_cancelled() -> None:
    ran: list[str] = []

    async def quick() -> None:
        ran.append("quick")

    async def slow() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            ran.append("slow cancelled")

    async with anyio.create_task_group() as group:
        tasks = TurnTasks(group.start_soon)
        tasks.spawn(quick)
        tasks.spawn(slow)
        await anyio.wait_all_tasks_blocked()
        assert ran == ["quick"] and len(tasks.scopes) == 1
        tasks.stop()
    assert ran == ["quick", "slow cancelled"] and tasks.scopes == []
