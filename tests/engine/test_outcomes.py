"""Each way a turn ends, and its deadline: shell agents and scripted ones."""

from __future__ import annotations

import json
import time

import anyio
import pytest

from agentswf import Answered, Blocked, Cancelled, Failed, TimedOut, Unanswered, workflow
from agentswf.testing import answer, blocked, failed, hang, run_workflow, silent, timed_out
from agentswf.wire.prompts import NUDGE_TEXT

from ..harnesses.kit import N, lines, run_wf, shell_agent, text, turns

pytestmark = pytest.mark.anyio


def kind_of(turn) -> dict:
    outcome = turn.outcome
    return {"kind": outcome.kind, "reason": getattr(outcome, "reason", None), "nudged": turn.nudged}


# Shell agents -------------------------------------------------------------------------------


async def test_unanswered_after_one_nudge(tmp_path):
    runtime = shell_agent(tmp_path, "agent", 'echo "$WFA_NUDGE" >>"$OUT/nudges"; cat >"$OUT/prompt$WFA_NUDGE"')

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        return kind_of(await agent.run("Count.", schema=N, timeout="10s"))

    result = await run_wf(fn, tmp_path)
    assert result.value["kind"] == "unanswered" and result.value["nudged"]
    assert "after a nudge" in result.value["reason"]
    assert lines(tmp_path, "nudges") == ["0", "1"]  # WFA_NUDGE=1 on the nudge, and only one
    assert text(tmp_path, "prompt1").startswith(NUDGE_TEXT)
    assert NUDGE_TEXT not in text(tmp_path, "prompt0")
    assert [t["outcome"]["kind"] for t in turns(result)] == ["unanswered"]


async def test_answered_on_the_nudge(tmp_path):
    runtime = shell_agent(
        tmp_path, "agent", 'echo "$WFA_NUDGE" >>"$OUT/nudges"; if [ "$WFA_NUDGE" = 1 ]; then "$WFA" result "$WFA_CALL_ID" --n 9; fi'
    )

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        turn = await agent.run("Count.", schema=N, timeout="10s")
        return [turn.value.n, turn.nudged]

    result = await run_wf(fn, tmp_path)
    assert result.value == [9, True] and lines(tmp_path, "nudges") == ["0", "1"]


async def test_no_nudge_when_nudge_is_false(tmp_path):
    runtime = shell_agent(tmp_path, "agent", 'echo "$WFA_NUDGE" >>"$OUT/nudges"')

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        return kind_of(await agent.run("Count.", schema=N, timeout="10s", nudge=False))

    result = await run_wf(fn, tmp_path)
    assert result.value["kind"] == "unanswered" and not result.value["nudged"]
    assert lines(tmp_path, "nudges") == ["0"]


async def test_failed_with_the_last_stderr_lines(tmp_path):
    runtime = shell_agent(
        tmp_path, "agent", 'i=1; while [ $i -le 30 ]; do echo "line $i" >&2; i=$((i+1)); done; echo "$WFA_NUDGE" >>"$OUT/nudges"; exit 3'
    )

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        return kind_of(await agent.run("Count.", schema=N, timeout="10s"))

    result = await run_wf(fn, tmp_path)
    assert result.value["kind"] == "failed" and not result.value["nudged"]
    reason = result.value["reason"]
    assert "status 3" in reason and "line 30" in reason and "line 11\n" in reason
    assert "line 10\n" not in reason  # only the last 20 lines
    assert lines(tmp_path, "nudges") == ["0"]  # a failed CLI isn't nudged


async def test_failed_with_nothing_on_stderr(tmp_path):
    runtime = shell_agent(tmp_path, "agent", "exit 4")

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        return kind_of(await agent.run("Count.", timeout="10s"))

    result = await run_wf(fn, tmp_path)
    assert result.value["kind"] == "failed"
    assert result.value["reason"] == "the agent's command exited with status 4 and printed nothing on standard error"


async def test_an_answer_then_a_failing_exit_is_answered(tmp_path):
    runtime = shell_agent(tmp_path, "agent", '"$WFA" result "$WFA_CALL_ID" --n 1; exit 5')

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        return (await agent.run("Count.", schema=N, timeout="10s")).value.n

    assert (await run_wf(fn, tmp_path)).value == 1


async def test_a_string_answer_by_json(tmp_path):
    runtime = shell_agent(tmp_path, "agent", """"$WFA" result "$WFA_CALL_ID" <<'WF_JSON'
"LGTM"
WF_JSON""")

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        return (await agent.run("Review.", timeout="10s")).value

    assert (await run_wf(fn, tmp_path)).value == "LGTM"


async def test_timed_out_at_the_deadline(tmp_path):
    runtime = shell_agent(tmp_path, "agent", "sleep 1000")

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        start = anyio.current_time()
        turn = await agent.run("Count.", schema=N, timeout=0.3)
        return {**kind_of(turn), "took": anyio.current_time() - start, "span": turn.ended_at - turn.started_at}

    result = await run_wf(fn, tmp_path)
    assert result.value["kind"] == "timed-out" and "deadline" in result.value["reason"]
    assert 0.25 < result.value["took"] < 1.5  # a turn can't outlive its timeout
    assert result.value["span"] < 1.5


async def test_an_answer_after_acceptance_waits_for_the_cli_not_past_the_deadline(tmp_path):
    # the CLI answers, then lingers: the turn ends answered at the deadline at the latest
    runtime = shell_agent(tmp_path, "agent", '"$WFA" result "$WFA_CALL_ID" --n 2; sleep 1000')

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        start = anyio.current_time()
        turn = await agent.run("Count.", schema=N, timeout=0.5)
        return [turn.outcome.kind, turn.value.n, anyio.current_time() - start]

    kind, n, took = (await run_wf(fn, tmp_path)).value
    assert (kind, n) == ("answered", 2) and took < 1.5


async def test_a_deadline_is_fixed_before_the_turn_is_queued(tmp_path):
    runtime = shell_agent(
        tmp_path, "agent", 'echo "$WFA_TURN" >>"$OUT/turns"; sleep 0.5; "$WFA" result "$WFA_CALL_ID" --n "$WFA_TURN"'
    )

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        results = {}

        async def first():
            results["first"] = await agent.run("One.", schema=N, timeout="10s")

        async def second():
            await anyio.sleep(0.05)  # asked second
            results["second"] = await agent.run("Two.", schema=N, timeout=0.2)

        async with anyio.create_task_group() as group:
            group.start_soon(first)
            group.start_soon(second)
        return {key: kind_of(turn) | {"n": turn.n, "call": turn.call_id} for key, turn in results.items()}

    result = await run_wf(fn, tmp_path)
    assert result.value["first"]["kind"] == "answered"
    second = result.value["second"]
    assert second["kind"] == "timed-out" and "waited for the agent's earlier turns" in second["reason"]
    assert lines(tmp_path, "turns") == ["1"]  # the second never started
    recorded = {t["call_id"]: t["outcome"]["kind"] for t in turns(result)}
    assert recorded == {result.value["first"]["call"]: "answered", second["call"]: "timed-out"}
    assert (result.run_dir / "calls" / second["call"] / "call.json").exists()


QUEUED_HOLD_SECONDS = 0.3  # the first turn goes on at least this long after the second is asked
QUEUED_TIMEOUT_SECONDS = 1.5  # the second's timeout: it starts with what is left of it


async def test_a_queued_turn_keeps_only_what_is_left_of_its_timeout(tmp_path):
    # The first turn ends only once the second has been asked, and then some: the second starts
    # at least QUEUED_HOLD_SECONDS after it was asked, whatever the machine's load, and its
    # deadline, fixed when it was asked, is before its start plus its timeout.
    runtime = shell_agent(
        tmp_path,
        "agent",
        'echo "$WFA_TURN" >>"$OUT/turns"; if [ "$WFA_TURN" = 1 ]; then '
        f'until [ -e "$OUT/asked" ]; do sleep 0.01; done; sleep {QUEUED_HOLD_SECONDS}; "$WFA" result "$WFA_CALL_ID" --n 1; '
        "else sleep 1000; fi",
    )

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        results = {}

        async def first():
            results["first"] = await agent.run("One.", schema=N, timeout="1m")

        async def second():
            await anyio.sleep(0.05)  # asked second: the first is asked before this sleep ends, however loaded
            results["asked"] = time.time()
            (tmp_path / "asked").touch()
            results["second"] = await agent.run("Two.", schema=N, timeout=QUEUED_TIMEOUT_SECONDS)

        async with anyio.create_task_group() as group:
            group.start_soon(first)
            group.start_soon(second)
        return [results["second"].outcome.kind, results["second"].call_id, results["asked"]]

    result = await run_wf(fn, tmp_path)
    kind, call, asked = result.value
    assert kind == "timed-out"
    assert lines(tmp_path, "turns") == ["1", "2"]  # the second started, after the first
    second = next(turn for turn in turns(result) if turn["call_id"] == call)
    deadline = (result.run_dir / "calls" / call / "call.json").read_text()
    deadline_at = json.loads(deadline)["deadline_at"] / 1000
    assert second["started_at"] >= asked + QUEUED_HOLD_SECONDS  # it waited behind the first
    assert asked + QUEUED_TIMEOUT_SECONDS - 0.01 <= deadline_at < second["started_at"] + QUEUED_TIMEOUT_SECONDS
    assert second["ended_at"] >= deadline_at - 0.01  # it ran until its deadline, the one fixed when it was asked


async def test_cancelled_by_parallel_fail_fast(tmp_path):
    runtime = shell_agent(tmp_path, "agent", 'echo "$WFA_CALL_ID" >"$OUT/call"; sleep 1000')

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)

        async def item(which):
            if which == "boom":
                while not (tmp_path / "call").exists():
                    await anyio.sleep(0.01)
                raise ValueError("boom")
            return await agent.run("Work.", schema=N, timeout="20s")

        try:
            await wf.parallel(["turn", "boom"], item)
        except ValueError as error:
            return f"raised {error}"

    result = await run_wf(fn, tmp_path)
    assert result.value == "raised boom"
    call = text(tmp_path, "call").strip()
    recorded = turns(result)
    assert [(t["call_id"], t["outcome"]["kind"]) for t in recorded] == [(call, "cancelled")]
    assert "cancelled" in recorded[0]["outcome"]["reason"]


async def test_the_run_timeout_bounds_a_turn_without_one(tmp_path):
    runtime = shell_agent(tmp_path, "agent", "sleep 1000")

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        await agent.run("Work.", schema=N)

    start = time.monotonic()
    result = await run_wf(fn, tmp_path, timeout=0.3)
    assert result.outcome == "timed-out" and "0.3s" in result.reason
    assert time.monotonic() - start < 2
    assert [t["outcome"]["kind"] for t in turns(result)] in (["cancelled"], ["timed-out"])


# Scripted agents -----------------------------------------------------------------------------


@workflow(name="one-turn", description="One turn of agent a, and how it ended.")
async def one_turn(wf, args: dict) -> dict:
    agent = await wf.agents.open("a", runtime="shell:true")
    turn = await agent.run("Work.", timeout=args.get("timeout"), nudge=args.get("nudge", True))
    outcome = turn.outcome
    return {
        "kind": outcome.kind,
        "answered": outcome.answered,
        "reason": getattr(outcome, "reason", None),
        "value": getattr(outcome, "value", None),
        "retryable": getattr(outcome, "retryable", None),
        "nudged": turn.nudged,
        "type": type(outcome).__name__,
    }


@pytest.mark.parametrize(
    "script, args, expected",
    [
        (answer("done"), {}, {"kind": "answered", "type": Answered.__name__, "value": "done", "answered": True}),
        ([silent(), silent()], {}, {"kind": "unanswered", "type": Unanswered.__name__, "nudged": True}),
        ([silent()], {"nudge": False}, {"kind": "unanswered", "nudged": False}),
        (failed("it broke", retryable=True), {}, {"kind": "failed", "type": Failed.__name__, "reason": "it broke",
                                                  "retryable": True}),
        (failed("it broke"), {}, {"kind": "failed", "retryable": False}),
        (blocked("a permission prompt"), {}, {"kind": "blocked", "type": Blocked.__name__,
                                              "reason": "a permission prompt"}),
        (timed_out("the CLI's own limit"), {}, {"kind": "timed-out", "type": TimedOut.__name__,
                                                "reason": "the CLI's own limit"}),
        (hang(), {"timeout": "20m"}, {"kind": "timed-out", "answered": False,
                                    "reason": "the turn's deadline passed before an answer was accepted"}),
    ],
)
@pytest.mark.virtual_time
async def test_each_outcome_scripted(tmp_path, script, args, expected):
    run = await run_workflow(one_turn, agents={"a": script}, args=args, run_root=tmp_path)
    for key, value in expected.items():
        assert run.value[key] == value, (key, run.value)
    assert [t["outcome"]["kind"] for t in run.turns] == [expected["kind"]]


async def test_cancelled_scripted_turn_is_recorded(tmp_path):
    @workflow(name="cancel", description="A turn cancelled by a sibling's error.")
    async def wf_(wf):
        agent = await wf.agents.open("a", runtime="shell:true")

        async def item(i):
            if i == 1:
                await anyio.sleep(0.1)
                raise KeyError("sibling")
            return await agent.run("Work.")

        await wf.parallel([0, 1], item)

    run = await run_workflow(wf_, agents={"a": hang()}, run_root=tmp_path)
    assert run.outcome == "failed" and "KeyError" in run.reason
    assert [t["outcome"]["kind"] for t in run.turns] == ["cancelled"]
    assert Cancelled.__name__ == "Cancelled"


async def test_turn_value_raises_saying_how_it_ended(tmp_path):
    @workflow(name="value", description="Reads the value of an unanswered turn.")
    async def wf_(wf):
        agent = await wf.agents.open("a", runtime="shell:true")
        turn = await agent.run("Work.")
        try:
            turn.value
        except ValueError as error:
            return str(error)

    run = await run_workflow(wf_, agents={"a": blocked("stuck")}, run_root=tmp_path)
    assert run.value == "turn 1 of a ended blocked: stuck"


@pytest.mark.virtual_time
async def test_a_cancelled_queued_turn_is_recorded_cancelled(tmp_path):
    @workflow(name="cancel-queued", description="Two turns on one agent, cancelled by a sibling's error.")
    async def wf_(wf):
        agent = await wf.agents.open("a", runtime="shell:true")

        async def item(i):
            if i == 2:
                await anyio.sleep(60)
                raise KeyError("sibling")
            await anyio.sleep(10 * i)  # turn 1 asked first, then turn 2, queued behind it
            return await agent.run(f"Work {i}.", timeout="10m")

        await wf.parallel([0, 1, 2], item)

    run = await run_workflow(wf_, agents={"a": hang()}, run_root=tmp_path)
    assert run.outcome == "failed" and "KeyError" in run.reason
    assert sorted((t["n"], t["outcome"]["kind"]) for t in run.turns) == [(1, "cancelled"), (2, "cancelled")]
