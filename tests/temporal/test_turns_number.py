"""An agent's turn number on Temporal: each turn runs in an agent its worker opens afresh, yet the
agent sees the turn's number as the workflow counts it (`WFA_TURN`, a scripted agent's `turn.n`),
as it does locally."""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

import agentswf
from agentswf import Workflow, workflow
from agentswf.errors import HarnessError
from agentswf.temporal import TemporalEngine
from agentswf.testing import ScriptedTurn, answer, run_workflow
from agentswf.testing.temporal import test_server_binary

TURNS = 3
SAYS_ITS_TURN = '#!/bin/sh\ncat >/dev/null\nprintf %s "$WFA_TURN" | "$WFA" result "$WFA_CALL_ID"\n'


@workflow(name="counter", description="An agent says its turn's number, three turns running.")
async def counter(wf: Workflow, runtime: str) -> list[str]:
    agent = await wf.agents.open("counter", runtime=runtime)
    return [(await agent.run("Which turn is this?")).value for _ in range(TURNS)]


async def test_wfa_turn_is_the_agents_turn_number_on_temporal(temporal_address: str, tmp_path: Path) -> None:
    agent = tmp_path / "agent.sh"
    agent.write_text(SAYS_ITS_TURN)
    agent.chmod(0o700)
    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "worker")
    result = await agentswf.run(counter, args=f"shell:{agent}", run_root=tmp_path / "runs", engine=engine)
    assert result.outcome == "completed", result.reason
    assert result.value == ["1", "2", "3"]


async def says_its_turn(turn: ScriptedTurn) -> str:
    return str(turn.n)


async def test_a_scripted_agents_turn_n_is_its_turn_number_on_temporal(tmp_path: Path) -> None:
    try:
        test_server_binary()
    except HarnessError as missing:
        pytest.skip(f"no Temporal test server: {missing}")
    run = await run_workflow(counter, agents={"counter": [answer(says_its_turn)] * TURNS}, args="claude",
                             engine="temporal", run_root=tmp_path / "runs")
    assert run.value == ["1", "2", "3"]
