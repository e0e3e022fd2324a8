"""What the ToolBroker adds to a tool call, in process, against calling the handler directly.

    python benchmarks/broker.py [N]        (default N=2000)

Each call goes the whole broker path: its input read by the tool's schema, the policy
verdict, the handler in the call's task under the broker's watchdog, the result checked
(JSON, size, output schema), the call appended to the run's record by the Recorder (asked
through its Appends, as a run's broker asks), and the answer returned to the caller
(`ToolCalls.call`, awaited in the caller's task as an agent's connection does). The baseline calls the same handler directly and encodes its result
as JSON. Prints microseconds per call for each and the ratio (and the broker side's CPU per
call), on both backends, for a sync handler (a worker thread) and an async one (the loop).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import anyio
import msgspec

from agentswf import tool
from agentswf.actors import Actor, Supervisor, handler
from agentswf.engine.record.recorder import Appends, Recorder
from agentswf.engine.tools.approvals import ApprovalDesk
from agentswf.engine.tools.broker import RunTool, ToolBroker, ToolCalls, ToolDone
from agentswf.engine.tools.call import ToolCall


class Item(msgspec.Struct):
    id: str
    count: int


def handle(item: Item) -> str:
    return f"{item.id} seen {item.count} times"


async def handle_async(item: Item) -> str:
    return f"{item.id} seen {item.count} times"


class Caller(Actor):
    """Stands in for the agent's actor (told only of an abandoned handler's end: never here)."""

    @handler
    def tool_done(self, msg: ToolDone) -> None:
        pass


async def measure(n: int, is_async: bool) -> tuple[float, float, float]:
    noop = tool(handle_async if is_async else handle, input=Item, description="Count one item.")
    value = Item("b1", 3)
    given = msgspec.json.encode(value).decode()
    start = time.perf_counter()
    for _ in range(n):
        got = noop.invoke(value, ToolCall("c", "a", "count"))
        msgspec.json.encode(await got if is_async else got)
    direct = (time.perf_counter() - start) / n
    with tempfile.TemporaryDirectory(prefix="awf-bench-") as root:
        async with Supervisor("bench") as supervisor:
            appends = Appends()
            recorder = supervisor.spawn(Recorder, Path(root), None, appends, name="recorder", capacity=64)
            desk = supervisor.spawn(ApprovalDesk, recorder, name="desk", capacity=64)
            calls = ToolCalls(recorder, appends, desk, (), None)
            supervisor.spawn(ToolBroker, calls, name="broker", capacity=64)
            caller = supervisor.spawn(Caller, name="caller", capacity=64)
            start, cpu = time.perf_counter(), time.process_time()
            for index in range(n):
                deadline = anyio.current_time() + 30
                await calls.call(
                    RunTool(
                        call=ToolCall(str(index), "a", "count"),
                        tool=noop,
                        args=[],
                        input=given,
                        deadline=deadline,
                        turn_call_id="turn",
                        agent_ref=caller,
                        launcher="wfa",
                    )
                )
            brokered, cpu = (time.perf_counter() - start) / n, (time.process_time() - cpu) / n
            await supervisor.stop()
    return brokered, cpu, direct


def main(argv: list[str]) -> None:
    n = int(argv[0]) if argv else 2000
    for backend in ("asyncio", "trio"):
        for is_async in (False, True):
            brokered, cpu, direct = anyio.run(measure, n, is_async, backend=backend)
            print(
                f"broker_call_{'async_' if is_async else ''}{backend}: ours={brokered * 1e6:.1f}us "
                f"baseline={direct * 1e6:.2f}us ratio={brokered / direct:.0f} added={(brokered - direct) * 1e6:.1f}us "
                f"cpu={cpu * 1e6:.1f}us"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
