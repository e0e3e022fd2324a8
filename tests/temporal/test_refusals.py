"""What the Temporal engine doesn't do is refused as the run (or the agent) starts, naming the
feature and the engine, never done partly: docs/guide/temporal.md's table says which."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from uuid import uuid4

import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

import agentswf
from agentswf import Runtime, workflow
from agentswf.sandbox.spec import SandboxSpec
from agentswf.temporal import TemporalEngine
from agentswf.temporal.flow import TemporalRun


@workflow(name="nothing", description="Does nothing.")
async def nothing(wf):  # type: ignore[no-untyped-def]
    return None


def engine(address: str, tmp_path: Path) -> TemporalEngine:
    return TemporalEngine(address=address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")


async def test_a_workflow_with_policies_is_refused_before_it_starts(run_key_file: Path, tmp_path: Path) -> None:
    @workflow(name="guarded", description="A policy sees every tool call.", policies=[lambda call: None])
    async def guarded(wf):  # type: ignore[no-untyped-def]
        return None

    nowhere = TemporalEngine(address="127.0.0.1:9", task_queue="q")  # never reached: refused first
    with pytest.raises(agentswf.DefinitionError) as refused:
        await agentswf.run(guarded, run_root=tmp_path / "runs", engine=nowhere)
    assert str(refused.value) == "not on TemporalEngine yet: policies (workflow guarded's policies=); run locally for them"
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("given", "named"), [
    ({"replay": "runs/nothing/0001"}, "replay (--replay)"),
    ({"trace": True}, "trace (--trace)"),
    ({"from_stage": "later", "values": {}}, "from_stage (--from-stage), values (--values)"),
])
async def test_a_local_only_option_is_refused_before_the_run_starts(
    run_key_file: Path, tmp_path: Path, given: dict[str, object], named: str
) -> None:
    nowhere = TemporalEngine(address="127.0.0.1:9", task_queue="q")
    with pytest.raises(agentswf.DefinitionError) as refused:
        await agentswf.run(nothing, run_root=tmp_path / "runs", engine=nowhere, **given)  # type: ignore[arg-type]
    assert str(refused.value) == f"not on TemporalEngine yet: {named}; run locally for them"


async def test_an_agent_in_a_pane_is_refused_as_it_opens(temporal_address: str, tmp_path: Path) -> None:
    @workflow(name="paned", description="An agent in a pane.")
    async def paned(wf):  # type: ignore[no-untyped-def]
        try:
            await wf.agents.open("seen", runtime=Runtime(harness="claude", placement="pane"))
        except agentswf.WorkflowError as error:
            return str(error)
        return "opened"

    result = await agentswf.run(paned, run_root=tmp_path / "runs", engine=engine(temporal_address, tmp_path))
    assert result.value == ("agent seen: an agent in a pane (placement='pane') is not on the Temporal engine yet "
                            "(docs/guide/temporal.md says what is)"), result.reason


def test_a_sandboxed_agent_is_forked_where_its_clis_session_is_known_as_locally(tmp_path: Path) -> None:
    run = TemporalRun.__new__(TemporalRun)  # the rule needs none of a run's state (made only in workflow code)
    box = SandboxSpec(cwd=str(tmp_path), write=(".",))
    for harness in ("claude", "codex", "pi"):  # tests/temporal/test_sandboxed_forks.py forks them for real
        run.check_fork(SimpleNamespace(key="boxed", sandbox=box, spec=SimpleNamespace(runtime=Runtime(harness=harness))))  # type: ignore[arg-type]
    parent = SimpleNamespace(key="boxed", sandbox=box, spec=SimpleNamespace(runtime=Runtime(harness="opencode")))
    with pytest.raises(agentswf.DefinitionError) as refused:
        run.check_fork(parent)  # type: ignore[arg-type]
    assert str(refused.value).startswith("agent boxed can't be forked in its sandbox: where opencode keeps a session")
