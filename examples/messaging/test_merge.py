"""The merge example: scripted, with its real shell agents, and with a person answering through awf."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

import agentswf
from agentswf.engine.records import read_lines
from agentswf.testing import answer, run_workflow
from agentswf.workflow.loading import load_workflow

HERE = Path(__file__).resolve().parent
merge = load_workflow(HERE / "merge.py")
Change = sys.modules[merge.fn.__module__].Change

pytestmark = pytest.mark.anyio


async def test_the_implementer_asks_then_answers_with_what_it_learned(tmp_path):
    async def implementer(turn):
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

    async def architect(turn):
        assert turn.started_by == "message" and "Client or queue?" in turn.prompt
        replied = await turn.reply("implementer", "The queue.")
        assert replied.ok, replied.stderr

    run = await run_workflow(
        merge, agents={"implementer": answer(implementer), "architect": answer(architect)}, run_root=tmp_path
    )
    assert run.value == {"where": "queue", "merged": True, "coordinator_asked": ["May I merge?"]}


async def test_the_real_shell_agents_merge_after_asking(tmp_path):
    result = await agentswf.run(merge, run_root=tmp_path)
    assert result.outcome == "completed", result.reason
    assert result.value["where"] == "queue" and result.value["merged"] is True
    sent = [line["mail"] for line in read_lines(result.run_dir / "messages.jsonl") if line["event"] == "sent"]
    assert [(mail["sender"], mail["to"], mail["kind"]) for mail in sent] == [
        ("implementer", "architect", "question"),
        ("architect", "implementer", "reply"),
        ("implementer", "coordinator", "question"),
        ("coordinator", "implementer", "reply"),
    ]


async def test_a_person_answers_with_awf_reply(tmp_path):
    """The coordinator is a person: a separate process reads its inbox and replies through awf."""
    awf = [sys.executable, "-m", "agentswf"]

    async def person() -> None:
        run_id = await _run_id(tmp_path)
        inbox = await anyio.run_process(
            [*awf, "inbox", run_id, "--as", "coordinator", "--wait", "20s", "--run-root", str(tmp_path)], check=False
        )
        assert inbox.returncode == 0, inbox.stderr
        assert b"May I merge?" in inbox.stdout
        replied = await anyio.run_process(
            [*awf, "reply", run_id, "implementer", "Merge it.", "--as", "coordinator", "--run-root", str(tmp_path)],
            check=False,
        )
        assert replied.returncode == 0, replied.stderr

    async with anyio.create_task_group() as group:
        group.start_soon(person)
        result = await agentswf.run(merge, args={"coordinator": "person"}, run_root=tmp_path)
    assert result.outcome == "completed", result.reason
    assert result.value == {"where": "queue", "merged": True, "coordinator_asked": []}
    trace = subprocess.run(
        [*awf, "trace", result.run_id, "--run-root", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert "coordinator -> implementer [reply" in trace.stdout


async def _run_id(root: Path) -> str:
    with anyio.fail_after(20):
        while True:
            runs = list(root.glob("merge/*/run.json"))
            if runs:
                return json.loads(runs[0].read_text())["run_id"]
            await anyio.sleep(0.02)
