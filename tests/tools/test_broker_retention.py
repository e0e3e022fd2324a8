"""A finished tool call leaves nothing of itself in the broker: its watchdog entries name the
call by id, and its signal holds no reference back to the call, so no reference cycle keeps a
call's input, handler state and task alive until the garbage collector runs (at 1,000 agents ×
10 calls, such cycles held 10 MB)."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import anyio
import pytest

from agentswf import tool
from agentswf.actors import Actor, Supervisor, handler
from agentswf.engine.record.recorder import Appends, Recorder
from agentswf.engine.tools.approvals import ApprovalDesk
from agentswf.engine.tools.broker import WATCHDOG_SLACK, RunTool, ToolBroker, ToolCalls, ToolDone
from agentswf.engine.tools.call import ToolCall

pytestmark = pytest.mark.anyio


class Caller(Actor):
    """Stands in for the agent's actor (told only of an abandoned handler's end: never here)."""

    @handler
    def tool_done(self, msg: ToolDone) -> None:
        raise AssertionError(f"no handler here is abandoned: {msg}")


async def noop(n: int) -> int:
    return n


def _sync_noop(n: int) -> int:
    return n


@pytest.mark.parametrize("fn", [noop, _sync_noop], ids=["async", "sync"])
async def test_a_finished_call_is_freed_without_the_garbage_collector(tmp_path: Path, fn) -> None:
    done = []
    the_tool = tool(fn, description="Do nothing.")
    gc.disable()  # what a cycle would keep, nothing but the collector would free
    try:
        async with Supervisor("t") as supervisor:
            appends = Appends()
            recorder = supervisor.spawn(Recorder, tmp_path, None, appends, name="recorder", capacity=64)
            desk = supervisor.spawn(ApprovalDesk, recorder, name="desk", capacity=64)
            tool_calls = ToolCalls(recorder, appends, desk, (), None)
            supervisor.spawn(ToolBroker, tool_calls, name="broker", capacity=64)
            caller = supervisor.spawn(Caller, name="caller", capacity=64)
            calls = []
            for index in range(WATCHDOG_SLACK * 3):  # past the watchdog's slack: its heap is pruned
                call = ToolCall(f"c{index}", "a", "noop")
                calls.append(weakref.ref(call))
                with anyio.fail_after(5):
                    done.append(await tool_calls.call(RunTool(
                        call=call, tool=the_tool, args=[], input='{"n": 1}', deadline=anyio.current_time() + 600,
                        turn_call_id="turn", agent_ref=caller, launcher="wfa",
                    )))
                del call
            assert [got.ok for got in done] == [True] * len(calls)
            alive = [ref for ref in calls if ref() is not None]
            assert len(alive) <= WATCHDOG_SLACK + 1, f"{len(alive)} of {len(calls)} finished calls are still referenced"
            assert calls[0]() is None
            await supervisor.stop()
    finally:
        gc.enable()
