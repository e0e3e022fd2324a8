"""The tools guide's two tests, as they are written there, on the API.md's dead_code workflow."""

from __future__ import annotations

from unittest import mock

import pytest

from agentswf.testing import ToolFailed, ToolRefused, ToolResult, answer, run_workflow

from .kit import Finding, dead_code

pytestmark = pytest.mark.anyio


async def test_each_finding_the_agent_records_reaches_the_workflow_and_it_can_read_them_back(tmp_path):
    async def reviewer(turn):
        assert await turn.tool("add_finding", {"file": "src/a.ts", "line": 12, "problem": "unused export"}) == (
            ToolResult(output="Recorded; 1 so far.")
        )
        assert await turn.tool("list_findings") == ToolResult(output="src/a.ts:12  unused export")
        return "One finding."

    run = await run_workflow(dead_code, agents={"reviewer": answer(reviewer)}, run_root=tmp_path)
    assert run.value == {
        "findings": [Finding(file="src/a.ts", line=12, problem="unused export")],
        "ended": "answered",
    }


async def test_input_that_doesnt_fit_is_refused_before_the_handler_runs_a_throw_fails_only_the_call(tmp_path):
    seen: list = []

    async def reviewer(turn):
        seen.append(await turn.tool("add_finding", {"file": "src/a.ts", "line": 0, "problem": "x"}))
        await turn.tool("add_finding", {"file": "src/a.ts", "line": 3, "problem": "unused"})
        seen.append(await turn.tool("add_finding", {"file": "src/a.ts", "line": 3, "problem": "again"}))
        return "Done."

    run = await run_workflow(dead_code, agents={"reviewer": answer(reviewer)}, run_root=tmp_path)
    assert seen == [
        ToolRefused(code="invalid-input", error=mock.ANY),
        ToolFailed(outcome="failed", error="src/a.ts:3 is already recorded"),
    ]
    assert "line" in seen[0].error
    assert seen[0].kind == "refused" and seen[1].kind == "failed"
    assert len(run.value["findings"]) == 1
    assert run.value["ended"] == "answered"
