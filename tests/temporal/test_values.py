"""A run's value on Temporal is the local engine's: an object's keys in the order the workflow made
them (Temporal's own JSON converter sorts them), a value a schema made, nested as it was."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

from agentswf import Workflow, workflow
from agentswf.errors import HarnessError
from agentswf.testing import answer, run_workflow
from agentswf.testing.temporal import test_server_binary

try:
    test_server_binary()
except HarnessError as missing:
    pytest.skip(f"no Temporal test server: {missing}", allow_module_level=True)


class Finding(msgspec.Struct):
    where: str
    severity: int
    advice: str


@workflow(name="ordered", description="A value whose objects' keys are not in sorted order.")
async def ordered(wf: Workflow) -> dict[str, object]:
    agent = await wf.agents.open("looker", runtime="claude")
    found = (await agent.run("Find one thing.", schema=Finding)).value
    return {"zebra": 1, "apple": {"y": 2, "b": [3, {"z": 4, "a": 5}]}, "found": found}


async def test_a_values_keys_keep_their_order_on_temporal_as_locally(tmp_path: Path) -> None:
    said = Finding("src/app.py", 2, "close the file")
    local = await run_workflow(ordered, agents={"looker": answer(said)}, run_root=tmp_path / "local")
    remote = await run_workflow(ordered, agents={"looker": answer(said)}, engine="temporal", run_root=tmp_path / "t")
    assert msgspec.json.encode(remote.value) == msgspec.json.encode(local.value)
    assert list(remote.value) == ["zebra", "apple", "found"]
    assert list(remote.value["found"]) == ["where", "severity", "advice"]
