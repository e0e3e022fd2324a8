"""Spend carries over attempts: usage.json, `RunResult.usage`, `awf logs` and `awf ls` show the
run's totals and each attempt's; a run budget counts what earlier attempts spent (and is kept
for a continue); a turn mail started counts in the stage open and in the budgets.

The agents are the kit's counting shell agents, each run of which reports a fixed usage (as a
CLI's last line would): `Billed` adds it, the engine between them is the real one.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

import agentswf
from agentswf import Budget, Usage, workflow
from agentswf.cli.logs import print_run
from agentswf.harnesses.base import Attempt, AttemptResult
from agentswf.harnesses.runtime import Runtime, harness_for
from agentswf.harnesses.shell import ShellHarness

from .kit import attempts, counts, marks, run_three, stages, write_flows

pytestmark = pytest.mark.anyio

PER_RUN = Usage(input_tokens=100, output_tokens=50, cost_usd=0.25)


class Billed(ShellHarness):
    """A shell agent whose every run reports `PER_RUN`."""

    async def run(self, attempt: Attempt) -> AttemptResult:
        ran = await super().run(attempt)
        return AttemptResult(ran.ending, output=ran.output, usage=PER_RUN)


def billed(key: str, runtime: Runtime) -> Billed:
    shell = harness_for(runtime)
    assert isinstance(shell, ShellHarness)
    return Billed(shell.command)


def _failed_then_continued(tmp_path: Path, **continued: Any) -> Any:
    async def go() -> tuple[agentswf.RunResult, agentswf.RunResult]:
        write_flows(tmp_path)
        (marks(tmp_path) / "fail").touch()
        failed = await run_three(tmp_path, harnesses=billed, budget=Budget(turns=4))
        assert failed.outcome == "failed", failed.reason
        (marks(tmp_path) / "fail").unlink()
        done = await run_three(tmp_path, harnesses=billed, continue_from=failed.run_id, **continued)
        return failed, done

    return go()


async def test_a_continued_runs_spend_is_the_runs_across_attempts_and_each_attempts_own(tmp_path):
    # attempt 1: greeter, planner, builder's id'd turn (3 runs); attempt 2: builder's second, checker (2)
    failed, done = await _failed_then_continued(tmp_path, budget=Budget(turns=10))
    assert done.outcome == "completed", done.reason
    assert counts(tmp_path) == {"greeter": 1, "planner": 1, "builder": 2, "checker": 1}
    assert failed.usage.total == Usage(input_tokens=300, output_tokens=150, cost_usd=0.75)
    spent = done.usage
    assert spent.total == Usage(input_tokens=500, output_tokens=250, cost_usd=1.25)
    assert spent.turns == 5 and spent.attempt == 2
    assert [(a.n, a.turns, a.total.cost_usd if a.total else None) for a in spent.attempts] == [(1, 3, 0.75), (2, 2, 0.5)]
    assert spent.agents["builder"].cost_usd == 0.5  # one run in each attempt
    assert [(turn.agent, turn.attempt) for turn in spent.by_turn][-2:] == [("builder", 2), ("checker", 2)]
    on_disk = json.loads((done.run_dir / "usage.json").read_text())
    assert on_disk["total"]["cost_usd"] == 1.25 and [a["n"] for a in on_disk["attempts"]] == [1, 2]
    out = io.StringIO()
    print_run(done.run_dir, out)
    assert "spent: 500 in, 250 out, $1.2500 over 5 turns" in out.getvalue()
    assert "by attempt:\n    1: 300 in, 150 out, $0.7500 over 3 turns\n    2: 200 in, 100 out, $0.5000 over 2 turns" in out.getvalue()
    listed = subprocess.run(
        [sys.executable, "-m", "agentswf", "ls", "--run-root", "runs"], cwd=tmp_path, capture_output=True, text=True, timeout=30
    )
    [header, row] = listed.stdout.split("\n\n")[0].splitlines()  # the runs; then any kept panes, of any run here
    assert header.split() == ["RUN", "WORKFLOW", "STATE", "ATTEMPTS", "AGE", "COST"]
    assert row.split()[2:4] == ["completed", "2"] and row.split()[-1] == "$1.2500"


async def test_a_run_budget_counts_what_earlier_attempts_spent_and_a_continue_keeps_it(tmp_path):
    _, done = await _failed_then_continued(tmp_path)  # the budget of 4 turns, from attempt 1's record
    assert done.outcome == "failed"
    assert "4 of 4 turns given" in done.reason  # attempt 1's three and the builder's second: the checker's is refused
    assert counts(tmp_path)["checker"] == 0
    assert attempts(done.run_dir)[1]["budget"] == {"turns": 4}


async def test_a_budget_given_to_a_continue_wins_over_the_runs(tmp_path):
    _, done = await _failed_then_continued(tmp_path, budget=Budget(turns=5))
    assert done.outcome == "completed", done.reason
    assert attempts(done.run_dir)[1]["budget"] == {"turns": 5}


MAIL_SECONDS = 10  # for b's message turn to run on a loaded machine
SENDER = 'shell:"$WFA" send b "news" >/dev/null; "$WFA" result "$WFA_CALL_ID" sent'
RECEIVER = 'shell:grep -q "takes no result" && exit 0; "$WFA" result "$WFA_CALL_ID" worked'


@workflow(name="mail", description="In stage talk, a tells b; b's message turn runs before its own.")
async def mail(wf) -> dict:  # type: ignore[no-untyped-def]
    a = await wf.agents.open("a", runtime=SENDER)
    b = await wf.agents.open("b", runtime=RECEIVER)
    await wf.route(a, b, purpose="News for b")

    async def talk() -> list[str]:
        told = await a.run("Tell b.")
        with anyio.fail_after(MAIL_SECONDS):  # until b's turn mail started has ended and counts
            while wf.spent().run.turns < 2:
                await anyio.sleep(0.01)
        worked = await b.run("Work.")
        return [told.outcome.kind, worked.outcome.kind if worked.answered else str(worked.outcome.reason)]

    ended = await wf.stage("talk", talk)
    spent = wf.spent()
    return {"ended": ended, "run": msgspec.to_builtins(spent.run), "talk": msgspec.to_builtins(spent.stages["talk"])}


async def test_a_turn_mail_started_counts_in_the_stage_open_and_in_the_budgets(tmp_path):
    result = await agentswf.run(mail, run_root=tmp_path / "runs", cwd=tmp_path, harnesses=billed)
    assert result.outcome == "completed", result.reason
    turns = [json.loads(line) for line in (result.run_dir / "turns.jsonl").read_text().splitlines()]
    assert sorted((t["agent"], t["started_by"]) for t in turns) == [("a", "workflow"), ("b", "message"), ("b", "workflow")]
    assert result.value["ended"] == ["answered", "answered"]
    for scope in ("run", "talk"):
        assert (result.value[scope]["turns"], result.value[scope]["cost_usd"]) == (3, 0.75), scope
    talk = stages(result.run_dir)["talk"]
    assert (talk["turns"], talk["usage"]["cost_usd"]) == (3, 0.75)  # the stage's record counts it too


async def test_a_budget_a_turn_mail_started_filled_stops_the_next_turn(tmp_path):
    result = await agentswf.run(mail, run_root=tmp_path / "runs", cwd=tmp_path, harnesses=billed, budget=Budget(turns=2))
    assert result.outcome == "completed", result.reason
    assert result.value["ended"] == ["answered", "the run's budget: 2 of 2 turns given"]
