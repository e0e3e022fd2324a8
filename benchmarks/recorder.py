"""The Recorder's appends against a plain loop encoding and appending the same records, on asyncio and trio.

Each measure runs ours and the baseline in the same process, several rounds each, in a
fresh run directory each round, and keeps the best round of each, so a noisy machine
hurts both alike. Prints ``name: ours=… baseline=… ratio=…`` with events per second
(higher is better; ratio = ours / baseline):

- ``ask_*``: ``AGENTS`` tasks each asking ``ToolCalled`` ``EVENTS / AGENTS`` times, as
  agents' tool calls do (each waits until its line is written);
- ``appends_*``: the same asks through the Recorder's ``Appends`` (write-through asks: each a
  message handled in its asker's task with nothing queued, so no schedule point: one write
  before it is answered);
- ``tell_*``: one task telling ``Logged`` ``EVENTS`` times, as the broker logs;
- ``wflog_*``: ``EVENTS`` lines put on the Recorder's ``LogLines``, as ``wf.log`` does.

Floors, against the same baseline, to say what the Recorder could reach at best: ``kernel_ask_*``
and ``kernel_tell_*`` send the same messages to an actor whose handlers do nothing;
``yields_*`` is ``AGENTS`` tasks passing one checkpoint an event, with nothing written at all
(the event loop's own cost of an ask that waits at all, which ``appends_*``'s askers don't pay).

The baseline is one loop: encode the record, ``os.write`` the line to a file opened
``O_APPEND``, and one fsync at the end (ours ends with the run's end, which fsyncs too).
Goal: ours ≥ 250,000 events/s on both backends.

Run: PYTHONPATH=. python benchmarks/recorder.py
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import anyio

from agentswf.actors import Actor, Supervisor, handler
from agentswf.actors.wakeup import checkpoint
from agentswf.engine.record.layout import encode
from agentswf.engine.record.lines import Logged, ToolCalled
from agentswf.engine.record.recorder import Appends, LogLines, Recorder, RecordGaps

EVENTS = 50_000
"""Records appended per round."""
AGENTS = 100
"""Concurrent askers in the ``ask_*`` measure."""
ROUNDS = 5
"""Rounds per measure; the best is kept."""
CAPACITY = 1024
"""The Recorder's mailbox capacity (as a run gives it)."""


def tool_call(agent: int, i: int) -> ToolCalled:
    return ToolCalled(
        call_id=f"c{agent}-{i}",
        turn_call_id=f"t{agent}",
        agent=f"agent-{agent}",
        tool="echo",
        input={"n": i},
        outcome="ok",
        result=i,
        started_at=1.0,
        ended_at=2.0,
    )


def log_line(i: int) -> Logged:
    return Logged(1.0, "step", {"i": i})


class Sink(Actor):
    """The kernel's floor: takes the same messages and does nothing."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__()

    @handler
    def tool_called(self, msg: ToolCalled) -> bool:
        return True

    @handler
    def logged(self, msg: Logged) -> None:
        pass

    @handler
    def record_gaps(self, msg: RecordGaps) -> None:
        pass


async def ours_ask(run_dir: Path, actor: type[Actor] = Recorder) -> float:
    each = EVENTS // AGENTS
    calls = [[tool_call(agent, i) for i in range(each)] for agent in range(AGENTS)]
    async with Supervisor("bench") as sup:
        ref = sup.spawn(actor, run_dir, capacity=CAPACITY)

        async def agent(mine: list[ToolCalled]) -> None:
            for call in mine:
                assert await ref.ask(call)

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for mine in calls:
                tg.start_soon(agent, mine)
        assert await ref.ask(RecordGaps()) is None  # everything written and fsynced
        return each * AGENTS / (time.perf_counter() - start)


async def ours_appends(run_dir: Path) -> float:
    each = EVENTS // AGENTS
    calls = [[tool_call(agent, i) for i in range(each)] for agent in range(AGENTS)]
    appends = Appends()
    async with Supervisor("bench") as sup:
        ref = sup.spawn(Recorder, run_dir, None, appends, capacity=CAPACITY)

        async def agent(mine: list[ToolCalled]) -> None:
            for call in mine:
                assert await appends.ask(call)

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for mine in calls:
                tg.start_soon(agent, mine)
        assert await ref.ask(RecordGaps()) is None
        return each * AGENTS / (time.perf_counter() - start)


async def ours_tell(run_dir: Path, actor: type[Actor] = Recorder) -> float:
    lines = [log_line(i) for i in range(EVENTS)]
    async with Supervisor("bench") as sup:
        ref = sup.spawn(actor, run_dir, capacity=CAPACITY)
        start = time.perf_counter()
        for line in lines:
            await ref.tell(line)
        assert await ref.ask(RecordGaps()) is None
        return EVENTS / (time.perf_counter() - start)


async def ours_wflog(run_dir: Path) -> float:
    lines = [log_line(i) for i in range(EVENTS)]
    logs = LogLines()
    async with Supervisor("bench") as sup:
        ref = sup.spawn(Recorder, run_dir, logs, capacity=CAPACITY)
        start = time.perf_counter()
        for line in lines:
            logs.put(line)
        assert await ref.ask(RecordGaps()) is None
        return EVENTS / (time.perf_counter() - start)


async def yields(run_dir: Path) -> float:
    each = EVENTS // AGENTS

    async def agent() -> None:
        for _ in range(each):
            await checkpoint()

    start = time.perf_counter()
    async with anyio.create_task_group() as agents:
        for _ in range(AGENTS):
            agents.start_soon(agent)
    return each * AGENTS / (time.perf_counter() - start)


async def kernel_ask(run_dir: Path) -> float:
    return await ours_ask(run_dir, Sink)


async def kernel_tell(run_dir: Path) -> float:
    return await ours_tell(run_dir, Sink)


def plain_loop(path: Path, records: list) -> float:
    start = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        for record in records:
            os.write(fd, encode(record) + b"\n")
        os.fsync(fd)
    finally:
        os.close(fd)
    return len(records) / (time.perf_counter() - start)


async def baseline_ask(run_dir: Path) -> float:
    each = EVENTS // AGENTS
    return plain_loop(run_dir / "tools.jsonl", [tool_call(agent, i) for agent in range(AGENTS) for i in range(each)])


async def baseline_tell(run_dir: Path) -> float:
    return plain_loop(run_dir / "log.jsonl", [log_line(i) for i in range(EVENTS)])


async def best(ours, baseline, root: Path) -> tuple[float, float]:
    """The best of `ROUNDS` rounds of each, taken in turns, so a load that comes and goes hits both."""
    rates: tuple[list[float], list[float]] = ([], [])
    for _ in range(ROUNDS):
        for measure, kept in ((ours, rates[0]), (baseline, rates[1])):
            kept.append(await measure(Path(tempfile.mkdtemp(dir=root))))
    return max(rates[0]), max(rates[1])


async def main(backend: str) -> None:
    with tempfile.TemporaryDirectory(prefix="awf-bench-recorder-", dir=os.environ.get("BENCH_DIR")) as root:
        measures = (
            ("ask", ours_ask, baseline_ask),
            ("appends", ours_appends, baseline_ask),
            ("tell", ours_tell, baseline_tell),
            ("wflog", ours_wflog, baseline_tell),
            ("kernel_ask", kernel_ask, baseline_ask),
            ("kernel_tell", kernel_tell, baseline_tell),
            ("yields", yields, baseline_ask),
        )
        for name, ours, baseline in measures:
            o, b = await best(ours, baseline, Path(root))
            print(f"{name}_{backend}: ours={o:,.0f}/s baseline={b:,.0f}/s ratio={o / b:.2f}", flush=True)


if __name__ == "__main__":
    for backend in ("asyncio", "trio"):
        anyio.run(main, backend, backend=backend)
