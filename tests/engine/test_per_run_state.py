"""Nothing a run keeps is the process's: two runs in one process don't share their admission
warning, their watchers or their kept panes (issue 32, item 7)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from agentswf import Workflow, workflow
from agentswf.engine import admission
from agentswf.harnesses.pane_keep import RUN_PANES, KeptPane, keep_when_run_ends
from agentswf.progress import watch_runs
from agentswf.testing import run_workflow

pytestmark = pytest.mark.anyio
NO_CHECK = "processes' parents can't be read here (no /proc): the run can't check who connects"


@workflow(name="idle", description="Does nothing.")
async def idle(wf: Workflow) -> str:
    return wf.run_id


async def test_each_run_says_it_cant_check_who_connects(run_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admission, "parents_readable", lambda: False)
    with capture_logs() as logs:
        for _ in range(2):
            assert (await run_workflow(idle, agents={}, run_root=run_root)).outcome == "completed"
    assert [log["event"] for log in logs if log["event"] == NO_CHECK] == [NO_CHECK, NO_CHECK]


async def test_two_runs_started_from_two_tasks_are_each_told_to_their_own_watcher(run_root: Path) -> None:
    told: dict[str, list[str]] = {"a": [], "b": []}
    ran: dict[str, str] = {}

    async def watching(name: str) -> None:
        remove = watch_runs(lambda run_id, _record: told[name].append(run_id))
        try:
            ran[name] = (await run_workflow(idle, agents={}, run_root=run_root / name)).value
        finally:
            remove()

    async with anyio.create_task_group() as group:
        group.start_soon(watching, "a")
        group.start_soon(watching, "b")
    assert told == {"a": [ran["a"]], "b": [ran["b"]]}


def pane(run_dir: Path, agent: str) -> KeptPane:
    return KeptPane(str(run_dir / "kept"), agent, "claude", str(run_dir), "session", str(run_dir), time.time())


@workflow(name="keeps", description="Asks to keep a pane, and says which its run keeps.")
async def keeps(wf: Workflow) -> list[str]:
    keep_when_run_ends("tmux", pane(wf.run_dir, wf.run_id), ["true"], {})
    await anyio.sleep(0.2)  # the other run asks meanwhile
    panes = RUN_PANES.get()
    assert panes is not None
    held = [kept.agent for _tmux, kept, _argv, _env in panes.panes]
    panes.panes.clear()  # nothing to start: this is about whose they are
    return held


async def test_two_runs_keep_their_own_panes(run_root: Path) -> None:
    results: dict[str, Any] = {}

    async def one(name: str) -> None:
        results[name] = await run_workflow(keeps, agents={}, run_root=run_root / name)

    async with anyio.create_task_group() as group:
        group.start_soon(one, "a")
        group.start_soon(one, "b")
    for result in results.values():
        assert result.value == [result.run_id]
    assert RUN_PANES.get() is None  # nothing of theirs outlives them


def test_a_pane_closed_outside_a_run_is_not_held(tmp_path: Path) -> None:
    with capture_logs() as logs:
        keep_when_run_ends("tmux", pane(tmp_path, "a"), ["true"], {})
    assert RUN_PANES.get() is None
    assert [log["event"] for log in logs] == ["the pane could not be kept: its agent closed outside a run"]
