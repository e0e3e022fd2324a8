"""An agent's open and turn take only the round trips they need: the run registers the agent
on the switchboard itself (told, no wait for the agent's task), a turn's prompt asks for peers
only once a route of the agent's opened, a settled turn with nothing unread takes no mail, and
a candidate's and a turn's line go through `Appends`, not the Recorder's mailbox. The slots
that let the agent skip a round trip stay exact as routes open and mail comes and is read."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from agentswf import workflow
from agentswf.actors import ActorRef
from agentswf.engine.mail.rules import RouteView
from agentswf.engine.mail.switchboard import Presence, Register, StandingSlot, Switchboard
from agentswf.testing import answer, run_workflow

pytestmark = pytest.mark.anyio


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every actor ask of the run, by message type."""
    counts: Counter[str] = Counter()
    original = ActorRef.ask

    async def counting(self: ActorRef, message: Any, timeout: float | None = None) -> Any:
        kind = getattr(message, "kind", "") if isinstance(message, Register) else ""
        counts[type(message).__name__ + (f":{kind}" if kind else "")] += 1  # the workflow registers as a participant
        return await original(self, message, timeout)

    monkeypatch.setattr(ActorRef, "ask", counting)
    return counts


async def test_a_turn_of_an_agent_with_no_route_or_mail_asks_only_its_start_its_answer_and_its_record(
    tmp_path, asked: Counter[str]
) -> None:
    @workflow(name="one", description="One agent, one turn.")
    async def one(wf: Any, args: Any) -> str:
        agent = await wf.agents.open("a", runtime="codex")
        return (await agent.run("Go.", nudge=False)).value

    run = await run_workflow(one, agents={"a": answer("done")}, run_root=tmp_path)
    assert run.value == "done"
    per_agent = {name: asked[name] for name in ("OpenAgent", "StartTurn", "WfaCall", "CallOpened", "ResultAccepted")}
    assert per_agent == dict.fromkeys(per_agent, 1)
    assert not asked.keys() & {"Describe", "Register:agent", "PeersOf", "TakeMail", "CandidateSeen", "TurnEnded", "WhoseCall"}


async def test_an_operation_before_any_turn_records_its_end_behind_the_sessions_line(tmp_path, asked: Counter[str]) -> None:
    """The sessions line told as the agent opened is queued once a mailbox ask of the Recorder's is
    answered (call.json's): a compaction first has had none, so its line goes through the mailbox too."""

    @workflow(name="first", description="A compaction, then a turn.")
    async def first(wf: Any, args: Any) -> str:
        agent = await wf.agents.open("a", runtime="codex")
        assert (await agent.compact("Keep it short.")).outcome.answered
        return (await agent.run("Go.", nudge=False)).value

    run = await run_workflow(first, agents={"a": answer("done")}, run_root=tmp_path)
    assert run.value == "done"
    assert asked["TurnEnded"] == 1  # the compaction's; the turn's, after its call.json, through Appends
    sessions = (run.run_dir / "sessions.jsonl").read_text().splitlines()
    assert len(sessions) == 1 and '"agent":"a"' in sessions[0]


async def test_with_a_route_open_the_prompt_names_the_peer(tmp_path, asked: Counter[str]) -> None:
    prompts: list[str] = []

    async def play(turn: Any) -> str:
        prompts.append(turn.prompt)
        return "done"

    @workflow(name="two", description="Two agents and a route.")
    async def two(wf: Any, args: Any) -> str:
        a = await wf.agents.open("a", runtime="codex")
        b = await wf.agents.open("b", runtime="codex")
        await wf.route(a, b, purpose="News for b")
        return (await a.run("Go.", nudge=False)).value

    run = await run_workflow(two, agents={"a": answer(play), "b": answer(play)}, run_root=tmp_path)
    assert run.value == "done"
    assert asked["PeersOf"] == 1
    assert "- b (agent; you can send): News for b" in prompts[0]


async def test_the_switchboard_keeps_the_slots_exact() -> None:
    board = Switchboard(None, None)  # type: ignore[arg-type]  # its state only: these handlers touch no actor
    slot, other = StandingSlot(), StandingSlot()
    assert (slot.unread, slot.routed) == (True, True)  # a board that doesn't keep them: the agent asks
    board.register(Register(key="a", kind="agent", presence=Presence(), standing=slot))
    board.register(Register(key="b", kind="agent", presence=Presence(), standing=other))
    assert (slot.unread, slot.routed) == (False, False)
    board.views["r1"] = RouteView("r1", "b", "c", False, "p", 5)  # not a's
    board.register(Register(key="c", kind="agent", presence=Presence(), standing=StandingSlot()))
    assert board.ends["c"].standing.routed and not slot.routed
