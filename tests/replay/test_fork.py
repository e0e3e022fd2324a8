"""`agentswf.testing.fork`: a run forked at an agent's turn N runs turns N and on for real, as a new
run, what came before played from the record: no attempt of it, no spend of it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

import agentswf
from agentswf import Runtime, Workflow, workflow
from agentswf.harnesses.base import Attempt, AttemptEnding, AttemptResult, Harness
from agentswf.harnesses.usage import Usage
from agentswf.testing import ReplayDiverged, ScriptedTurn, fork, read_record

SPENT = Usage(input_tokens=100, output_tokens=10, cost_usd=0.25)  # each turn's, as a CLI would report it


class Writer(Harness):
    """An agent that answers `<word> <turn>`, reports a session per turn and what it spent, and keeps
    what it was started with: a stand-in for a CLI that resumes sessions."""

    name = "writer"
    spawns = False

    def __init__(
        self, word: str, started: list[tuple[int, str | None, str | None]], model: str | None = None, effort: str | None = None
    ) -> None:
        self.word, self.started, self.model, self.effort = word, started, model, effort

    def settings(self) -> tuple[str | None, str | None]:
        return self.model, self.effort

    def with_settings(self, model: str | None, effort: str | None) -> Writer:
        return Writer(self.word, self.started, model or self.model, effort or self.effort)

    async def run(self, attempt: Attempt) -> AttemptResult:
        self.started.append((attempt.turn, attempt.session, self.model))
        await ScriptedTurn(attempt).result(f"{self.word} {attempt.turn}")
        return AttemptResult(AttemptEnding("exited"), session=f"session-{attempt.turn}", usage=SPENT)


PROMPT = "Write part {n}."


@workflow(name="three", description="A writer's three turns.")
async def three(wf: Workflow) -> list[str]:
    writer = await wf.agents.open("writer", runtime="claude")
    return [(await writer.run(PROMPT.format(n=n))).value for n in (1, 2, 3)]


async def test_a_fork_at_turn_2_runs_turns_2_and_3_only_as_a_new_runs_spend(tmp_path: Path) -> None:
    first: list[tuple[int, str | None, str | None]] = []
    recorded = await agentswf.run(three, run_root=tmp_path, harnesses=lambda key, runtime: Writer("old", first))
    assert recorded.value == ["old 1", "old 2", "old 3"] and recorded.usage.total.cost_usd == pytest.approx(0.75)
    again: list[tuple[int, str | None, str | None]] = []
    forked = await fork(three, recorded.run_dir, "writer:2", settings={"writer": {"model": "opus"}},
                        harnesses=lambda key, runtime: Writer("new", again))  # fmt: skip
    assert forked.value == ["old 1", "new 2", "new 3"]
    # turns 2 and 3 only, with the model given; turn 2 resumes the session turn 1 reported on record
    assert again == [(2, "session-1", "opus"), (3, "session-2", "opus")]
    spent = forked.usage  # the fork's own spend: its played turn 1 asked no model
    assert (spent.total.input_tokens, spent.total.cost_usd, spent.unpriced_turns) == (200, pytest.approx(0.5), 0)
    assert [turn.usage.cost_usd for turn in spent.by_turn if turn.usage] == [0.0, 0.25, 0.25]
    assert forked.run_id != recorded.run_id and forked.run_dir.parent == recorded.run_dir.parent
    record = read_record(forked)
    assert record.run["forked_from"] == {"run": str(recorded.run_dir), "run_id": recorded.run_id, "agent": "writer", "turn": 2}
    assert [turn["model"] for turn in record.turns] == [None, "opus", "opus"]  # turn 1 played: as it ran on record


async def test_a_fork_whose_workflow_changed_before_the_turn_diverges(tmp_path: Path) -> None:
    recorded = await agentswf.run(three, run_root=tmp_path, harnesses=lambda key, runtime: Writer("old", []))
    global PROMPT
    PROMPT, before = "Write section {n}.", PROMPT
    try:
        with pytest.raises(ReplayDiverged) as raised:
            await fork(three, recorded.run_dir, "writer:3", harnesses=lambda key, runtime: Writer("new", []))
        assert (raised.value.agent, raised.value.turn, raised.value.field) == ("writer", "turn 1", "prompt")
        forked = await fork(three, recorded.run_dir, "writer:3", strict=False, harnesses=lambda key, runtime: Writer("new", []))
        assert forked.value == ["old 1", "old 2", "new 3"]
    finally:
        PROMPT = before


@pytest.mark.parametrize(("at", "error"), [("writer", "is no turn"), ("writer:0", "is no turn"), ("writer:4", "no turn 4"),
                                           ("nobody:1", "no turn 1 of agent nobody")])  # fmt: skip
async def test_a_turn_the_record_has_not_is_refused(tmp_path: Path, at: str, error: str) -> None:
    recorded = await agentswf.run(three, run_root=tmp_path, harnesses=lambda key, runtime: Writer("old", []))
    with pytest.raises(agentswf.DefinitionError, match=error):
        await fork(three, recorded.run_dir, at, harnesses=lambda key, runtime: Writer("new", []))


async def test_a_session_on_record_that_is_no_session_id_is_not_resumed(tmp_path: Path) -> None:
    recorded = await agentswf.run(three, run_root=tmp_path, harnesses=lambda key, runtime: Writer("old", []))
    turns = recorded.run_dir / "turns.jsonl"
    forged = turns.read_text().replace('"session-1"', '"--dangerously-skip-permissions"')  # an agent can write the record
    turns.write_text(forged)
    again: list[tuple[int, str | None, str | None]] = []
    await fork(three, recorded.run_dir, "writer:2", harnesses=lambda key, runtime: Writer("new", again))
    assert again[0] == (2, None, None)  # never given to a CLI as a session to resume


Settings = tuple[str | None, str | None]


@workflow(name="switched", description="A writer whose model is set between its turns, beside a reviewer.")
async def switched(wf: Workflow) -> dict[str, list[Settings]]:
    """Each agent's `model` and `effort` as the workflow reads them: as it opened, then after each turn or set."""
    writer = await wf.agents.open("writer", runtime=Runtime(harness="claude", model="sonnet", effort="low"))
    reviewer = await wf.agents.open("reviewer", runtime=Runtime(harness="claude", model="haiku"))
    seen: dict[str, list[Settings]] = {"writer": [(writer.model, writer.effort)], "reviewer": [(reviewer.model, reviewer.effort)]}
    for step in ("turn", "set", "turn", "review", "turn", "review", "turn"):
        agent = reviewer if step == "review" else writer
        if step == "set":
            await writer.set(model="sonnet-2")
        else:
            await agent.run(PROMPT.format(n=step))
        seen[agent.key].append((agent.model, agent.effort))
    return seen


def _as_given(runtime: Runtime, word: str, started: list[tuple[int, str | None, str | None]]) -> Writer:
    return Writer(word, started, runtime.model, runtime.effort)


async def test_a_fork_records_its_played_turns_with_their_settings_and_its_real_ones_with_those_set(tmp_path: Path) -> None:
    """`--set writer:model=opus,effort=high` at writer's turn 3: what was played before it (turns 1 and 2,
    the `set` between them, the reviewer's first turn) is recorded as the record has it; from turn 3 on,
    the writer runs and is recorded with opus and high, though a `set` before the fork's turn said
    sonnet-2; the reviewer, given nothing, runs as it did."""
    recorded = await agentswf.run(switched, run_root=tmp_path, harnesses=lambda key, runtime: _as_given(runtime, "old", []))
    assert recorded.completed, recorded.reason
    original = [(turn["agent"], turn["kind"], turn["model"], turn["effort"]) for turn in read_record(recorded).turns]
    assert original == [
        ("writer", "turn", "sonnet", "low"), ("writer", "set", "sonnet-2", "low"), ("writer", "turn", "sonnet-2", "low"),
        ("reviewer", "turn", "haiku", None), ("writer", "turn", "sonnet-2", "low"), ("reviewer", "turn", "haiku", None),
        ("writer", "turn", "sonnet-2", "low"),
    ]  # fmt: skip
    again: list[tuple[int, str | None, str | None]] = []
    forked = await fork(switched, recorded.run_dir, "writer:3", settings={"writer": {"model": "opus", "effort": "high"}},
                        harnesses=lambda key, runtime: _as_given(runtime, "new", again))  # fmt: skip
    assert forked.completed, forked.reason
    assert again == [(3, "session-2", "opus"), (2, "session-1", "haiku"), (4, "session-3", "opus")]  # what ran for real
    now = [(turn["agent"], turn["kind"], turn["model"], turn["effort"]) for turn in read_record(forked).turns]
    assert now == [
        *original[:4],  # played: as recorded
        ("writer", "turn", "opus", "high"), ("reviewer", "turn", "haiku", None), ("writer", "turn", "opus", "high"),
    ]  # fmt: skip
    assert forked.value == {
        "writer": [("sonnet", "low"), ("sonnet", "low"), ("sonnet-2", "low"), ("sonnet-2", "low"), ("opus", "high"), ("opus", "high")],
        "reviewer": [("haiku", None)] * 3,
    }  # the workflow reads, before the fork's turn, what the forked run read; from it on, what runs


async def test_an_agent_with_nothing_played_runs_with_the_settings_given_from_its_open(tmp_path: Path) -> None:
    """Forked at the writer's turn 1 with `--set reviewer:model=opus`: the reviewer has nothing before the
    fork's turn, so it is opus as it opens, in every turn and in what the workflow reads."""
    recorded = await agentswf.run(switched, run_root=tmp_path, harnesses=lambda key, runtime: _as_given(runtime, "old", []))
    forked = await fork(switched, recorded.run_dir, "writer:1", settings={"reviewer": {"model": "opus"}},
                        harnesses=lambda key, runtime: _as_given(runtime, "new", []))  # fmt: skip
    assert forked.completed, forked.reason
    reviewed = [(turn["model"], turn["effort"]) for turn in read_record(forked).turns if turn["agent"] == "reviewer"]
    assert reviewed == [("opus", None), ("opus", None)]
    assert forked.value["reviewer"] == [("opus", None)] * 3


async def test_a_played_setting_on_record_that_is_no_name_is_recorded_as_none(tmp_path: Path) -> None:
    recorded = await agentswf.run(switched, run_root=tmp_path, harnesses=lambda key, runtime: _as_given(runtime, "old", []))
    turns = recorded.run_dir / "turns.jsonl"
    lines = turns.read_text().splitlines()
    assert '"model":"sonnet",' in lines[0]
    lines[0] = lines[0].replace('"model":"sonnet",', '"model":"--dangerously-skip-permissions",')  # an agent can write the record
    turns.write_text("\n".join(lines) + "\n")
    forked = await fork(switched, recorded.run_dir, "writer:2", harnesses=lambda key, runtime: _as_given(runtime, "new", []))
    assert forked.completed, forked.reason
    first = read_record(forked).turns[0]
    assert (first["model"], first["effort"]) == (None, "low")
    assert forked.value["writer"][1] == (None, "low")  # the workflow read no option for a model


async def test_a_set_after_the_forks_turn_switches_the_agent_as_in_any_run(tmp_path: Path) -> None:
    recorded = await agentswf.run(switched, run_root=tmp_path, harnesses=lambda key, runtime: _as_given(runtime, "old", []))
    ran: dict[str, list[tuple[int, str | None, str | None]]] = {}
    forked = await fork(switched, recorded.run_dir, "writer:1", settings={"writer": {"model": "opus"}},
                        harnesses=lambda key, runtime: _as_given(runtime, "new", ran.setdefault(key, [])))  # fmt: skip
    assert forked.completed, forked.reason
    assert [model for _, _, model in ran["writer"]] == ["opus", "sonnet-2", "sonnet-2", "sonnet-2"]
    written = [(turn["kind"], turn["model"]) for turn in read_record(forked).turns if turn["agent"] == "writer"]
    assert written == [("turn", "opus"), ("set", "sonnet-2"), ("turn", "sonnet-2"), ("turn", "sonnet-2"), ("turn", "sonnet-2")]


class Slow(Writer):
    """A writer whose turns in the fork outlast their timeout."""

    async def run(self, attempt: Attempt) -> AttemptResult:
        if self.word == "new":
            await anyio.sleep(TIMED_OUT_AFTER_SECONDS * 20)
        return await super().run(attempt)

    def with_settings(self, model: str | None, effort: str | None) -> Slow:
        return Slow(self.word, self.started, model or self.model, effort or self.effort)


TIMED_OUT_AFTER_SECONDS = 0.5  # a turn's timeout in `timed`


@workflow(name="timed", description="A writer's two turns, each with a short timeout.")
async def timed(wf: Workflow) -> list[str]:
    writer = await wf.agents.open("writer", runtime="claude")
    return [(await writer.run(PROMPT.format(n=n), timeout=TIMED_OUT_AFTER_SECONDS)).outcome.kind for n in (1, 2)]


async def test_a_forks_first_real_turn_that_times_out_is_recorded_with_the_settings_given(tmp_path: Path) -> None:
    """The switch is the turn's as its attempt starts: a turn that never hears back from it is recorded so too."""
    recorded = await agentswf.run(timed, run_root=tmp_path, harnesses=lambda key, runtime: Slow("old", []))
    forked = await fork(timed, recorded.run_dir, "writer:2", settings={"writer": {"model": "opus"}},
                        harnesses=lambda key, runtime: Slow("new", []))  # fmt: skip
    assert forked.value == ["answered", "timed-out"], forked.reason
    assert [turn["model"] for turn in read_record(forked).turns] == [None, "opus"]
