"""The triage example: its tools through scripted turns, and the real shell agent end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import agentswf
from agentswf.testing import (
    RunRecord,
    ScriptedTurn,
    ToolFailed,
    ToolRefused,
    ToolResult,
    answer,
    run_workflow,
)

HERE = Path(__file__).resolve().parent
triage = agentswf.load_workflow(HERE / "triage.py")


async def test_each_tool_call_reaches_the_workflow_as_it_happens(tmp_path: Path) -> None:
    seen: list[ToolResult | ToolFailed | ToolRefused] = []

    async def triager(turn: ScriptedTurn) -> str:
        items = await turn.tool("list_items")
        seen.append(items)
        seen.append(await turn.tool("label_item", {"id": "b3", "labels": ["cosmetic"]}))
        seen.append(await turn.tool("set_priority", {"id": "b3", "priority": "p3"}))
        seen.append(await turn.tool("set_priority", {"id": "b9", "priority": "p3"}))
        seen.append(await turn.tool("label_item", {"id": "b3", "labels": []}))
        return "One triaged."

    run = await run_workflow(triage, agents={"triager": answer(triager)}, run_root=tmp_path)
    assert isinstance(seen[0], ToolResult) and [item["id"] for item in seen[0].output] == ["b1", "b2", "b3", "b4"]
    assert seen[1] == ToolResult(output="b3 labelled cosmetic")
    assert seen[2] == ToolResult(output="b3 is p3")
    assert seen[3] == ToolFailed(outcome="failed", error="there is no item b9; list_items has the ids")
    assert isinstance(seen[4], ToolRefused) and seen[4].code == "invalid-input" and "labels" in seen[4].error
    assert run.value["labels"] == {"b3": ["cosmetic"]}
    assert run.value["untriaged"] == ["b1", "b2", "b4"]


async def test_the_prompt_teaches_flags_json_and_the_name_alone(tmp_path: Path) -> None:
    prompts: list[str] = []

    def triager(turn: ScriptedTurn) -> str:
        prompts.append(turn.prompt)
        return "ok"

    await run_workflow(triage, agents={"triager": answer(triager)}, run_root=tmp_path)
    prompt = prompts[0]
    assert "wfa tool set_priority --id <text> --priority <one of: p1, p2, p3>" in prompt
    assert "wfa tool list_items\n" in prompt
    assert "wfa tool label_item <<'WF_JSON'\n<json>\nWF_JSON" in prompt
    assert '"labels":{"type":"array"' in prompt


async def test_the_real_shell_agent_triages_everything(tmp_path: Path, run_record: RunRecord) -> None:
    result = await agentswf.run(triage, run_root=tmp_path)
    assert result.outcome == "completed", result.reason
    assert result.value["untriaged"] == []
    assert result.value["priorities"] == {"b1": "p1", "b2": "p2", "b3": "p3", "b4": "p1"}
    assert result.value["labels"]["b2"] == ["bug", "ops"]
    calls = run_record(result).tools
    assert [call["tool"] for call in calls[:3]] == ["list_items", "label_item", "set_priority"]


async def test_a_replay_serves_every_result_from_the_record_and_runs_no_handler(tmp_path: Path) -> None:
    first = await agentswf.run(triage, run_root=tmp_path)
    replayed = await agentswf.run(triage, run_root=tmp_path, replay=first.run_dir)
    assert replayed.outcome == "completed", replayed.reason
    assert replayed.value["summary"] == "Triaged 4 items."  # the agent read the recorded results
    assert replayed.value["labels"] == {} and replayed.value["priorities"] == {}  # no handler ran


def test_awf_run_and_awf_logs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentswf", "run", str(HERE / "triage.py"), "--run-root", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    logs = subprocess.run(
        [sys.executable, "-m", "agentswf", "logs", record["run_id"], "--run-root", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "tool label_item" in logs.stdout and "-> result" in logs.stdout
