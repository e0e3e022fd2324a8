"""Every exit code and refusal of `wfa result` (and `wfa waiting` for a shell agent), through a
real launcher process run by a real shell agent in a real run."""

from __future__ import annotations

import pytest

from .kit import N, candidates, lines, rc, run_wf, shell_agent, text, turns

pytestmark = pytest.mark.anyio


async def test_accepted_exits_0(tmp_path):
    runtime = shell_agent(
        tmp_path,
        "agent",
        '"$WFA" result "$WFA_CALL_ID" --n 7 >"$OUT/out" 2>"$OUT/err"; echo $? >"$OUT/rc"',
    )

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        turn = await agent.run("Count.", schema=N, timeout="10s")
        return {"kind": turn.outcome.kind, "n": turn.value.n, "call": turn.call_id}

    result = await run_wf(fn, tmp_path)
    assert result.outcome == "completed", result.reason
    assert result.value["kind"] == "answered" and result.value["n"] == 7
    assert rc(tmp_path, "rc") == 0
    assert text(tmp_path, "out") == "wfa: result accepted.\n"
    assert text(tmp_path, "err") == ""
    seen = candidates(result, result.value["call"])
    assert [(c["args"], c["accepted"]) for c in seen] == [(["--n", "7"], True)]


async def test_json_on_standard_input_is_accepted(tmp_path):
    runtime = shell_agent(
        tmp_path,
        "agent",
        """"$WFA" result "$WFA_CALL_ID" <<'WF_JSON' >"$OUT/out" 2>&1
{"n": 12}
WF_JSON
echo $? >"$OUT/rc\"""",
    )

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        return (await agent.run("Count.", schema=N, timeout="10s")).value.n

    result = await run_wf(fn, tmp_path)
    assert result.value == 12 and rc(tmp_path, "rc") == 0


async def test_invalid_result_keeps_the_turn_open_for_a_fix(tmp_path):
    runtime = shell_agent(
        tmp_path,
        "agent",
        """
"$WFA" result "$WFA_CALL_ID" --n seven 2>"$OUT/err1"; echo $? >"$OUT/rc1"
"$WFA" result "$WFA_CALL_ID" --count 7 2>"$OUT/err2"; echo $? >"$OUT/rc2"
"$WFA" result "$WFA_CALL_ID" --n 7 >"$OUT/out3"; echo $? >"$OUT/rc3"
""",
    )

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        turn = await agent.run("Count.", schema=N, timeout="10s")
        return {"n": turn.value.n, "call": turn.call_id, "nudged": turn.nudged}

    result = await run_wf(fn, tmp_path)
    assert result.value["n"] == 7 and not result.value["nudged"]
    assert rc(tmp_path, "rc1") == 1 and rc(tmp_path, "rc2") == 1 and rc(tmp_path, "rc3") == 0
    err1, err2 = text(tmp_path, "err1"), text(tmp_path, "err2")
    assert "refused (invalid-result)" in err1 and "takes an integer" in err1
    assert "usage:" in err1 and "--n <integer>" in err1
    assert "refused (invalid-result)" in err2 and "unknown flag --count" in err2
    seen = candidates(result, result.value["call"])
    assert [c["accepted"] for c in seen] == [False, False, True]
    assert "takes an integer" in seen[0]["error"] and seen[2]["args"] == ["--n", "7"]


async def test_unknown_operation(tmp_path):
    runtime = shell_agent(
        tmp_path,
        "agent",
        """
"$WFA" result deadbeef --n 1 2>"$OUT/err"; echo $? >"$OUT/rc"
"$WFA" result "$WFA_CALL_ID" --n 1
""",
    )

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        return (await agent.run("Count.", schema=N, timeout="10s")).outcome.kind

    result = await run_wf(fn, tmp_path)
    assert result.value == "answered"
    assert rc(tmp_path, "rc") == 1
    assert "refused (unknown-operation)" in text(tmp_path, "err") and "deadbeef" in text(tmp_path, "err")


async def test_wrong_agent(tmp_path):
    # a hangs on to its call id (it writes it, then waits to be told to answer);
    # b answers a's call id while a's turn is open, then its own.
    runtime_a = shell_agent(
        tmp_path,
        "a",
        """
echo "$WFA_CALL_ID" >"$OUT/a_call"
while [ ! -e "$OUT/b_done" ]; do sleep 0.01; done
"$WFA" result "$WFA_CALL_ID" --n 1
""",
    )
    runtime_b = shell_agent(
        tmp_path,
        "b",
        """
while [ ! -e "$OUT/a_call" ]; do sleep 0.01; done
"$WFA" result "$(cat "$OUT/a_call")" --n 2 2>"$OUT/err"; echo $? >"$OUT/rc"
touch "$OUT/b_done"
"$WFA" result "$WFA_CALL_ID" --n 3
""",
    )

    async def fn(wf):
        a = await wf.agents.open("a", runtime=runtime_a)
        b = await wf.agents.open("b", runtime=runtime_b)
        turns = await wf.parallel([(a, "A"), (b, "B")], lambda pair: pair[0].run(pair[1], schema=N, timeout="10s"))
        return [turn.value.n for turn in turns]

    result = await run_wf(fn, tmp_path)
    assert result.value == [1, 3]
    assert rc(tmp_path, "rc") == 1
    assert "refused (wrong-agent)" in text(tmp_path, "err")


async def test_wrong_agent_for_an_ended_call_of_another_agent(tmp_path):
    runtime_a = shell_agent(tmp_path, "a", 'echo "$WFA_CALL_ID" >"$OUT/a_call"; "$WFA" result "$WFA_CALL_ID" --n 1')
    runtime_b = shell_agent(
        tmp_path,
        "b",
        '"$WFA" result "$(cat "$OUT/a_call")" --n 2 2>"$OUT/err"; echo $? >"$OUT/rc"; "$WFA" result "$WFA_CALL_ID" --n 3',
    )

    async def fn(wf):
        a = await wf.agents.open("a", runtime=runtime_a)
        b = await wf.agents.open("b", runtime=runtime_b)
        return [(await a.run("A", schema=N)).value.n, (await b.run("B", schema=N)).value.n]

    result = await run_wf(fn, tmp_path)
    assert result.value == [1, 3]
    assert rc(tmp_path, "rc") == 1 and "refused (wrong-agent)" in text(tmp_path, "err")


async def test_expired_operation_for_a_turn_that_timed_out(tmp_path):
    runtime = shell_agent(
        tmp_path,
        "agent",
        """
if [ "$WFA_TURN" = 1 ]; then
  echo "$WFA_CALL_ID" >"$OUT/first"
  sleep 1000
fi
"$WFA" result "$(cat "$OUT/first")" --n 1 2>"$OUT/err"; echo $? >"$OUT/rc"
"$WFA" result "$WFA_CALL_ID" --n 2
""",
    )

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        first = await agent.run("One.", schema=N, timeout=0.3)
        second = await agent.run("Two.", schema=N, timeout="10s")
        return [first.outcome.kind, second.value.n]

    result = await run_wf(fn, tmp_path)
    assert result.value == ["timed-out", 2]
    assert rc(tmp_path, "rc") == 1
    assert "refused (expired-operation)" in text(tmp_path, "err")


async def test_closed_operation_after_acceptance_and_for_an_earlier_turn(tmp_path):
    runtime = shell_agent(
        tmp_path,
        "agent",
        """
if [ "$WFA_TURN" = 1 ]; then
  echo "$WFA_CALL_ID" >"$OUT/first"
  "$WFA" result "$WFA_CALL_ID" --n 1
  "$WFA" result "$WFA_CALL_ID" --n 2 2>"$OUT/err_again"; echo $? >"$OUT/rc_again"
else
  "$WFA" result "$(cat "$OUT/first")" --n 3 2>"$OUT/err_earlier"; echo $? >"$OUT/rc_earlier"
  "$WFA" result "$WFA_CALL_ID" --n 4
fi
""",
    )

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        first = await agent.run("One.", schema=N, timeout="10s")
        second = await agent.run("Two.", schema=N, timeout="10s")
        return [first.value.n, second.value.n]

    result = await run_wf(fn, tmp_path)
    assert result.value == [1, 4]  # the second answer of turn 1 changed nothing
    for name in ("again", "earlier"):
        assert rc(tmp_path, f"rc_{name}") == 1
        assert "refused (closed-operation)" in text(tmp_path, f"err_{name}")


async def test_usage_errors_exit_2_and_send_nothing(tmp_path):
    runtime = shell_agent(
        tmp_path,
        "agent",
        """
"$WFA" result 2>"$OUT/err1" </dev/null; echo $? >"$OUT/rc1"
"$WFA" result --n 3 2>"$OUT/err2"; echo $? >"$OUT/rc2"
"$WFA" 2>"$OUT/err3"; echo $? >"$OUT/rc3"
"$WFA" frobnicate 2>"$OUT/err4"; echo $? >"$OUT/rc4"
""",
    )

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        turn = await agent.run("Count.", schema=N, timeout="10s", nudge=False)
        return {"kind": turn.outcome.kind, "call": turn.call_id}

    result = await run_wf(fn, tmp_path)
    assert result.value["kind"] == "unanswered"
    for i in (1, 2, 3, 4):
        assert rc(tmp_path, f"rc{i}") == 2
        assert "usage:" in text(tmp_path, f"err{i}")
    assert "needs a call id" in text(tmp_path, "err1")
    assert candidates(result, result.value["call"]) == []  # nothing reached the run


async def test_waiting_is_unsupported_for_a_shell_agent(tmp_path):
    runtime = shell_agent(
        tmp_path,
        "agent",
        """
"$WFA" waiting "$WFA_CALL_ID" --reason 'Running the tests' --timeout 10m 2>"$OUT/err1"; echo $? >"$OUT/rc1"
"$WFA" waiting "$WFA_CALL_ID" 2>"$OUT/err3"; echo $? >"$OUT/rc3"
"$WFA" result "$WFA_CALL_ID" --n 1
""",
    )

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        return (await agent.run("Count.", schema=N, timeout="10s")).value.n

    result = await run_wf(fn, tmp_path)
    assert result.value == 1
    assert rc(tmp_path, "rc1") == 1 and "waiting refused (unsupported-command)" in text(tmp_path, "err1")
    assert rc(tmp_path, "rc3") == 2 and "needs --reason" in text(tmp_path, "err3")


async def test_twelve_racing_answers_exactly_one_accepted(tmp_path):
    runtime = shell_agent(
        tmp_path,
        "agent",
        """
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
  ( "$WFA" result "$WFA_CALL_ID" --n "$i" >"$OUT/out$i" 2>"$OUT/err$i"; echo $? >"$OUT/rc$i" ) &
done
wait
""",
    )

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        turn = await agent.run("Count.", schema=N, timeout="20s")
        return {"n": turn.value.n, "call": turn.call_id}

    result = await run_wf(fn, tmp_path)
    codes = {i: rc(tmp_path, f"rc{i}") for i in range(1, 13)}
    winners = [i for i, code in codes.items() if code == 0]
    assert len(winners) == 1, codes
    assert sorted(codes.values()) == [0] + [1] * 11
    for i in codes:
        if i in winners:
            assert text(tmp_path, f"out{i}") == "wfa: result accepted.\n"
        else:
            assert "refused (closed-operation)" in text(tmp_path, f"err{i}")
    assert result.value["n"] == winners[0]
    seen = candidates(result, result.value["call"])
    assert [c["accepted"] for c in seen] == [True]
    assert len(turns(result)) == 1


async def test_the_prompt_teaches_the_launcher_and_call_id(tmp_path):
    runtime = shell_agent(tmp_path, "agent", 'cat >"$OUT/prompt"; echo "$WFA" >"$OUT/wfa"; "$WFA" result "$WFA_CALL_ID" --n 1')

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime, instructions="You count things.")
        turn = await agent.run("Count the files.", schema=N)
        return turn.call_id

    result = await run_wf(fn, tmp_path)
    prompt = text(tmp_path, "prompt")
    launcher = lines(tmp_path, "wfa")[0]
    assert prompt.startswith("You count things.\n\nCount the files.")
    assert f"{launcher} result {result.value} --n '<integer>'" in prompt
