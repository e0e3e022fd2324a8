"""`wfa waiting` where the harness supports it (scripted agents), and what a granted wait does."""

from __future__ import annotations

import re
import time

import anyio
import pytest

from agentswf.engine.rules import AttemptEnding
from agentswf.testing import Script, answer, run_workflow, silent

from ..harnesses.kit import N

pytestmark = pytest.mark.anyio


async def test_waiting_is_granted_until_the_deadline(tmp_path):
    from agentswf import workflow

    seen = {}

    async def script(turn):
        before = time.time() * 1000
        response = await turn.waiting("Running the full test suite", timeout_seconds=600)
        seen["response"] = response
        seen["before"] = before
        return {"n": 1}

    @workflow(name="w", description="waits")
    async def wf_(wf):
        agent = await wf.agents.open("a", runtime="shell:true")
        return (await agent.run("Work.", schema=N, timeout=5)).value.n

    run = await run_workflow(wf_, agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == 1
    response = seen["response"]
    assert response.ok and response.exit == 0
    value = response.value
    # never past the turn's deadline, about 5 s away
    assert value["wait_until_ms"] == value["deadline_ms"]
    assert seen["before"] + 3000 < value["deadline_ms"] < seen["before"] + 7000
    assert f"waiting granted until {value['wait_until_ms']}" in response.stdout
    assert f"deadline is {value['deadline_ms']}" in response.stdout


async def test_waiting_without_a_deadline_uses_the_default(tmp_path):
    from agentswf import workflow

    seen = {}

    async def script(turn):
        seen["at"] = time.time() * 1000
        seen["default"] = await turn.waiting("Building")
        seen["short"] = await turn.waiting("Building", timeout_seconds=1)
        return {"n": 1}

    @workflow(name="w", description="waits")
    async def wf_(wf):
        agent = await wf.agents.open("a", runtime="shell:true")
        return (await agent.run("Work.", schema=N)).value.n

    # no turn timeout, and a run timeout far off: the deadline is the run's (10 minutes)
    run = await run_workflow(wf_, agents={"a": answer(script)}, run_root=tmp_path, timeout="10m")
    assert run.value == 1
    default, short = seen["default"].value, seen["short"].value
    assert abs(default["wait_until_ms"] - (seen["at"] + 120_000)) < 5000
    assert abs(short["wait_until_ms"] - (seen["at"] + 30_000)) < 5000  # at least 30 s
    assert default["deadline_ms"] is not None and default["deadline_ms"] > default["wait_until_ms"]


async def test_waiting_with_a_blank_reason_is_refused(tmp_path):
    from agentswf import workflow

    seen = {}

    async def script(turn):
        seen["blank"] = await turn.waiting("   ")
        seen["long"] = await turn.waiting("x" * 2049)
        return {"n": 1}

    @workflow(name="w", description="waits")
    async def wf_(wf):
        agent = await wf.agents.open("a", runtime="shell:true")
        return (await agent.run("Work.", schema=N, timeout=5)).value.n

    run = await run_workflow(wf_, agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == 1
    for key in ("blank", "long"):
        assert seen[key].code == "invalid-request" and seen[key].exit == 1


async def test_waiting_after_acceptance_is_closed_operation(tmp_path):
    from agentswf import workflow

    seen = {}

    async def script(turn):
        assert (await turn.result({"n": 3})).ok
        seen["waiting"] = await turn.waiting("more work")
        seen["again"] = await turn.result({"n": 4})
        seen["unknown"] = await turn.request("waiting", call_id="nope", reason="x", timeout_ms=None)

    @workflow(name="w", description="waits")
    async def wf_(wf):
        agent = await wf.agents.open("a", runtime="shell:true")
        return (await agent.run("Work.", schema=N, timeout=5)).value.n

    run = await run_workflow(wf_, agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == 3
    assert seen["waiting"].code == "closed-operation" and seen["waiting"].exit == 1
    assert seen["again"].code == "closed-operation"
    assert seen["unknown"].code == "unknown-operation"


async def test_waiting_unsupported_when_the_harness_does_not_confirm(tmp_path):
    from agentswf import workflow

    seen = {}

    async def script(turn):
        seen["waiting"] = await turn.waiting("Building")
        return {"n": 1}

    @workflow(name="w", description="waits")
    async def wf_(wf):
        agent = await wf.agents.open("a", runtime="shell:true")
        return (await agent.run("Work.", schema=N, timeout=5)).value.n

    run = await run_workflow(wf_, agents={"a": answer(script)}, run_root=tmp_path, supports_waiting=False)
    assert run.value == 1
    assert seen["waiting"].code == "unsupported-command"


class WaitThenExit(Script):
    """An attempt that is granted a wait, then exits without answering."""

    async def play(self, turn):
        assert (await turn.waiting("Running the suite")).ok
        return AttemptEnding("exited")


@pytest.mark.virtual_time
async def test_a_granted_wait_holds_off_the_nudge(tmp_path):
    from agentswf import workflow

    @workflow(name="w", description="waits")
    async def wf_(wf):
        agent = await wf.agents.open("a", runtime="shell:true")
        turn = await agent.run("Work.", schema=N, timeout="90s")
        return {"kind": turn.outcome.kind, "nudged": turn.nudged}

    start = anyio.current_time()
    run = await run_workflow(wf_, agents={"a": WaitThenExit("silent")}, run_root=tmp_path)
    # the wait (two minutes by default) is cut to the turn's deadline: no nudge, the turn times out
    assert run.value == {"kind": "timed-out", "nudged": False}
    assert anyio.current_time() - start == pytest.approx(90, abs=1)


async def test_without_a_wait_the_silent_turn_is_nudged(tmp_path):
    from agentswf import workflow

    @workflow(name="w", description="waits")
    async def wf_(wf):
        agent = await wf.agents.open("a", runtime="shell:true")
        turn = await agent.run("Work.", schema=N, timeout=5)
        return {"kind": turn.outcome.kind, "nudged": turn.nudged}

    run = await run_workflow(wf_, agents={"a": [silent(), answer({"n": 2})]}, run_root=tmp_path)
    assert run.value == {"kind": "answered", "nudged": True}


@pytest.mark.virtual_time
async def test_the_nudge_comes_once_a_shorter_wait_ends(tmp_path):
    from agentswf import workflow

    seen = {}

    class ShortWait(Script):
        async def play(self, turn):
            assert (await turn.waiting("Running the suite", timeout_seconds=120)).ok
            seen["left"] = anyio.current_time()
            return AttemptEnding("exited")

    def nudged(turn):
        seen["nudge"] = (anyio.current_time(), turn.nudge)
        return {"n": 5}

    @workflow(name="w", description="waits")
    async def wf_(wf):
        agent = await wf.agents.open("a", runtime="shell:true")
        turn = await agent.run("Work.", schema=N, timeout="1h")
        return {"n": turn.value.n, "nudged": turn.nudged}

    run = await run_workflow(wf_, agents={"a": [ShortWait("silent"), answer(nudged)]}, run_root=tmp_path)
    assert run.value == {"n": 5, "nudged": True}
    at, was_nudge = seen["nudge"]
    assert was_nudge and at - seen["left"] == pytest.approx(120, abs=1)  # held off until the wait ended


async def test_a_granted_wait_reads_as_utc_times_and_seconds_left(tmp_path):
    from datetime import UTC, datetime

    from agentswf import workflow

    seen = {}

    async def script(turn):
        seen["response"] = await turn.waiting("Running the full test suite", timeout_seconds=60)
        return {"n": 1}

    @workflow(name="w", description="waits")
    async def wf_(wf):
        agent = await wf.agents.open("a", runtime="shell:true")
        return (await agent.run("Work.", schema=N, timeout=600)).value.n

    await run_workflow(wf_, agents={"a": answer(script)}, run_root=tmp_path)
    response = seen["response"]
    value = response.value
    until = datetime.fromtimestamp(value["wait_until_ms"] // 1000, UTC).isoformat()
    deadline = datetime.fromtimestamp(value["deadline_ms"] // 1000, UTC).isoformat()
    assert f"until {value['wait_until_ms']} Unix ms ({until}, in 60 s)" in response.stdout
    left = re.search(rf"deadline is {value['deadline_ms']} Unix ms \({re.escape(deadline)}, in (\d+) s\)", response.stdout)
    assert left and 590 <= int(left[1]) <= 600, response.stdout  # the turn has run a moment
