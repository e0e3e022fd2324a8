"""`wfa peers`, and the owed-reply notice at the head of every answer, through real launchers."""

from __future__ import annotations

import json
import time

import anyio
import pytest

from agentswf import tool, workflow
from agentswf.testing import answer, run_workflow

from .kit import QUIET_BODY, WaitingShell, agent, out, refused, run_wf, sent, with_harness

pytestmark = pytest.mark.anyio

# a: observes its peers while e awaits its reply; then replies, and answers.
OBSERVER = r"""
case "$PROMPT" in *"takes no result"*) exit 0 ;; esac
wait_for c_working; wait_for e_asked
i=0; until "$WFA" peers --json | grep -q '"awaiting-reply"' || [ $i -gt 200 ]; do sleep 0.05; i=$((i+1)); done
w to_c1 send c 'one'
w to_c2 send c 'two'
w table peers
w json peers --json
w result_owing result "$WFA_CALL_ID" <<'EOF'
"too soon"
EOF
w waiting_owing waiting "$WFA_CALL_ID" --reason 'building'
w tool_owing tool ping
w reply_e reply e 'Here is your answer.'
w table_after peers
w tool_after tool ping
touch "$OUT/release"
w result_after result "$WFA_CALL_ID" <<'EOF'
"done"
EOF
"""
WORKER = r"""
case "$PROMPT" in *"takes no result"*) exit 0 ;; esac
touch "$OUT/c_working"; wait_for release
answer worked
"""
ASKER = r"""
case "$PROMPT" in *"a's reply"*) answer got-it; exit 0 ;; esac
w e_ask send --await-reply --timeout 10m a 'What is the plan?'
w e_peers peers --json
w e_waiting waiting "$WFA_CALL_ID" --reason 'nothing to do' --timeout 1m
w e_send send a 'fyi'
touch "$OUT/e_asked"
"""


async def test_peers_table_and_json_with_every_state(tmp_path):
    ping = tool(lambda: "pong", description="Answers pong.")

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", OBSERVER), tools={"ping": ping})
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", QUIET_BODY))
        c = await wf.agents.open("c", runtime=agent(tmp_path, "c", WORKER))
        d = await wf.agents.open("d", runtime=agent(tmp_path, "d", QUIET_BODY))
        e = await wf.agents.open("e", runtime=agent(tmp_path, "e", ASKER))
        f = await wf.agents.open("f", runtime=agent(tmp_path, "f", QUIET_BODY))
        p = await wf.participants.open("coordinator")
        await wf.route(a, b, purpose="Hasn't run")
        await wf.route(a, c, purpose="Working", both_ways=True)
        await wf.route(a, d, purpose="Idle")
        await wf.route(e, a, purpose="e asks a")
        await wf.route(a, f, purpose="Stopped")
        await wf.route(p, a, purpose="Ask before merging", both_ways=True)
        closed = await wf.route(a, "workflow", purpose="Closed routes aren't listed")
        await closed.close()
        assert (await d.run("Run once.")).outcome.answered
        await f.close()
        async with anyio.create_task_group() as group:
            group.start_soon(c.run, "Work until released.")
            group.start_soon(e.run, "Ask a.")
            turn = await a.run("Look at your peers.")
            assert turn.value == "done", turn.outcome

    await run_wf(flow, tmp_path, harnesses=with_harness({"a": WaitingShell, "e": WaitingShell}), timeout="1h")

    table = json.loads(out(tmp_path, "json").out)
    assert table == {
        "peers": [
            {"peer": "b", "can": "send", "kind": "agent", "state": "not-started", "queued": 0, "purpose": "Hasn't run"},
            {"peer": "c", "can": "both", "kind": "agent", "state": "working", "queued": 2, "purpose": "Working"},
            {"peer": "d", "can": "send", "kind": "agent", "state": "idle", "queued": 0, "purpose": "Idle"},
            {
                "peer": "e",
                "can": "reply",
                "kind": "agent",
                "state": "awaiting-reply",
                "awaits": "a",
                "queued": 0,
                "purpose": "e asks a",
            },
            {
                "peer": "f",
                "can": "send",
                "kind": "agent",
                "state": "stopped",
                "reason": "its agent was closed",
                "queued": 0,
                "purpose": "Stopped",
            },
            {"peer": "coordinator", "can": "both", "kind": "participant", "queued": 0, "purpose": "Ask before merging"},
        ],
        "owes": ["e"],
    }
    assert list(table["peers"][0]) == ["peer", "can", "kind", "state", "queued", "purpose"]
    assert list(table["peers"][5]) == ["peer", "can", "kind", "queued", "purpose"]  # a participant has no state

    text = out(tmp_path, "table").out.splitlines()
    assert text[0].split() == ["peer", "can", "kind", "state", "queued", "purpose"]
    rows = {line.split()[0]: line for line in text[1:7]}
    assert rows["b"].split() == ["b", "send", "agent", "not-started", "0", "Hasn't", "run"]
    assert rows["c"].split()[:5] == ["c", "both", "agent", "working", "2"]
    assert "awaiting-reply (awaits a)" in rows["e"] and rows["e"].split()[1] == "reply"
    assert "stopped (its agent was closed)" in rows["f"]
    assert rows["coordinator"].split()[:5] == ["coordinator", "both", "participant", "-", "0"]
    assert text[7:] == ["you owe e a reply (wfa reply e)."]  # in the table, not as a leading notice
    assert "you owe" not in out(tmp_path, "table_after").out

    # e's own view: whose reply it awaits, and until when (its --timeout, in Unix ms).
    e_view = json.loads(out(tmp_path, "e_peers").out)
    assert e_view["owes"] == [] and e_view["awaits"]["peer"] == "a"
    assert abs(e_view["awaits"]["until"] - (time.time() + 600) * 1000) < 60_000
    assert e_view["peers"] == [
        {"peer": "a", "can": "send", "kind": "agent", "state": "working", "queued": 1, "purpose": "e asks a"}
    ]


async def test_the_owed_notice_leads_every_answer_until_the_agent_replies(tmp_path):
    ping = tool(lambda: "pong", description="Answers pong.")

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", OBSERVER), tools={"ping": ping})
        c = await wf.agents.open("c", runtime=agent(tmp_path, "c", WORKER))
        e = await wf.agents.open("e", runtime=agent(tmp_path, "e", ASKER))
        await wf.route(a, c, purpose="Working")
        await wf.route(e, a, purpose="e asks a")
        async with anyio.create_task_group() as group:
            group.start_soon(c.run, "Work until released.")
            group.start_soon(e.run, "Ask a.")
            assert (await a.run("Answer e first.")).value == "done"

    await run_wf(flow, tmp_path, harnesses=with_harness({"a": WaitingShell, "e": WaitingShell}))
    owed = "wfa: you owe e a reply (wfa reply e).\n"
    # send and reply, result and waiting: on standard output, first.
    assert sent(tmp_path, "to_c1").out == owed + "wfa: sent to c; it reads it when its current turn ends.\n"
    result = refused(tmp_path, "result_owing", "result", "owes-reply")
    assert result.out == owed and "reply first (wfa reply e)" in result.err
    assert refused(tmp_path, "waiting_owing", "waiting", "owes-reply").out == owed
    # wfa tool keeps standard output for the result (its notice: test_tool_notice_on_standard_error).
    tool_owing = out(tmp_path, "tool_owing")
    assert (tool_owing.rc, tool_owing.out) == (0, "pong")
    # Once it replied: no notice, and the result is accepted.
    assert sent(tmp_path, "reply_e").out.startswith("wfa: replied to e")
    tool_after = out(tmp_path, "tool_after")
    assert (tool_after.rc, tool_after.out, tool_after.err) == (0, "pong", "")
    assert sent(tmp_path, "result_after").out == "wfa: result accepted.\n"
    # The asker: its answers lead with the reply it awaits; waiting changes nothing and exits 0.
    awaits = "wfa: you await a's reply; it starts your next turn.\n"
    assert sent(tmp_path, "e_ask").out.startswith(awaits)
    waiting = sent(tmp_path, "e_waiting")
    assert waiting.out == awaits + "wfa: a's reply is already awaited; nothing changed.\n"
    assert sent(tmp_path, "e_send").out == awaits + "wfa: sent to a; it reads it when its current turn ends.\n"
    assert (tmp_path / "e.results").read_text() == "wfa: result accepted.\n"


async def test_tool_notice_on_standard_error(tmp_path):
    seen = []

    async def asker(turn):
        if "a's reply" in turn.prompt:
            return "got it"
        assert (await turn.send("a", "q?", await_reply=True)).ok

    async def owing(turn):
        if "A question from b" not in turn.prompt:
            return None  # a message turn: nothing to do
        seen.append(await turn.request("tool", name="ping", args=[], input=""))
        assert (await turn.reply("b", "answer")).ok

    ping = tool(lambda: "pong", description="Answers pong.")

    async def flow(wf):
        a = await wf.agents.open("a", runtime="codex", tools={"ping": ping})
        b = await wf.agents.open("b", runtime="codex")
        await wf.route(b, a, purpose="b asks a")
        assert (await b.run("Ask a.")).value == "got it"

    definition = workflow(name="tool-notice", description="A tool call while owing a reply.")(flow)
    await run_workflow(
        definition, agents={"a": answer(owing), "b": answer(asker)}, run_root=tmp_path, timeout="20s"
    )
    [response] = seen
    assert response.exit == 0 and response.stdout == "pong"
    assert response.stderr.startswith("wfa: you owe b a reply (wfa reply b).\n"), response
