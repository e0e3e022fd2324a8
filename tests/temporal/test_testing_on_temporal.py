"""`run_workflow(..., engine="temporal")` (agentswf/testing/temporal.py): a workflow with scripted
agents runs on Temporal's time-skipping test server as it runs locally, its timers skipped, and its
history replayed: code that decides otherwise on replay fails the test. On asyncio and on trio
(the run itself goes on asyncio, Temporal's client's loop)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

from agentswf import Workflow, tool, workflow
from agentswf.errors import HarnessError, TestScriptError
from agentswf.temporal.turns import turns_ran
from agentswf.testing import ScriptedTurn, answer, respond, run_workflow
from agentswf.testing.temporal import NotDeterministic, test_server_binary
from tests.docs.test_docs import run_page

try:
    test_server_binary()
except HarnessError as missing:
    pytest.skip(f"no Temporal test server: {missing}", allow_module_level=True)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "testing.md"
OURS = "<!-- docs-test: skip: needs agentswf[temporal]; tests/temporal/test_testing_on_temporal.py runs it -->"
NIGHT_SECONDS = 8 * 3600
WALL_SECONDS = 60.0  # far below the night the workflow waits: the test server skipped it


@workflow(name="nightly", description="A look, a night's wait on a timer, and a check through a tool.")
async def nightly(wf: Workflow, repo: str) -> dict[str, object]:
    checked: list[str] = []

    def check(what: str) -> str:
        """Check a thing."""
        checked.append(what)
        return f"{what}: fine"

    agent = await wf.agents.open("watcher", runtime="claude", tools={"check": tool(check)})
    first = await agent.run(f"Look at {repo}.", timeout="30m")
    await asyncio.sleep(NIGHT_SECONDS)
    second = await agent.run("Check the nightly build.", timeout="30m")
    return {"first": first.value, "second": second.value, "checked": checked}


async def checker(turn: ScriptedTurn) -> str:
    said = await turn.tool("check", {"what": "build"})
    return f"checked, the tool said {said.output}"  # type: ignore[union-attr]


WATCHER = [answer("looked"), answer(checker)]  # one entry a turn


async def test_a_workflow_runs_on_the_test_server_as_locally_its_night_skipped(tmp_path: Path) -> None:
    started = time.monotonic()
    run = await run_workflow(nightly, agents={"watcher": WATCHER}, args="the repo", engine="temporal",
                             run_root=tmp_path / "runs", timeout="1d")
    assert time.monotonic() - started < WALL_SECONDS
    expected = {"first": "looked", "second": "checked, the tool said build: fine", "checked": ["build"]}
    assert run.value == expected
    assert (run.run_dir / "temporal.json").exists()  # it ran on Temporal, its record written as a local run's
    assert [(turn["agent"], turn["n"]) for turn in run.turns] == [("watcher", 1), ("watcher", 2)]
    assert [call["tool"] for call in run.record.tools] == ["check"]
    assert turns_ran(tmp_path / "runs" / ".turns", "nightly", run.run_id) == ["watcher-1-attempt1", "watcher-2-attempt1"]


async def test_code_that_decides_otherwise_on_replay_fails_the_test(tmp_path: Path) -> None:
    executions: list[int] = []

    @workflow(name="fickle", description="Gives one more turn each time its code runs.")
    async def fickle(wf: Workflow) -> int:
        executions.append(1)
        agent = await wf.agents.open("one", runtime="claude")
        for _ in range(len(executions)):
            await agent.run("Go.", timeout="1m")
        return len(executions)

    with pytest.raises(NotDeterministic, match="fickle's code decided otherwise when Temporal replayed its history"):
        await run_workflow(fickle, agents={"one": answer("ok")}, engine="temporal", run_root=tmp_path / "runs")


async def test_the_runs_timeout_counts_the_skipped_time_too(tmp_path: Path) -> None:
    run = await run_workflow(nightly, agents={"watcher": WATCHER[:1]}, args="the repo", engine="temporal",
                             run_root=tmp_path / "runs", timeout="2h")  # it ends during the night
    assert (run.outcome, run.reason) == ("timed-out", "the run's timeout of 7200s passed")


async def test_scripts_are_as_strict_on_temporal(tmp_path: Path) -> None:
    with pytest.raises(TestScriptError, match="watcher"):  # a list with an entry left over
        await run_workflow(nightly, agents={"watcher": [*WATCHER, answer("more")]},
                           args="the repo", engine="temporal", run_root=tmp_path / "runs", timeout="1d")
    with pytest.raises(TestScriptError, match="takes no participants, approvals or replay yet"):
        await run_workflow(nightly, agents={}, participants={"lead": respond("Yes.")}, engine="temporal")


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_testing_pages_temporal_section_runs(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = PAGE.read_text()
    assert OURS in text
    page = tmp_path / "testing.md"
    page.write_text(text[text.index("\n## On Temporal"):].replace(OURS, ""))  # its own blocks, no longer skipped
    where = tmp_path / "where"
    where.mkdir()
    run_page(page, backend, where, monkeypatch)
