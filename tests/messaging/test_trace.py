"""The record of messages (messages.jsonl) and `awf trace`; a three-agent conversation, scripted."""

from __future__ import annotations

import re
import subprocess
import sys

import anyio
import pytest

from agentswf import workflow
from agentswf.testing import answer, run_workflow

from .kit import agent, messages, run_wf, sent_mail

pytestmark = pytest.mark.anyio


async def test_messages_jsonl_and_awf_trace_say_who_sent_what_when_it_was_read_and_how_long_it_waited(tmp_path):
    worker = r"""
case "$PROMPT" in *"takes no result"*) exit 0 ;; esac
touch "$OUT/b_working"; sleep 1; answer worked
"""
    sender = r"""
wait_for b_working
w note send b 'A note while you work'
answer sent
"""

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", sender))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", worker))
        await wf.route(a, b, purpose="Notes")
        async with anyio.create_task_group() as group:
            group.start_soon(b.run, "Work.")
            await a.run("Send a note.")
        await b.run("Finish.")  # behind the message turn the note starts
        await wf.route(a, "workflow", purpose="Never used")

    result = await run_wf(flow, tmp_path)
    events = messages(result)
    assert [e["event"] for e in events] == ["sent", "read"]
    sent_event, read_event = events
    mail = sent_event["mail"]
    assert (mail["sender"], mail["to"], mail["kind"], mail["text"]) == ("a", "b", "message", "A note while you work")
    assert sent_event["route"] == "r1" and sent_event["read"] == "when its current turn ends"
    assert read_event["message_id"] == mail["id"] and read_event["by"] == "b"
    assert read_event["at"] - mail["at"] > 0.5  # read when b's turn ended, not when sent

    trace = subprocess.run(
        [sys.executable, "-m", "agentswf", "trace", result.run_id, "--run-root", str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=60,
    )
    assert trace.returncode == 0, trace.stderr
    first, second = trace.stdout.splitlines()
    assert re.fullmatch(r"\d\d:\d\d:\d\d a -> b \[message, route r1\] A note while you work", first), first
    match = re.fullmatch(r"  read \d\d:\d\d:\d\d by b, waited (\d+\.\d)s", second)
    assert match and float(match.group(1)) >= 0.5, second


async def test_awf_trace_of_a_run_without_messages_and_of_an_unread_message(tmp_path):
    async def flow(wf):
        person = await wf.participants.open("person")
        await wf.route(wf, person, purpose="Tell the person")
        await wf.send("person", "Nobody reads this.")

    result = await run_wf(flow, tmp_path)
    trace = subprocess.run(
        [sys.executable, "-m", "agentswf", "trace", result.run_id, "--run-root", str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=60,
    )
    assert trace.stdout.splitlines()[1:] == ["  never read"]
    assert "workflow -> person [message, route r1] Nobody reads this." in trace.stdout


async def test_three_scripted_agents_hold_a_conversation(tmp_path):
    """A lead asks an architect, who asks an expert first; the expert can't ask the lead back (cycle)."""
    seen = {}

    async def lead(turn):
        if "architect's reply" in turn.prompt:
            assert "Use the queue" in turn.prompt
            peers = await turn.peers()
            assert peers["owes"] == [] and "awaits" not in peers
            return "queue"
        assert turn.started_by == "workflow"
        asked = await turn.send("architect", "Where do retries go?", await_reply=True, timeout_seconds=60)
        assert asked.ok and "now, in a turn of its own" in asked.stdout
        again = await turn.send("expert", "Me too?", await_reply=True)
        assert (again.exit, again.code) == (1, "already-awaiting")
        return None

    async def architect(turn):
        assert turn.started_by == "message"
        if "expert's reply" in turn.prompt:
            replied = await turn.reply("lead", "Use the queue, says the expert.")
            assert replied.ok, replied.stderr
            return None
        assert "A question from lead; it awaits your reply (wfa reply lead)" in turn.prompt
        early = await turn.request("result", call_id=turn.call_id, args=[], input='"x"')
        assert early.code == "no-result"
        peers = await turn.peers()
        seen["architect_peers"] = peers
        asked = await turn.send("expert", "Client or queue?", await_reply=True)
        assert asked.ok, asked.stderr
        return None

    async def expert(turn):
        assert turn.started_by == "message"
        back = await turn.send("lead", "Who is asking?", await_reply=True)
        seen["cycle"] = back.code
        told = await turn.send("lead", "FYI: looking into it.")
        assert told.ok and "with the reply it awaits" in told.stdout
        replied = await turn.reply("architect", "The queue.")
        assert replied.ok
        return None

    @workflow(name="conversation", description="Three agents talk.")
    async def conversation(wf):
        lead_ = await wf.agents.open("lead", runtime="codex")
        architect_ = await wf.agents.open("architect", runtime="codex")
        expert_ = await wf.agents.open("expert", runtime="codex")
        await wf.route(lead_, architect_, purpose="Design questions")
        await wf.route(architect_, expert_, purpose="Expert advice")
        await wf.route(expert_, lead_, purpose="Status", both_ways=True)
        turn = await lead_.run("Decide where retries go.", timeout="5m")
        return turn.value

    run = await run_workflow(
        conversation,
        agents={"lead": answer(lead), "architect": answer(architect), "expert": answer(expert)},
        run_root=tmp_path,
        timeout="1m",
    )
    assert run.value == "queue"
    assert seen["cycle"] == "cycle"
    assert seen["architect_peers"]["owes"] == ["lead"]
    assert [row["peer"] for row in seen["architect_peers"]["peers"]] == ["lead", "expert"]
    assert [(s, t, kind) for s, t, kind, _ in sent_mail(run.result)] == [
        ("lead", "architect", "question"),
        ("architect", "expert", "question"),
        ("expert", "lead", "message"),
        ("expert", "architect", "reply"),
        ("architect", "lead", "reply"),
    ]
    by_agent = {t["agent"]: t for t in run.turns}
    assert by_agent["architect"]["started_by"] == "message" and by_agent["expert"]["started_by"] == "message"
    assert by_agent["lead"]["started_by"] == "workflow" and by_agent["lead"]["outcome"]["value"] == "queue"
    # the lead read the expert's note together with the architect's reply, in one continuation
    reads = {e["message_id"]: e["at"] for e in run_events(run) if e["event"] == "read"}
    sent_ids = {(e["mail"]["sender"], e["mail"]["to"]): e["mail"]["id"] for e in run_events(run) if e["event"] == "sent"}
    assert abs(reads[sent_ids[("expert", "lead")]] - reads[sent_ids[("architect", "lead")]]) < 0.5


def run_events(run):
    from agentswf.engine.record.layout import read_lines

    return list(read_lines(run.run_dir / "messages.jsonl"))
