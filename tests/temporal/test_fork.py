"""`agent.fork` on Temporal refuses, in workflow code and before any activity, what the local
engine refuses: a harness with no session to copy, an agent with no turn yet, a key in use.
(The copy itself, on a worker, is in test_real_clis.py: it needs the real CLIs.)"""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

import agentswf
from agentswf import Runtime, workflow
from agentswf.temporal import TemporalEngine


async def test_a_fork_is_refused_as_locally(temporal_address: str, tmp_path: Path) -> None:
    @workflow(name="refused-forks", description="Forks the engine refuses.")
    async def refused(wf):  # type: ignore[no-untyped-def]
        said = []
        shell = await wf.agents.open("shell", runtime="shell:true")
        fresh = await wf.agents.open("fresh", runtime=Runtime(harness="claude", command=("claude",)))
        for parent, key in ((shell, "copy"), (fresh, "copy"), (fresh, "shell")):
            try:
                await parent.fork(key)
            except agentswf.errors.DefinitionError as error:
                said.append(str(error))
        return said

    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
    result = await agentswf.run(refused, run_root=tmp_path / "runs", engine=engine)
    assert result.outcome == "completed", result.reason
    assert result.value == [
        "agent shell can't be forked: a shell agent has no session to copy: it is run anew for each attempt",
        "agent fresh: an agent cannot be forked before its first turn",
        "agent shell is already open, not as this fork of fresh",
    ]
