"""`agentswf.run(definition, continue_from=ContinueFrom(run, agent, turn))`: a run forked at an agent's
turn, as `awf continue RUN --from KEY:N` forks it -- a new run whose turns before that one are
played from the record, the rest run for real, its spend only theirs, its record naming its origin."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import agentswf
from agentswf import ContinueFrom, DefinitionError, ReplayDiverged, Workflow, workflow
from agentswf.replay.played import NOTHING_SPENT
from agentswf.testing import read_record

from .test_fork import Writer, three  # a writer agent reporting sessions and spend, and its three turns

Started = list[tuple[int, str | None, str | None]]  # each real attempt's turn, the session it resumed, its model


# A real process per turn: it logs the word in ./word when it runs and answers with it.
SHELL = 'shell:w=$(cat word); echo "$w" >> ran; "$WFA" result "$WFA_CALL_ID" "$w"'


@workflow(name="three-shell-parts", description="A shell agent's three turns.")
async def three_shell(wf: Workflow) -> list[str]:
    writer = await wf.agents.open("writer", runtime=SHELL)
    return [(await writer.run(f"Write part {n}.")).value for n in (1, 2, 3)]


async def test_run_continue_from_a_turn_runs_only_that_turn_and_the_next_as_a_new_runs_spend(tmp_path: Path) -> None:
    first: Started = []
    recorded = await agentswf.run(three, run_root=tmp_path, harnesses=lambda key, runtime: Writer("old", first))
    assert recorded.value == ["old 1", "old 2", "old 3"] and recorded.usage.total.cost_usd == pytest.approx(0.75)
    again: Started = []
    forked = await agentswf.run(
        three, continue_from=ContinueFrom(recorded.run_dir, "writer", 2, settings={"writer": {"model": "opus"}}),
        harnesses=lambda key, runtime: Writer("new", again),
    )  # fmt: skip
    assert forked.value == ["old 1", "new 2", "new 3"]
    assert again == [(2, "session-1", "opus"), (3, "session-2", "opus")]  # turn 2 resumes turn 1's session on record
    spent = forked.usage  # the new run's own: its played turn 1 asked no model
    assert (spent.total.input_tokens, spent.total.cost_usd, spent.unpriced_turns) == (200, pytest.approx(0.5), 0)
    assert [turn.usage.cost_usd for turn in spent.by_turn if turn.usage] == [0.0, 0.25, 0.25]
    assert forked.run_id != recorded.run_id and forked.run_dir.parent == recorded.run_dir.parent  # beside the forked run
    record = read_record(forked)
    assert record.run["forked_from"] == {"run": str(recorded.run_dir), "run_id": recorded.run_id, "agent": "writer", "turn": 2}
    assert [turn["model"] for turn in record.turns] == [None, "opus", "opus"]  # turn 1 played: as it ran on record


async def test_a_shell_agent_forked_at_turn_2_runs_turns_2_and_3_only(tmp_path: Path) -> None:
    (tmp_path / "word").write_text("old\n")
    recorded = await agentswf.run(three_shell, run_root=tmp_path / "runs", cwd=tmp_path)
    assert recorded.value == ["old", "old", "old"], recorded.reason
    (tmp_path / "word").write_text("new\n")
    forked = await agentswf.run(three_shell, continue_from=ContinueFrom(recorded.run_id, "writer", 2), run_root=tmp_path / "runs",
                                cwd=tmp_path)  # fmt: skip
    assert forked.value == ["old", "new", "new"], forked.reason
    assert (tmp_path / "ran").read_text().split() == ["old", "old", "old", "new", "new"]  # two processes, not three
    played, *ran = forked.usage.by_turn
    assert (played.usage, [turn.usage for turn in ran]) == (NOTHING_SPENT, [None, None])  # shell agents report none
    assert forked.usage.unpriced_turns == 2  # the two turns it ran; the played one cost nothing
    lineage = subprocess.run([sys.executable, "-m", "agentswf", "ls", "--run-root", str(tmp_path / "runs")], capture_output=True,
                             text=True, cwd=tmp_path, timeout=60)  # fmt: skip
    assert f"{forked.run_id} is a fork of {recorded.run_id} at writer turn 2" in lineage.stdout, lineage.stderr


async def test_a_fork_whose_workflow_changed_before_its_turn_raises_the_divergence(tmp_path: Path) -> None:
    recorded = await agentswf.run(three, run_root=tmp_path, harnesses=lambda key, runtime: Writer("old", []))
    prompts = (recorded.run_dir / "calls").glob("*/call.json")
    for call in prompts:  # the record as another version of the workflow left it
        call.write_text(call.read_text().replace("Write part 1.", "Write section 1."))
    started: Started = []
    with pytest.raises(ReplayDiverged) as raised:
        await agentswf.run(three, continue_from=ContinueFrom(recorded.run_dir, "writer", 3),
                           harnesses=lambda key, runtime: Writer("new", started))  # fmt: skip
    assert (raised.value.agent, raised.value.turn, raised.value.field) == ("writer", "turn 1", "prompt")
    assert started == []  # nothing ran for real
    forked = await agentswf.run(three, continue_from=ContinueFrom(recorded.run_dir, "writer", 3, strict=False),
                                harnesses=lambda key, runtime: Writer("new", started))  # fmt: skip
    assert forked.value == ["old 1", "old 2", "new 3"]


@pytest.mark.parametrize(
    ("fork", "error"),
    [
        (lambda run: ContinueFrom(run, "writer", 4), r"has no turn 4 of agent writer \(its turns: 1, 2, 3\)"),
        (lambda run: ContinueFrom(run, "nobody", 1), "has no turn 1 of agent nobody"),
        (lambda run: ContinueFrom("no-such-run", "writer", 1), "continue_from no-such-run: no record of that run under"),
        (lambda run: ContinueFrom(run, "writer", 0), "continue_from's turn is agent writer's turn's number, 1 for its first"),
        (lambda run: ContinueFrom(run, "writer", 2, settings={"writer": {"temperature": "1"}}), "give model= and/or effort="),
    ],
)  # fmt: skip
async def test_a_fork_the_record_cant_give_is_refused_before_anything_runs(tmp_path: Path, fork, error: str) -> None:
    recorded = await agentswf.run(three, run_root=tmp_path, harnesses=lambda key, runtime: Writer("old", []))
    started: Started = []
    with pytest.raises(DefinitionError, match=error):
        await agentswf.run(three, continue_from=fork(recorded.run_dir), run_root=tmp_path,
                           harnesses=lambda key, runtime: Writer("new", started))  # fmt: skip
    assert started == [] and len(list((tmp_path / "three").iterdir())) == 1  # no new run recorded


async def test_a_fork_of_another_workflows_run_is_refused(tmp_path: Path) -> None:
    recorded = await agentswf.run(three, run_root=tmp_path, harnesses=lambda key, runtime: Writer("old", []))
    with pytest.raises(DefinitionError, match="is a record of workflow 'three', not of 'three-shell-parts'"):
        await agentswf.run(three_shell, continue_from=ContinueFrom(recorded.run_dir, "writer", 2))
