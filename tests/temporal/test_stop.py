"""`wf.stop` on Temporal as locally: a stop is not an error, so `except WorkflowError` (or
`except Exception`) around it lets it through, in the workflow's body and inside `wf.parallel`."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

import agentswf
from agentswf import WorkflowError, workflow
from agentswf.temporal import TemporalEngine


async def both_engines(flow: Any, address: str, tmp_path: Path) -> list[agentswf.RunResult]:
    """The run locally, then on Temporal."""
    local = await agentswf.run(flow, run_root=tmp_path / "local", cwd=tmp_path)
    engine = TemporalEngine(address=address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "worker")
    remote = await agentswf.run(flow, run_root=tmp_path / "temporal", cwd=tmp_path, engine=engine)
    return [local, remote]


async def test_except_workflow_error_lets_a_stop_through_on_both_engines(temporal_address: str, tmp_path: Path) -> None:
    @workflow(name="stops-through", description="Stops inside except WorkflowError and except Exception.")
    async def stops(wf):  # type: ignore[no-untyped-def]
        try:
            try:
                wf.stop("enough")
            except WorkflowError:
                return "swallowed as a workflow error"
        except Exception:
            return "swallowed as an error"

    for result in await both_engines(stops, temporal_address, tmp_path):
        assert (result.outcome, result.reason, result.value) == ("stopped", "enough", None), result.reason


async def test_a_stop_inside_parallel_stops_the_run_on_both_engines(temporal_address: str, tmp_path: Path) -> None:
    @workflow(name="stops-in-parallel", description="One of three items stops the run.")
    async def parallel(wf):  # type: ignore[no-untyped-def]
        async def item(i: int) -> int:
            if i == 1:
                try:
                    wf.stop("the second found it")
                except WorkflowError:
                    return -1
            return i

        return await wf.parallel([0, 1, 2], item)

    for result in await both_engines(parallel, temporal_address, tmp_path):
        assert (result.outcome, result.reason) == ("stopped", "the second found it"), result.reason
