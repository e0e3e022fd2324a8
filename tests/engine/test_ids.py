"""Ids a run gives out are never the same twice. At 4 random bytes, one 10,000-agent run in
about 90 gave two turns one id, and the second answer was refused `internal-error` (its
`calls/<id>/result.json` was the first turn's). A run's own id, drawn again when another run
of its workflow has it, gives every run a record of its own."""

from __future__ import annotations

import re

import pytest

from agentswf import tool, workflow
from agentswf.engine.ids import ID_BYTES, new_id
from agentswf.engine.record import layout as records
from agentswf.testing import answer, run_workflow

pytestmark = pytest.mark.anyio

A_BIG_RUNS_IDS = 200_000
"""A run of 10,000 agents × 10 tool calls gives half as many; at 4 bytes an id, this many
repeat one with probability 99 %."""


def test_a_big_runs_worth_of_ids_repeats_none() -> None:
    assert len({new_id() for _ in range(A_BIG_RUNS_IDS)}) == A_BIG_RUNS_IDS


@tool(description="Do nothing.")
async def noop(n: int) -> int:
    return n


@workflow(name="ids", description="Two turns and a tool call.")
async def two_turns(wf, args: dict) -> list[str]:
    agent = await wf.agents.open("a", runtime="codex", tools={"noop": noop})
    return [(await agent.run("Go.", nudge=False)).call_id for _ in range(2)]


async def test_turns_and_tool_calls_get_whole_ids(tmp_path) -> None:
    async def play(turn) -> str:
        assert (await turn.tool("noop", {"n": 1})).kind == "result"
        return "ok"

    run = await run_workflow(two_turns, agents={"a": [answer(play), answer("ok")]}, args={}, run_root=tmp_path)
    whole = re.compile(f"[0-9a-f]{{{2 * ID_BYTES}}}")
    assert all(whole.fullmatch(call_id) for call_id in run.value), run.value
    assert sorted(p.name for p in (run.run_dir / "calls").iterdir()) == sorted(run.value)
    tool_ids = re.findall(r'"call_id":"([^"]*)"', (run.run_dir / "tools.jsonl").read_text())
    assert tool_ids and all(whole.fullmatch(i) for i in tool_ids), tool_ids


@workflow(name="one", description="Nothing.")
async def nothing(wf, args: dict) -> int:
    return 1


async def test_two_runs_that_draw_one_run_id_get_two_records(tmp_path, monkeypatch) -> None:
    """Runs of one workflow started in one second share the stamp; four hex digits alone
    clash once in 65,536 pairs, so many runs at once (a service, a test suite) met it."""
    drawn = iter(["20261201-120000-aaaa", "20261201-120000-aaaa", "20261201-120000-bbbb"])
    monkeypatch.setattr(records, "new_run_id", lambda: next(drawn))
    first = await run_workflow(nothing, agents={}, args={}, run_root=tmp_path)
    second = await run_workflow(nothing, agents={}, args={}, run_root=tmp_path)
    assert (first.run_id, second.run_id) == ("20261201-120000-aaaa", "20261201-120000-bbbb")
    assert first.value == second.value == 1


def test_a_run_id_taken_every_draw_is_an_error(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(records, "new_run_id", lambda: "taken")
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError):
        records.make_run_record_dir(tmp_path)
