"""Turns and tool calls on Temporal, with real shell agents: a tool call is answered by the
workflow's handler (an update), bad input is refused by the worker before it, a handler's
error reaches the agent, and a turn's deadline holds."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any
from uuid import uuid4

import anyio
import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

from temporalio.client import Client

import agentswf
from agentswf import tool, workflow
from agentswf.temporal import TemporalEngine, on_asyncio
from agentswf.temporal.turns import turns_ran

CALLER = """#!/bin/sh
cat >/dev/null
one=$("$WFA" tool add --a 2 --b 3 </dev/null 2>&1); c1=$?
two=$("$WFA" tool add --a x --b 3 </dev/null 2>&1); c2=$?
three=$("$WFA" tool boom </dev/null 2>&1); c3=$?
printf '%s|%s@@%s|%s@@%s|%s' "$one" "$c1" "$two" "$c2" "$three" "$c3" | "$WFA" result "$WFA_CALL_ID"
"""


def engine(address: str, tmp_path: Path) -> TemporalEngine:
    return TemporalEngine(address=address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "worker")


def script(tmp_path: Path, text: str) -> str:
    path = tmp_path / "agent.sh"
    path.write_text(text)
    path.chmod(0o700)
    return f"shell:{path}"


async def test_a_tool_call_is_answered_by_the_workflows_handler(temporal_address: str, tmp_path: Path) -> None:
    runtime = script(tmp_path, CALLER)

    @workflow(name="adder", description="An agent adds through a tool.")
    async def adder(wf):  # type: ignore[no-untyped-def]
        calls: list[tuple[int, int]] = []

        def add(a: int, b: int) -> int:
            """Add two whole numbers."""
            calls.append((a, b))
            return a + b

        def boom() -> str:
            """Always fails."""
            raise ValueError("no boom today")

        agent = await wf.agents.open("adder", runtime=runtime, tools={"add": tool(add), "boom": tool(boom)})
        turn = await agent.run("Add.")
        return {"said": turn.value if turn.answered else turn.outcome.reason, "calls": calls}

    result = await agentswf.run(adder, run_root=tmp_path / "runs", engine=engine(temporal_address, tmp_path))
    assert result.outcome == "completed", result.reason
    one, two, three = result.value["said"].split("@@")
    assert one == "5|0"
    assert two.endswith("|3") and "invalid-input" in two  # refused by the worker: the handler never saw it
    assert three == "wfa: tool failed: no boom today|1"
    assert result.value["calls"] == [[2, 3]]


async def test_a_turns_deadline_holds_on_temporal(temporal_address: str, tmp_path: Path) -> None:
    runtime = script(tmp_path, "#!/bin/sh\nsleep 30\n")

    @workflow(name="sleeper", description="An agent that never answers in time.")
    async def sleeper(wf):  # type: ignore[no-untyped-def]
        agent = await wf.agents.open("sleeper", runtime=runtime)
        turn = await agent.run("Answer.", timeout="1s", nudge=False)
        return turn.outcome.kind

    result = await agentswf.run(sleeper, run_root=tmp_path / "runs", engine=engine(temporal_address, tmp_path))
    assert result.outcome == "completed", result.reason
    assert result.value == "timed-out"


async def test_a_cancelled_run_cancels_its_workflow_and_stops_its_agent(temporal_address: str, tmp_path: Path) -> None:
    mark = tmp_path / "started"
    runtime = script(tmp_path, f'#!/bin/sh\n: > "{mark}"\nsleep 58.765\n')

    @workflow(name="abandoned", description="A turn its caller gives up on.")
    async def abandoned(wf):  # type: ignore[no-untyped-def]
        agent = await wf.agents.open("waiter", runtime=runtime)
        return (await agent.run("Wait.", timeout="2m")).outcome.kind

    runs = tmp_path / "runs"
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: agentswf.run(abandoned, run_root=runs, engine=engine(temporal_address, tmp_path)))
        with anyio.fail_after(30):
            while not mark.exists():
                await anyio.sleep(0.05)
        group.cancel_scope.cancel()
    [record] = runs.glob("abandoned/*/temporal.json")
    workflow_id = json.loads(record.read_text())["workflow_id"]
    ending = await on_asyncio(functools.partial(_result, temporal_address, workflow_id))
    assert ending["outcome"] == "cancelled"
    assert json.loads((record.parent / "output.json").read_text())["outcome"] == "cancelled"
    with anyio.fail_after(10):  # the turn's activity was cancelled, and its CLI stopped with it
        while _lingering("sleep 58.765"):
            await anyio.sleep(0.1)


async def _result(address: str, workflow_id: str) -> dict[str, Any]:
    client = await Client.connect(address)
    result: dict[str, Any] = await client.get_workflow_handle(workflow_id).result()
    return result


def _lingering(text: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in line:
            found.append(line)
    return found


async def test_a_worker_that_cant_run_the_agent_fails_the_turn_at_once(temporal_address: str, tmp_path: Path) -> None:
    @workflow(name="unrunnable", description="An agent no worker can start.")
    async def unrunnable(wf):  # type: ignore[no-untyped-def]
        agent = await wf.agents.open("nobody", runtime=agentswf.Runtime(harness="shell"))  # no command
        turn = await agent.run("Answer.", timeout="1m")
        return [turn.outcome.kind, turn.outcome.reason]

    started = anyio.current_time()
    result = await agentswf.run(unrunnable, run_root=tmp_path / "runs", engine=engine(temporal_address, tmp_path))
    assert result.value == ["failed", "the worker could not run the turn: a shell runtime needs command=[program, args…]"]
    assert anyio.current_time() - started < 10  # not tried again: another attempt won't help
    assert turns_ran(tmp_path / "worker", "unrunnable", result.run_id) == ["nobody-1-attempt1"]
