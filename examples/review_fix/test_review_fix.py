"""The review-fix example: its logic with scripted agents, and its real shell agents end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import agentswf
from agentswf.testing import ScriptedTurn, answer, run_workflow

HERE = Path(__file__).resolve().parent
review_fix = agentswf.load_workflow(HERE / "review_fix.py")
module = sys.modules[review_fix.fn.__module__]
Verdict, FixReport = module.Verdict, module.FixReport


async def test_a_requested_change_is_fixed_and_then_approved(tmp_path: Path) -> None:
    def review(turn: ScriptedTurn) -> Any:
        return Verdict("approve") if turn.n == 2 else Verdict("changes", "calc.py: add is wrong")

    def fix(turn: ScriptedTurn) -> Any:
        assert "calc.py: add is wrong" in turn.prompt
        return FixReport(files=["calc.py"], summary="add adds")

    run = await run_workflow(
        review_fix, agents={"reviewer": answer(review), "fixer": answer(fix)}, run_root=tmp_path
    )
    assert run.value == {"verdict": "approve", "rounds": 2, "fixed": ["calc.py"]}
    assert [turn["agent"] for turn in run.turns] == ["reviewer", "fixer", "reviewer"]


async def test_no_approval_within_the_rounds_stops_the_run(tmp_path: Path) -> None:
    run = await run_workflow(
        review_fix,
        agents={
            "reviewer": answer(Verdict("changes", "still wrong")),
            "fixer": answer(FixReport(files=[], summary="tried")),
        },
        args={"rounds": 2},
        run_root=tmp_path,
    )
    assert run.outcome == "stopped"
    assert run.reason == "no approval after 2 rounds"


async def test_the_real_shell_agents_find_fix_and_approve(tmp_path: Path) -> None:
    result = await agentswf.run(review_fix, args={"rounds": 3}, run_root=tmp_path)
    assert result.outcome == "completed", result.reason
    assert result.value == {"verdict": "approve", "rounds": 2, "fixed": ["calc.py"]}


def test_awf_run_prints_the_value_and_exits_0(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentswf", "run", str(HERE / "review_fix.py"), "--run-root", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["outcome"] == "completed"
    assert record["value"]["fixed"] == ["calc.py"]
    logs = subprocess.run(
        [sys.executable, "-m", "agentswf", "logs", record["run_id"], "--run-root", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert logs.returncode == 0, logs.stderr
    assert "reviewer turn 1" in logs.stdout and "fixer turn 1" in logs.stdout


def test_awf_run_exits_3_when_the_workflow_stops(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentswf", "run", str(HERE / "review_fix.py"), "--run-root", str(tmp_path), "--", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert "no approval after 1 rounds" in done.stderr
