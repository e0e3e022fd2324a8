"""Cancelling a run the way plain asyncio does it (wait_for, task.cancel) records its ending.

anyio's shields don't stop asyncio's native cancellation in the task it is aimed at,
so these run on asyncio alone, without anyio around them, as an asyncio server would; but the
last, a cleanup that runs out of time, on both backends.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import anyio
import msgspec
import pytest

import agentswf
from agentswf import workflow
from agentswf.testing import answer, run_workflow
from agentswf.workflow.running import CANCEL_CLEANUP_SECONDS


def _sleeper(pids: Path):
    @workflow(name="slow", description="An agent that never answers.")
    async def slow(wf):
        agent = await wf.agents.open("sleeper", runtime=f"shell:echo $$ >> {pids}; sleep 1000")
        await agent.run("Sleep.", timeout="1h")

    return slow


async def _until_started(pids: Path) -> None:
    while not pids.exists():
        await asyncio.sleep(0.02)


def _ending(root: Path) -> dict:
    [run_dir] = (root / "slow").iterdir()
    assert (run_dir / "output.json").exists(), sorted(path.name for path in run_dir.iterdir())
    return msgspec.json.decode((run_dir / "output.json").read_bytes())


def _assert_agent_gone(pids: Path) -> None:
    with pytest.raises(ProcessLookupError):
        os.kill(int(pids.read_text().split()[0]), 0)


def test_wait_for_records_cancelled(tmp_path):
    pids, root = tmp_path / "pids", tmp_path / "runs"

    async def main() -> None:
        run = asyncio.ensure_future(agentswf.run(_sleeper(pids), run_root=root))
        await _until_started(pids)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(run, 0.05)

    asyncio.run(main())
    assert _ending(root)["outcome"] == "cancelled"
    _assert_agent_gone(pids)


def test_wait_for_on_the_run_itself_records_cancelled(tmp_path):
    root = tmp_path / "runs"

    async def main() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(agentswf.run(_sleeper(tmp_path / "pids"), run_root=root), 0.7)

    asyncio.run(main())
    assert _ending(root)["outcome"] == "cancelled"


def test_task_cancel_records_cancelled(tmp_path):
    pids, root = tmp_path / "pids", tmp_path / "runs"

    async def main() -> None:
        task = asyncio.create_task(agentswf.run(_sleeper(pids), run_root=root))
        await _until_started(pids)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert _ending(root)["outcome"] == "cancelled"
    _assert_agent_gone(pids)


def test_a_task_cancelled_twice_still_records_cancelled(tmp_path):
    pids, root = tmp_path / "pids", tmp_path / "runs"

    async def main() -> None:
        task = asyncio.create_task(agentswf.run(_sleeper(pids), run_root=root))
        await _until_started(pids)
        task.cancel()
        await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert _ending(root)["outcome"] == "cancelled"
    _assert_agent_gone(pids)


@pytest.mark.virtual_time
async def test_the_ending_is_recorded_even_when_the_cleanup_runs_out_of_time(tmp_path):
    """The workflow's own cleanup outlives CANCEL_CLEANUP_SECONDS, so closing its agents is cut
    off: the Recorder outlives that bound, and the ending is recorded all the same."""
    root = tmp_path / "runs"
    began = anyio.Event()

    async def script(turn):
        began.set()
        await anyio.sleep_forever()

    @workflow(name="slow", description="A workflow whose cleanup takes too long.")
    async def slow(wf):
        agent = await wf.agents.open("sleeper", runtime="shell:true")
        try:
            await agent.run("Sleep.", timeout="1h")
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(CANCEL_CLEANUP_SECONDS * 2)

    with anyio.CancelScope() as scope:

        async def cancel_once_started() -> None:
            await began.wait()
            scope.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(cancel_once_started)
            await run_workflow(slow, agents={"sleeper": answer(script)}, run_root=root)
    assert _ending(root)["outcome"] == "cancelled"
