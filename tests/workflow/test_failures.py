"""A workflow that raises: its ending names the line it raised from and keeps its whole traceback."""

from __future__ import annotations

import anyio
import msgspec
import pytest

import agentswf
from agentswf import DefinitionError, workflow

pytestmark = pytest.mark.anyio

HERE = __file__


def _lookup(table: dict) -> int:
    return table["b"]  # the line a failure points at


LOOKUP_LINE = _lookup.__code__.co_firstlineno + 1


@workflow(name="raises", description="Raises a KeyError.")
async def raises(wf):
    return _lookup({})


@workflow(name="grouped", description="Raises inside its own task group.")
async def grouped(wf):
    async with anyio.create_task_group() as group:
        group.start_soon(anyio.sleep, 5)
        group.start_soon(_lookup, {})


@workflow(name="fine", description="Completes.")
async def fine(wf):
    return 1


def _output(result: agentswf.RunResult) -> dict:
    return msgspec.json.decode((result.run_dir / "output.json").read_bytes())


@pytest.mark.parametrize("definition", [raises, grouped])
async def test_where_and_traceback_are_in_the_result_and_the_record(tmp_path, definition):
    result = await agentswf.run(definition, run_root=tmp_path)
    assert result.outcome == "failed" and "KeyError: 'b'" in result.reason
    assert result.where == f"{HERE}:{LOOKUP_LINE}, in _lookup"
    assert f'File "{HERE}", line {LOOKUP_LINE}, in _lookup' in result.traceback
    output = _output(result)
    assert (output["where"], output["traceback"]) == (result.where, result.traceback)


async def test_a_run_that_did_not_raise_has_no_traceback(tmp_path):
    result = await agentswf.run(fine, run_root=tmp_path)
    assert (result.where, result.traceback) == (None, None)
    assert _output(result)["traceback"] is None


async def test_replay_of_another_workflows_run_is_refused(tmp_path):
    other = await agentswf.run(raises, run_root=tmp_path)
    with pytest.raises(DefinitionError, match="a run of workflow 'raises', not of 'fine'"):
        await agentswf.run(fine, run_root=tmp_path, replay=other.run_dir)
    assert not (tmp_path / "fine").exists()
    same = await agentswf.run(raises, run_root=tmp_path, replay=other.run_dir)
    assert same.outcome == "failed"
