"""When a message is read: a turn of its own, the end of the current turn, or with the awaited reply."""

from __future__ import annotations

import time

import anyio
import pytest

from agentswf.engine.mail.rules import MESSAGE_TURN_SECONDS

from .kit import (
    MESSAGE_TURN,
    NO_ANSWER,
    REMINDED,
    agent,
    attempts,
    call_id,
    call_record,
    message_turn_ended,
    prompt,
    refused,
    run_wf,
    sent,
    sent_mail,
    turns,
)

pytestmark = pytest.mark.anyio


async def test_a_message_to_an_agent_that_hasnt_run_or_is_idle_starts_a_turn_that_takes_no_result(tmp_path):
    sender = r"""
w "hello$WFA_TURN" send b "hello $WFA_TURN"
answer sent
"""
    receiver = r"""
case "$PROMPT" in *"takes no result"*)
  w "no_result$k" result "$WFA_CALL_ID" <<'EOF'
"an answer"
EOF
  exit 0 ;;
esac
answer worked
"""

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", sender))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", receiver))
        await wf.route(a, b, purpose="News for b")
        assert (await a.run("Tell b.")).outcome.answered  # b hasn't run
        assert (await b.run("Work.")).value == "worked"  # queued behind its message turn
        assert (await a.run("Tell b again.")).outcome.answered  # b is idle
        assert (await b.run("Work again.")).value == "worked"

    started = time.time()
    result = await run_wf(flow, tmp_path, timeout="1h")
    for n in (1, 2):
        assert sent(tmp_path, f"hello{n}").out == "wfa: sent to b; it reads it now, in a turn of its own.\n"
    for k in (1, 3):
        assert MESSAGE_TURN in prompt(tmp_path, "b", k)
        no_result = refused(tmp_path, f"no_result{k}", "result", "no-result")
        assert "a turn a message started, which takes no result" in no_result.err
    assert "A message from a:\n<<<\nhello 1\n>>>" in prompt(tmp_path, "b", 1)
    b_turns = turns(result, "b")
    assert [t["started_by"] for t in b_turns] == ["message", "workflow", "message", "workflow"]
    assert b_turns[0]["outcome"] == {"kind": "answered", "value": None}
    assert b_turns[0]["call_id"] == call_id(tmp_path, "b", 1)
    # A turn a message starts has 15 minutes of its own.
    deadline_ms = call_record(result, b_turns[0]["call_id"])["deadline_at"]
    assert abs(deadline_ms / 1000 - (started + MESSAGE_TURN_SECONDS)) < 30


async def test_a_message_turn_is_lengthened_by_an_asker_waiting_longer_and_cut_by_the_run(tmp_path):
    asker = r"""
case "$PROMPT" in *"reply to your question"*|*"There is no answer"*) answer done; exit 0 ;; esac
case "$WFA_AGENT" in
  a) w ask_long send --await-reply b 'q?' ;;
  c) w ask_short send --await-reply --timeout 5m d 'q?' ;;
esac
"""
    askee = r"""
case "$PROMPT" in *"A question from "*)
  asker=$(printf '%s' "$PROMPT" | sed -n 's/^A question from \([^;]*\);.*/\1/p' | head -n 1)
  w "reply_$WFA_AGENT" reply "$asker" 'answer' ;;
esac
"""

    async def flow(wf):
        keys = {}
        for key, body in (("a", asker), ("b", askee), ("c", asker), ("d", askee)):
            keys[key] = await wf.agents.open(key, runtime=agent(tmp_path, key, body))
        await wf.route(keys["a"], keys["b"], purpose="Long wait")
        await wf.route(keys["c"], keys["d"], purpose="Short wait")
        assert (await keys["a"].run("Ask b.", timeout="40m")).value == "done"
        assert (await keys["c"].run("Ask d.", timeout="40m")).value == "done"

    started = time.time()
    result = await run_wf(flow, tmp_path, timeout="1h")
    [b_turn] = turns(result, "b")
    [d_turn] = turns(result, "d")
    assert abs(call_record(result, b_turn["call_id"])["deadline_at"] / 1000 - (started + 40 * 60)) < 30
    assert abs(call_record(result, d_turn["call_id"])["deadline_at"] / 1000 - (started + 15 * 60)) < 30

    # Where the run ends sooner, so does the turn a message starts.
    (tmp_path / "a.count").unlink()
    started = time.time()
    result = await run_wf(flow, tmp_path, timeout="5m", name="short")
    [b_turn] = turns(result, "b")
    assert abs(call_record(result, b_turn["call_id"])["deadline_at"] / 1000 - (started + 5 * 60)) < 30


async def test_await_reply_doesnt_block_and_the_reply_continues_the_same_turn(tmp_path):
    asker = r"""
case "$PROMPT" in *"b's reply to your question"*) answer "$(printf '%s' "$PROMPT" | grep -c 'In the queue')"; exit 0 ;; esac
w ask send --await-reply b <<'EOF'
Client or queue?
EOF
touch "$OUT/a_went_on"
"""
    askee = r"""
wait_for a_went_on
i=0; until "$WFA" peers --json | grep -q '"awaiting-reply"' || [ $i -gt 200 ]; do sleep 0.05; i=$((i+1)); done
w b_peers peers --json
w b_reply reply a 'In the queue.'
"""

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", asker))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", askee))
        await wf.route(a, b, purpose="Design questions")
        turn = await a.run("Ask b.", timeout="10m")
        assert turn.value == "1"

    result = await run_wf(flow, tmp_path)
    ask = sent(tmp_path, "ask").out
    assert "it reads it now, in a turn of its own" in ask and "its reply starts your next turn" in ask
    assert '"state":"awaiting-reply"' in sent(tmp_path, "b_peers").out.replace(" ", "")
    assert sent(tmp_path, "b_reply").out == "wfa: replied to a; it reads it now: your reply starts its next turn.\n"
    assert attempts(tmp_path, "a") == 2 and call_id(tmp_path, "a", 1) == call_id(tmp_path, "a", 2)
    again = prompt(tmp_path, "a", 2)
    assert again.startswith("b's reply to your question:\n<<<\nIn the queue.\n>>>") and "The turn is still open." in again
    assert [t["agent"] for t in turns(result)] == ["b", "a"] and turns(result, "a")[0]["started_by"] == "workflow"


async def test_owing_at_the_end_of_a_message_turn_is_reminded_once_then_the_asker_hears_no_answer(tmp_path):
    asker = f"""
case "$PROMPT" in *"{NO_ANSWER}"*) answer no-answer; exit 0 ;; esac
w ask send --await-reply b 'q?'
"""

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", asker))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", "exit 0"))
        await wf.route(a, b, purpose="Questions")
        assert (await a.run("Ask b.")).value == "no-answer"

    result = await run_wf(flow, tmp_path)
    assert attempts(tmp_path, "b") == 2
    assert prompt(tmp_path, "b", 2).startswith(
        "You ended your turn without replying to a. Reply now (wfa reply a), then end your turn."
    )
    assert "A question from a" not in prompt(tmp_path, "b", 2)
    assert "From the run:\n<<<\nThere is no answer to your question: b ended its turn without replying.\n>>>" in prompt(
        tmp_path, "a", 2
    )
    assert [(s, t, kind) for s, t, kind, _ in sent_mail(result)] == [("a", "b", "question"), ("b", "a", "notice")]
    [b_turn] = turns(result, "b")
    assert b_turn["started_by"] == "message" and b_turn["outcome"]["kind"] == "answered"


async def test_owing_at_the_end_of_a_workflow_turn_is_reminded_with_the_turns_prompt(tmp_path):
    asker = r"""
case "$PROMPT" in *"b's reply"*) answer replied; exit 0 ;; esac
wait_for b_working
w ask send --await-reply b 'q?'
"""
    worker = f"""
case "$PROMPT" in
  *"{REMINDED}"*) w b_reply reply a 'answer'; answer worked; exit 0 ;;
  *"A question from a"*) exit 0 ;;
esac
touch "$OUT/b_working"
i=0; until "$WFA" peers --json | tr -d ' \\n' | grep -q '"owes":\\["a"\\]' || [ $i -gt 200 ]; do sleep 0.05; i=$((i+1)); done
"""

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", asker))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", worker))
        await wf.route(a, b, purpose="Questions")
        async with anyio.create_task_group() as group:
            group.start_soon(a.run, "Ask b.")
            assert (await b.run("Work on the thing.")).value == "worked"

    await run_wf(flow, tmp_path)
    assert sent(tmp_path, "ask").out.endswith(
        "it reads it when its current turn ends.\nwfa: its reply starts your next turn; "
        + sent(tmp_path, "ask").out.split("its reply starts your next turn; ")[1]
    )
    # The question was read when b's attempt ended, continuing its turn; ending that still owing: reminded.
    assert prompt(tmp_path, "b", 2).startswith("A question from a; it awaits your reply (wfa reply a):")
    reminder = prompt(tmp_path, "b", 3)
    assert reminder.startswith("You ended your turn without replying to a. Reply now (wfa reply a)")
    assert f"result {call_id(tmp_path, 'b', 1)}" in reminder
    sent(tmp_path, "b_reply")
    assert attempts(tmp_path, "b") == 3 and len({call_id(tmp_path, "b", k) for k in (1, 2, 3)}) == 1


async def test_a_message_to_an_agent_awaiting_a_reply_is_read_with_the_reply(tmp_path):
    asker = r"""
case "$PROMPT" in *"b's reply"*) answer replied; exit 0 ;; esac
w ask send --await-reply b 'q?'
"""
    askee = r"""
i=0; until "$WFA" peers --json | grep -q '"awaiting-reply"' || [ $i -gt 200 ]; do sleep 0.05; i=$((i+1)); done
w fyi send a 'fyi: still looking'
sleep 0.5
cp "$OUT/a.count" "$OUT/a_attempts_before_reply"
w b_reply reply a 'found it'
"""

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", asker))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", askee))
        await wf.route(a, b, purpose="Both ways", both_ways=True)
        assert (await a.run("Ask b.")).value == "replied"

    await run_wf(flow, tmp_path)
    assert "it reads it with the reply it awaits" in sent(tmp_path, "fyi").out
    assert (tmp_path / "a_attempts_before_reply").read_text().strip() == "1"
    both = prompt(tmp_path, "a", 2)
    assert "A message from b:\n<<<\nfyi: still looking\n>>>" in both and "b's reply to your question" in both
    assert attempts(tmp_path, "a") == 2


async def test_a_reply_can_ask_back(tmp_path):
    asker = r"""
case "$PROMPT" in *"A question from b"*) w a_answers reply b 'yes'; answer done; exit 0 ;; esac
w ask send --await-reply b 'Client or queue?'
"""
    askee = r"""
case "$PROMPT" in
  *"a's reply"*) exit 0 ;;
  *"A question from a"*) w back reply --await-reply a 'The queue. May I move it now?' ;;
esac
"""

    async def flow(wf):
        a = await wf.agents.open("a", runtime=agent(tmp_path, "a", asker))
        b = await wf.agents.open("b", runtime=agent(tmp_path, "b", askee))
        await wf.route(a, b, purpose="Questions", max_messages=4)
        assert (await a.run("Ask b.")).value == "done"
        await message_turn_ended(wf, "b")  # b's turn goes on with a's answer: the run ends after it

    result = await run_wf(flow, tmp_path)
    assert "wfa: you await a's reply" in sent(tmp_path, "back").out
    sent(tmp_path, "a_answers")
    assert [(s, t, kind) for s, t, kind, _ in sent_mail(result)] == [
        ("a", "b", "question"),
        ("b", "a", "question"),
        ("a", "b", "reply"),
    ]
    assert attempts(tmp_path, "b") == 2  # the answer to its question back continued its message turn
