"""The merge example: scripted, with its real shell agents, and with a person answering through awf."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio

import agentswf
from agentswf import Mail
from agentswf.testing import RunRecord, ScriptedTurn, answer, respond, run_workflow

HERE = Path(__file__).resolve().parent
merge = agentswf.load_workflow(HERE / "merge.py")
Change = sys.modules[merge.fn.__module__].Change


async def test_the_implementer_asks_then_answers_with_what_it_learned(run_root: Path) -> None:
    async def implementer(turn: ScriptedTurn) -> Any:
        if "coordinator's reply" in turn.prompt:
            return Change(where="queue", merged="Merge it" in turn.prompt)
        if "architect's reply" in turn.prompt:
            sent = await turn.send("coordinator", "May I merge?", await_reply=True)
            assert sent.ok, sent.stderr
            return None
        peers = await turn.peers()
        assert [peer["peer"] for peer in peers["peers"]] == ["architect", "coordinator"]
        sent = await turn.send("architect", "Client or queue?", await_reply=True)
        assert sent.ok and "it reads it now, in a turn of its own" in sent.stdout
        return None

    async def architect(turn: ScriptedTurn) -> None:
        assert turn.started_by == "message" and "Client or queue?" in turn.prompt
        replied = await turn.reply("implementer", "The queue.")
        assert replied.ok, replied.stderr

    run = await run_workflow(
        merge, agents={"implementer": answer(implementer), "architect": answer(architect)}, run_root=run_root
    )
    assert run.value == {"where": "queue", "merged": True, "coordinator_asked": ["May I merge?"]}


async def test_the_real_shell_agents_merge_after_asking(run_root: Path, run_record: RunRecord) -> None:
    result = await agentswf.run(merge, run_root=run_root)
    assert result.outcome == "completed", result.reason
    assert result.value["where"] == "queue" and result.value["merged"] is True
    sent = [line["mail"] for line in run_record(result).messages if line["event"] == "sent"]
    assert [(mail["sender"], mail["to"], mail["kind"]) for mail in sent] == [
        ("implementer", "architect", "question"),
        ("architect", "implementer", "reply"),
        ("implementer", "coordinator", "question"),
        ("coordinator", "implementer", "reply"),
    ]


async def test_a_person_answers_as_the_coordinator(run_root: Path) -> None:
    """The coordinator is a person: it reads its inbox and replies as `awf inbox` and `awf reply` do."""
    asked = []

    def coordinator(mail: Mail) -> str:
        asked.append((mail.sender, mail.text, mail.is_question))
        return "Merge it."

    run = await run_workflow(
        merge,
        agents={"implementer": answer(_implementer_asking_the_coordinator), "architect": answer(_architect)},
        participants={"coordinator": respond(coordinator)},
        args={"coordinator": "person"},
        run_root=run_root,
    )
    assert run.value == {"where": "queue", "merged": True, "coordinator_asked": []}
    assert asked == [("implementer", "May I merge?", True)]
    trace = await anyio.run_process(
        [sys.executable, "-m", "agentswf", "trace", run.run_id, "--run-root", str(run_root)], check=False
    )
    assert b"coordinator -> implementer [reply" in trace.stdout


async def _implementer_asking_the_coordinator(turn: ScriptedTurn) -> Any:
    if "coordinator's reply" in turn.prompt:
        return Change(where="queue", merged="Merge it." in turn.prompt)
    if "architect's reply" in turn.prompt:
        sent = await turn.send("coordinator", "May I merge?", await_reply=True)
        assert sent.ok, sent.stderr
        return None
    sent = await turn.send("architect", "Client or queue?", await_reply=True)
    assert sent.ok, sent.stderr
    return None


async def _architect(turn: ScriptedTurn) -> None:
    replied = await turn.reply("implementer", "The queue.")
    assert replied.ok, replied.stderr
