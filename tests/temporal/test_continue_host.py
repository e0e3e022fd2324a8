"""`awf continue` of a Temporal run whose host was killed: refused while its workflow still runs on an
`awf worker` (two attempts at once would both run its stages), and once it has ended, its record is
written from Temporal first (its attempt's end with it), as `awf logs` writes it."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import anyio
import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

from temporalio.client import Client

from agentswf.engine.record.attempts import read_attempts
from agentswf.temporal import on_asyncio

from .test_workers import Workers, host_killed_mid_turn


@pytest.fixture
def keeper(temporal_address: str, tmp_path: Path) -> Iterator[Workers]:
    """The `awf worker` that runs the workflow's code and turns once its host is killed."""
    started = Workers(temporal_address, f"test-{uuid4().hex[:8]}", tmp_path)
    try:
        yield started
    finally:
        started.stop()


async def ended(address: str, workflow_id: str) -> None:
    await (await Client.connect(address)).get_workflow_handle(workflow_id).result()


async def awf_continue(flow: Path, run_id: str, runs: Path) -> tuple[int, str]:
    said = await anyio.run_process(
        [sys.executable, "-m", "agentswf", "continue", str(flow), run_id, "--run-root", str(runs)], check=False
    )
    return said.returncode, said.stderr.decode()


async def test_a_continue_waits_for_the_workflow_its_killed_host_left_running(keeper: Workers, tmp_path: Path) -> None:
    go_on = tmp_path / "go-on"
    _, runs = await host_killed_mid_turn(keeper, tmp_path, go_on)
    [record] = runs.glob("outlives/*/temporal.json")
    run_dir, flow = record.parent, tmp_path / "outlives.py"
    workflow_id = json.loads(record.read_text())["workflow_id"]

    code, said = await awf_continue(flow, run_dir.name, runs)
    assert code == 2, said
    assert f"continue {run_dir.name}: it is still running on Temporal (workflow {workflow_id}); awf stop it" in said, said
    assert [attempt.n for attempt in read_attempts(run_dir)] == [1]  # no second attempt claimed

    go_on.touch()
    with anyio.fail_after(90):  # the sticky queue's timeout (10 s), then the keeper replays and goes on
        await on_asyncio(functools.partial(ended, keeper.address, workflow_id))
    code, said = await awf_continue(flow, run_dir.name, runs)
    assert code == 2 and f"run {run_dir.name} completed in attempt 1; there is nothing to continue" in said, said
    assert json.loads((run_dir / "output.json").read_text())["value"] == ["first", "second"]  # written from Temporal
    [attempt] = read_attempts(run_dir)
    assert (attempt.outcome, attempt.turns) == ("completed", 2)
