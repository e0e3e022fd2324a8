"""Every refusal of `wfa send` and `wfa reply`, through real launcher processes of shell agents."""

from __future__ import annotations

import errno
import json

import anyio
import pytest

from agentswf.engine.record.layout import read_lines
from agentswf.errors import AgentClosed
from agentswf.launcher import client
from agentswf.launcher.place import SOCKET_NAME

from .kit import (
    MESSAGE_TURN,
    NO_ANSWER,
    REMINDED,
    NoAwaitShell,
    agent,
    attempts,
    message_turn_ended,
    out,
    prompt,
    refused,
    run_wf,
    sent,
    sent_mail,
    wait_file,
    with_harness,
)

pytestmark = pytest.mark.anyio

# A peer that answers each question it is asked, and ends a turn a message started.
ANSWERER = r"""
case "$PROMPT" in
  *"A question from "*) asker=$(printf '%s' "$PROMPT" | sed -n 's/^A question from \([^;]*\);.*/\1/p' | head -n 1)
                        "$WFA" reply "$asker" "an answer" >/dev/null 2>&1 ;;
esac
case "$PROMPT" in *"takes no result"*) exit 0 ;; esac
answer ok
"""
QUIET = 'case "$PROMPT" in *"takes no result"*) exit 0 ;; esac\nanswer ok\n'


async def test_exit_codes_sent_refused_and_usage(tmp_path):
    body = r"""
w sent send b 'hello'
w sent_heredoc send b <<'EOF'
from a heredoc
EOF
w refused send nobody 'hello'
w timeout_alone send --timeout 1s b 'hello'
w peers_flag peers --all
w no_peer send
w empty send b </dev/null
w bad_duration send --await-reply --timeout soon b 'q'
w reply_flag reply --loud b 'x'
w two_words send b 'one' 'two'
answer done
"""

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", body))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", QUIET))
        await wf.route(a, b, purpose="Tell b things")
        turn = await a.run("Talk to b.")
        assert turn.outcome.answered
        await b.run("Finish.")  # queued behind b's message turns

    result = await run_wf(flow, tmp_path)
    assert sent(tmp_path, "sent").out == "wfa: sent to b; it reads it now, in a turn of its own.\n"
    sent(tmp_path, "sent_heredoc")
    refused(tmp_path, "refused", "send", "no-route")
    for usage in ("timeout_alone", "peers_flag", "no_peer", "empty", "bad_duration", "reply_flag", "two_words"):
        got = out(tmp_path, usage)
        assert got.rc == 2, (usage, got)
        assert "usage:" in got.err and got.out == "", (usage, got)
    assert "--timeout goes only with --await-reply" in out(tmp_path, "timeout_alone").err
    # Nothing of a usage error reached the run; the heredoc's final newline was dropped.
    texts = [text for sender, _, _, text in sent_mail(result) if sender == "a"]
    assert texts == ["hello", "from a heredoc"]


async def test_nobody_listens_after_the_turn_ended(tmp_path):
    """Nothing of a outlives its turn, and neither does its socket's listener: a late send or reply reaches nothing."""

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", "answer done"))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", QUIET))
        await wf.route(a, b, purpose="Tell b things", both_ways=True)
        assert (await a.run("Go.")).outcome.answered
        socket = str(a.launcher.with_name(SOCKET_NAME))
        unreached = []
        for argv in (["send", "b", "late"], ["reply", "b", "late"]):
            try:
                await anyio.to_thread.run_sync(client.call, socket, client.build_request(argv))
            except client.Unreached as error:
                unreached.append(error.args[1:])
        return unreached

    result = await run_wf(flow, tmp_path)
    assert result.value == [(errno.ECONNREFUSED,)] * 2
    assert sent_mail(result) == [] and attempts(tmp_path, "b") == 0


async def test_no_route_to_a_stranger_or_on_a_route_it_can_only_reply_on(tmp_path):
    body = r"""
w stranger send zed 'hi'
w unrouted send c 'hi'
w reply_only send b 'hi'
w reply_only_question send --await-reply b 'hi?'
answer done
"""

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", body))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", QUIET))
        await wf.agents.open("c", runtime=agent(tmp_path, "c", QUIET))
        await wf.route(b, a, purpose="b tells a")  # a can only reply on it
        assert (await a.run("Go.")).outcome.answered

    result = await run_wf(flow, tmp_path)
    assert "there is no route to zed" in refused(tmp_path, "stranger", "send", "no-route").err
    assert "there is no route to c" in refused(tmp_path, "unrouted", "send", "no-route").err
    assert "you can only reply to b" in refused(tmp_path, "reply_only", "send", "no-route").err
    refused(tmp_path, "reply_only_question", "send", "no-route")
    assert sent_mail(result) == []


async def test_peer_stopped(tmp_path):
    body = "w stopped send b 'hi'\nw stopped_question send --await-reply b 'hi?'\nanswer done\n"

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", body))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", QUIET))
        await wf.route(a, b, purpose="Tell b things")
        await b.close()
        assert (await a.run("Go.")).outcome.answered

    result = await run_wf(flow, tmp_path)
    assert "b has stopped" in refused(tmp_path, "stopped", "send", "peer-stopped").err
    refused(tmp_path, "stopped_question", "send", "peer-stopped")
    assert sent_mail(result) == []


async def test_closed_by_route_close_and_by_the_stage_ending(tmp_path):
    body = "w closed send b 'hi'\nw stage_closed send c 'hi'\nw open send d 'hi'\nanswer done\n"

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", body))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", QUIET))
        c = await wf.agents.open("c", runtime=agent(tmp_path, "c", QUIET))
        d = await wf.agents.open("d", runtime=agent(tmp_path, "d", QUIET))
        route = await wf.route(a, b, purpose="Until closed")
        await route.close()
        assert route.closed

        staged = []  # a stage's value is recorded as JSON: the route is kept here instead

        async def talk():
            staged.append(await wf.route(a, c, purpose="Only in the stage"))

        await wf.stage("talk", talk)
        assert staged[0].closed
        await wf.route(a, d, purpose="Still open")
        assert (await a.run("Go.")).outcome.answered
        await d.run("Finish.")

    result = await run_wf(flow, tmp_path)
    assert "the route to b is closed" in refused(tmp_path, "closed", "send", "closed").err
    refused(tmp_path, "stage_closed", "send", "closed")
    sent(tmp_path, "open")
    assert sent_mail(result) == [("a", "d", "message", "hi")]


async def test_a_reply_on_a_route_closed_meanwhile_is_refused_closed(tmp_path):
    asker = f'case "$PROMPT" in *"{NO_ANSWER}"*) answer gave-up; exit 0 ;; esac\nw ask send --await-reply b "q?"\n'
    askee = f"""
case "$PROMPT" in *"{REMINDED}"*) exit 0 ;; esac
touch "$OUT/b_in_turn"; wait_for route_closed
w late_reply reply a 'too late'
"""

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", asker))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", askee))
        route = await wf.route(a, b, purpose="Questions")
        async with anyio.create_task_group() as group:
            turns = []
            group.start_soon(lambda: _collect(turns, a.run("Ask b.")))
            await wait_file(tmp_path / "b_in_turn")
            await route.close()
            (tmp_path / "route_closed").touch()
            await wait_file(tmp_path / "late_reply.rc")
        assert turns[0].value == "gave-up"  # told at once that the closed route brings no answer

    await run_wf(flow, tmp_path)
    sent(tmp_path, "ask")
    refused(tmp_path, "late_reply", "reply", "closed")


async def _collect(into, awaitable):
    into.append(await awaitable)


async def a_asks_b(tmp_path, asker: str, askee: str, *, purpose: str, settle: bool = False, **options):
    """Agents a and b on one route (`options`: both_ways, max_messages, harnesses); a's turn must end "replied".
    With `settle`, the run ends only once b's message turn has (what b does after its reply is on disk)."""
    harnesses = options.pop("harnesses", None)

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", asker))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", askee))
        await wf.route(a, b, purpose=purpose, **options)
        assert (await a.run("Go.")).value == "replied"
        if settle:
            await message_turn_ended(wf, "b")

    return await run_wf(flow, tmp_path, **({"harnesses": harnesses} if harnesses else {}))



async def test_too_large_send_and_reply(tmp_path):
    asker = r"""
case "$PROMPT" in *"b's reply"*) answer replied; exit 0 ;; esac
head -c 16385 /dev/zero | tr '\0' x | w over send b
head -c 16384 /dev/zero | tr '\0' y | w at_limit send b
w ask send --await-reply b 'Big answer please?'
"""
    askee = r"""
case "$PROMPT" in *"A question from a"*)
  head -c 16385 /dev/zero | tr '\0' z | w reply_over reply a
  w reply_small reply a 'see answer.txt' ;;
esac
"""

    result = await a_asks_b(tmp_path, asker, askee, purpose="Big things")
    assert "16385 bytes, over the limit of 16384" in refused(tmp_path, "over", "send", "too-large").err
    sent(tmp_path, "at_limit")
    refused(tmp_path, "reply_over", "reply", "too-large")
    sent(tmp_path, "reply_small")
    kinds = [(s, t, kind, len(text)) for s, t, kind, text in sent_mail(result)]
    assert kinds == [("a", "b", "message", 16384), ("a", "b", "question", 18), ("b", "a", "reply", 14)]


async def test_already_awaiting(tmp_path):
    asker = r"""
case "$PROMPT" in *"b's reply"*) answer replied; exit 0 ;; esac
w first send --await-reply b 'q1?'
w second send --await-reply c 'q2?'
w again send --await-reply b 'q1 again?'
w plain send c 'a plain message is fine'
"""
    askee_b = r"""
case "$PROMPT" in *"A question from a"*)
  wait_for plain.rc  # a has tried all its sends while it awaits b
  w b_asks send --await-reply c 'help?'
  w b_reply_back reply --await-reply a 'answer, and a question back?'
  w b_reply reply a 'answer' ;;
esac
"""

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", asker))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", askee_b))
        # c answers b only once b has tried to reply while awaiting c, or that try may find c answered
        held = 'case "$PROMPT" in *"help?"*) wait_for b_reply_back.rc ;; esac\n'
        c = await wf.agents.open("c", runtime=agent(tmp_path, "c", held + ANSWERER))
        await wf.route(a, b, purpose="Ask b")
        await wf.route(a, c, purpose="Ask c")
        await wf.route(b, c, purpose="b asks c")
        assert (await a.run("Go.")).value == "replied"

    await run_wf(flow, tmp_path)
    sent(tmp_path, "first")
    assert "you already await a reply from b" in refused(tmp_path, "second", "send", "already-awaiting").err
    refused(tmp_path, "again", "send", "already-awaiting")
    sent(tmp_path, "plain")
    sent(tmp_path, "b_asks")
    refused(tmp_path, "b_reply_back", "reply", "already-awaiting")
    sent(tmp_path, "b_reply")


async def test_unsupported_where_the_harness_cant_await(tmp_path):
    asker = r"""
case "$PROMPT" in *"b's reply"*) answer replied; exit 0 ;; esac
w ask send --await-reply b 'q?'
"""
    askee = r"""
case "$PROMPT" in *"A question from a"*)
  w b_ask send --await-reply a 'me too?'
  w b_reply_back reply --await-reply a 'answer, and a question back?'
  w b_plain send a 'a plain message works'
  w b_reply reply a 'answer' ;;
esac
"""

    await a_asks_b(tmp_path, asker, askee, purpose="Both ways", both_ways=True, harnesses=with_harness({"b": NoAwaitShell}))
    sent(tmp_path, "ask")
    assert "can't await a reply where you run" in refused(tmp_path, "b_ask", "send", "unsupported").err
    refused(tmp_path, "b_reply_back", "reply", "unsupported")
    sent(tmp_path, "b_plain")
    sent(tmp_path, "b_reply")
    # Only an agent that can await is taught --await-reply.
    assert "send --await-reply" in prompt(tmp_path, "a", 1)
    assert "--await-reply" not in prompt(tmp_path, "b", 1)


async def test_cycle_directly(tmp_path):
    asker = r"""
case "$PROMPT" in *"b's reply"*) answer replied; exit 0 ;; esac
w ask send --await-reply b 'q?'
"""
    askee = r"""
case "$PROMPT" in *"A question from a"*)
  w b_asks_back send --await-reply a 'and you?'
  w b_plain send a 'a plain message is no cycle'
  w b_reply reply a 'answer' ;;
esac
"""

    await a_asks_b(tmp_path, asker, askee, purpose="Both ways", both_ways=True)
    assert "a already waits, directly or through others, on you" in refused(
        tmp_path, "b_asks_back", "send", "cycle"
    ).err
    sent(tmp_path, "b_plain")
    sent(tmp_path, "b_reply")


async def test_cycle_through_a_third_agent(tmp_path):
    a_body = r"""
case "$PROMPT" in *"b's reply"*) answer replied; exit 0 ;; esac
w a_ask send --await-reply b 'q for b?'
"""
    b_body = r"""
case "$PROMPT" in
  *"c's reply"*) w b_reply reply a 'answer via c' ;;
  *"A question from a"*) w b_ask send --await-reply c 'q for c?' ;;
esac
"""
    c_body = r"""
case "$PROMPT" in *"A question from b"*)
  w c_asks_a send --await-reply a 'q for a?'
  w c_reply reply b 'answer from c' ;;
esac
"""

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", a_body))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", b_body))
        c = await wf.agents.open("c", runtime=agent(tmp_path, "c", c_body))
        await wf.route(a, b, purpose="a asks b")
        await wf.route(b, c, purpose="b asks c")
        await wf.route(c, a, purpose="c asks a")
        assert (await a.run("Go.")).value == "replied"

    result = await run_wf(flow, tmp_path)
    sent(tmp_path, "a_ask")
    sent(tmp_path, "b_ask")
    refused(tmp_path, "c_asks_a", "send", "cycle")
    sent(tmp_path, "c_reply")
    sent(tmp_path, "b_reply")
    assert [(s, t, kind) for s, t, kind, _ in sent_mail(result)] == [
        ("a", "b", "question"),
        ("b", "c", "question"),
        ("c", "b", "reply"),
        ("b", "a", "reply"),
    ]


async def test_limit_used_up_and_no_room_for_a_question(tmp_path):
    body = r"""
w one send b 'one'
w two send b 'two'
w question send --await-reply c 'q?'
w plain send c 'plain'
w after send c 'over'
answer done
"""

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", body))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", QUIET))
        c = await wf.agents.open("c", runtime=agent(tmp_path, "c", QUIET))
        await wf.route(a, b, purpose="One message", max_messages=1)
        await wf.route(a, c, purpose="One message too", max_messages=1)
        assert (await a.run("Go.")).outcome.answered

    await run_wf(flow, tmp_path)
    sent(tmp_path, "one")
    assert "used all its 1 messages" in refused(tmp_path, "two", "send", "limit").err
    assert "not a question and its reply" in refused(tmp_path, "question", "send", "limit").err
    sent(tmp_path, "plain")
    refused(tmp_path, "after", "send", "limit")


async def test_limit_of_a_question_back_in_a_reply(tmp_path):
    asker = r"""
case "$PROMPT" in *"b's reply"*) answer replied; exit 0 ;; esac
w ask send --await-reply b 'q?'
"""
    askee = r"""
case "$PROMPT" in *"A question from a"*)
  w back reply --await-reply a 'answer, and a question back?'
  w plain_reply reply a 'answer' ;;
esac
"""

    await a_asks_b(tmp_path, asker, askee, purpose="A question and its reply", max_messages=2)
    sent(tmp_path, "ask")
    assert "room for your reply but not a question back" in refused(tmp_path, "back", "reply", "limit").err
    sent(tmp_path, "plain_reply")  # its question paid for it


async def test_inbox_full_at_the_seventeenth_unread_message(tmp_path):
    sender = r"""
wait_for b_working
i=1; while [ $i -le 17 ]; do w "m$i" send b "message $i"; i=$((i+1)); done
w peers peers --json
touch "$OUT/b_release"
answer done
"""
    worker = r"""
case "$PROMPT" in *"takes no result"*) exit 0 ;; esac
touch "$OUT/b_working"; wait_for b_release
answer worked
"""

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", sender))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", worker))
        await wf.route(a, b, purpose="Many messages")
        async with anyio.create_task_group() as group:
            group.start_soon(b.run, "Work.")
            assert (await a.run("Go.")).outcome.answered
        await b.run("Finish.")  # queued behind the message turn the 16 messages start

    result = await run_wf(flow, tmp_path)
    for i in range(1, 17):
        assert sent(tmp_path, f"m{i}").out == "wfa: sent to b; it reads it when its current turn ends.\n"
    assert "b has 16 unread messages" in refused(tmp_path, "m17", "send", "inbox-full").err
    [row] = json.loads(out(tmp_path, "peers").out)["peers"]
    assert row["state"] == "working" and row["queued"] == 16
    # b read all 16 when its turn ended, in one turn of its own.
    message_turn = prompt(tmp_path, "b", 2)
    assert MESSAGE_TURN in message_turn
    assert all(f"message {i}\n" in message_turn for i in range(1, 17)) and "message 17" not in message_turn
    assert [t["started_by"] for t in read_lines(result.run_dir / "turns.jsonl") if t["agent"] == "b"] == ["workflow", "message", "workflow"]


async def test_none_owed(tmp_path):
    asker = r"""
case "$PROMPT" in *"b's reply"*) answer replied; exit 0 ;; esac
w a_unasked reply b 'nobody asked'
w ask send --await-reply b 'q?'
"""
    askee = r"""
case "$PROMPT" in *"A question from a"*)
  w b_once reply a 'answer'
  w b_twice reply a 'answer again' ;;
esac
"""

    await a_asks_b(tmp_path, asker, askee, purpose="Both ways", settle=True, both_ways=True)  # b replies twice
    assert "to message it, use wfa send b" in refused(tmp_path, "a_unasked", "reply", "none-owed").err
    sent(tmp_path, "b_once")
    refused(tmp_path, "b_twice", "reply", "none-owed")


async def test_expired_when_the_askers_timeout_passed(tmp_path):
    asker = f"""
case "$PROMPT" in *"{NO_ANSWER}"*) answer no-answer; exit 0 ;; esac
w ask send --await-reply --timeout 0.5s b 'quick?'
"""
    askee = r"""
case "$PROMPT" in *"A question from a"*) sleep 1; w slow reply a 'too slow' ;; esac
"""

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", asker))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", askee))
        await wf.route(a, b, purpose="Quick questions")
        assert (await a.run("Go.")).value == "no-answer"
        await b.run("Finish.")

    result = await run_wf(flow, tmp_path)
    assert "the wait ends at" in sent(tmp_path, "ask").out
    assert "a stopped waiting for your reply" in refused(tmp_path, "slow", "reply", "expired").err
    assert "b did not reply in time" in prompt(tmp_path, "a", 2)
    assert [kind for _, _, kind, _ in sent_mail(result)] == ["question", "notice"]


async def test_expired_when_the_asker_finished_with_a_result(tmp_path):
    asker = r"""
w ask send --await-reply b 'q?'
answer found-it-myself
touch "$OUT/a_done"
"""
    askee = r"""
case "$PROMPT" in *"A question from a"*) wait_for a_done; sleep 0.2; w late reply a 'answer' ;; esac
"""

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", asker))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", askee))
        await wf.route(a, b, purpose="Questions")
        assert (await a.run("Go.")).value == "found-it-myself"
        await b.run("Finish.")

    await run_wf(flow, tmp_path)
    sent(tmp_path, "ask")
    refused(tmp_path, "late", "reply", "expired")
    assert attempts(tmp_path, "a") == 1


async def test_expired_when_the_asker_stopped(tmp_path):
    worker = r"""
case "$PROMPT" in *"takes no result"*) exit 0 ;; esac
touch "$OUT/a_working"; wait_for b_closed
w to_stopped reply b 'answer'
answer done
"""
    asker = "w ask send --await-reply a 'q?'\ntouch \"$OUT/b_asked\"\n"

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", worker))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", asker))
        await wf.route(b, a, purpose="b asks a")
        async with anyio.create_task_group() as group:
            group.start_soon(a.run, "Work.")
            await wait_file(tmp_path / "a_working")
            group.start_soon(_closed_mid_turn, b)
            await wait_file(tmp_path / "b_asked")
            await b.close()
            (tmp_path / "b_closed").touch()

    await run_wf(flow, tmp_path)
    sent(tmp_path, "ask")
    refused(tmp_path, "to_stopped", "reply", "expired")


async def _closed_mid_turn(agent_):
    with pytest.raises(AgentClosed):
        await agent_.run("Ask a.")
