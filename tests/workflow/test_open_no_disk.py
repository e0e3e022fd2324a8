"""Opening an agent waits on no disk: `wf.agents.open`, in the workflow's own task, makes no
worker-thread hop and opens, writes or fsyncs no file
(its sessions line goes to the Recorder, which writes it in its own batches).

Before: every open appended the agent's sessions line and fsynced it in a worker thread, one
open after another (≈ 0.8 ms an agent at 1,000 agents). What runs in the workflow's task is told
apart by a context variable set around the opens: the Recorder's and the agents' tasks were
started before it, in contexts of their own.
"""

from __future__ import annotations

import contextvars
import os
from typing import Any

import anyio
import anyio.to_thread
import pytest

from agentswf import workflow
from agentswf.engine.record.attempts import read_sessions
from agentswf.testing import answer, run_workflow

pytestmark = pytest.mark.anyio

AGENTS = 20
_opening: contextvars.ContextVar[bool] = contextvars.ContextVar("opening", default=False)
_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


@pytest.fixture
def disk_work(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the opens did on disk or in a worker thread (empty when nothing)."""
    seen: list[str] = []
    run_sync, os_open, fsync, write = anyio.to_thread.run_sync, os.open, os.fsync, os.write

    async def watched_run_sync(fn: Any, *args: Any, **kwargs: Any) -> Any:
        if _opening.get():
            seen.append(f"to_thread.run_sync({getattr(fn, '__qualname__', fn)})")
        return await run_sync(fn, *args, **kwargs)

    def watched_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if _opening.get() and flags & _WRITES:
            seen.append(f"os.open({path}) for writing")
        return os_open(path, flags, *args, **kwargs)

    def watched_fsync(fd: Any) -> None:
        if _opening.get():
            seen.append("os.fsync")
        fsync(fd)

    def watched_write(fd: int, data: Any) -> int:
        if _opening.get():
            seen.append("os.write")
        return write(fd, data)

    monkeypatch.setattr(anyio.to_thread, "run_sync", watched_run_sync)
    monkeypatch.setattr(os, "open", watched_open)
    monkeypatch.setattr(os, "fsync", watched_fsync)
    monkeypatch.setattr(os, "write", watched_write)
    return seen


@workflow(name="opens", description="Opens agents (the opens watched), then runs a turn of each.")
async def opens(wf: Any) -> int:
    token = _opening.set(True)
    try:
        agents = [await wf.agents.open(f"a{i}", runtime="codex") for i in range(AGENTS)]
    finally:
        _opening.reset(token)

    async def turn(agent: Any) -> bool:
        return (await agent.run("Go.", timeout=30)).answered

    assert all(await wf.parallel(agents, turn))
    return len(agents)


async def test_opening_agents_waits_on_no_disk(tmp_path: Any, disk_work: list[str]) -> None:
    scripts = {f"a{i}": answer("done") for i in range(AGENTS)}
    done = await run_workflow(opens, agents=scripts, run_root=tmp_path)
    assert (done.outcome, done.value) == ("completed", AGENTS), done.reason
    assert disk_work == []
    lines = read_sessions(done.run_dir)  # written all the same, by the Recorder
    assert [(line["attempt"], line["agent"], line["harness"]) for line in lines] == [(1, f"a{i}", "codex") for i in range(AGENTS)]
