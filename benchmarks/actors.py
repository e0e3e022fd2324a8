"""Actor kernel overhead against a raw anyio memory-object-stream pair, on asyncio and trio.

Each measure runs ours and the baseline in the same process, several rounds each,
and keeps the best round of each, so a noisy machine hurts both alike. Prints
``name: ours=… baseline=… ratio=…`` with ratio = ours / baseline: seconds per ask
for ``ask_*`` (lower is better; goal ≤ 1.0), messages per second for ``tell_*``
(higher is better; goal ≥ 0.8). ``ask_timeout_*`` is the same ask given a timeout,
against the same baseline without one. ``ask_traced_*`` is the same ask under a supervisor
whose run trace is on (`agentswf.run(..., trace=True)`), against ours untraced: what
tracing costs when it is on (off, it is the plain ``ask_*``).
``start_soon_*``: seconds per background task an actor starts (and that ends at once),
against anyio's task group starting the same task. ``spawn_*``: seconds per actor spawned,
asked once and stopped, against a raw server task with its stream pair, one round trip, and
the streams closed.

Run: PYTHONPATH=. python benchmarks/actors.py
"""

from __future__ import annotations

import time
from typing import Any

import anyio
import msgspec

from agentswf.actors import Actor, Supervisor, Tracer, handler
from agentswf.engine.actor_trace import RunTrace

ASKS = 20_000
"""Round trips per round (asks)."""
TELLS = 100_000
"""One-way messages per round."""
ROUNDS = 5
"""Rounds per measure; the best is kept."""
ASK_TIMEOUT_S = 10.0
"""Timeout of each ask in the ``ask_timeout_*`` measure (seconds; never reached)."""
CAPACITY = 64
"""Mailbox capacity, and the baseline streams' buffer size (messages)."""
TASKS = 20_000
"""Background tasks started per round."""
SPAWNS = 2_000
"""Actors spawned per round."""


class Ping(msgspec.Struct):
    i: int


class Echo(Actor):
    @handler
    def ping(self, msg: Ping) -> int:
        return msg.i


class Sink(Actor):
    def __init__(self, total: int, done: anyio.Event) -> None:
        super().__init__()
        self.left = total
        self.done = done

    @handler
    def ping(self, msg: Ping) -> None:
        self.left -= 1
        if not self.left:
            self.done.set()


async def ours_ask(timeout: float | None = None, tracer: Tracer | None = None) -> float:
    async with Supervisor("bench", tracer=tracer) as sup:
        ref = sup.spawn(Echo, capacity=CAPACITY)
        start = time.perf_counter()
        for i in range(ASKS):
            await ref.ask(Ping(i), timeout=timeout)
        return (time.perf_counter() - start) / ASKS


async def ours_ask_with_timeout() -> float:
    """The same asks with a timeout, which costs a cancel scope each; the baseline has none."""
    return await ours_ask(timeout=ASK_TIMEOUT_S)


async def ours_ask_traced() -> float:
    """The same asks, every mailbox event going to a run's trace (bounded, as a run keeps it)."""
    with RunTrace().tracer() as tracer:
        return await ours_ask(tracer=tracer)


async def baseline_ask() -> float:
    request_send, request_receive = anyio.create_memory_object_stream[Ping](CAPACITY)
    reply_send, reply_receive = anyio.create_memory_object_stream[int](CAPACITY)

    async def server() -> None:
        async with request_receive, reply_send:
            async for msg in request_receive:
                await reply_send.send(msg.i)

    async with anyio.create_task_group() as tg:
        tg.start_soon(server)
        async with request_send, reply_receive:
            start = time.perf_counter()
            for i in range(ASKS):
                await request_send.send(Ping(i))
                await reply_receive.receive()
            elapsed = time.perf_counter() - start
    return elapsed / ASKS


async def ours_tell() -> float:
    done = anyio.Event()
    async with Supervisor("bench") as sup:
        ref = sup.spawn(Sink, TELLS, done, capacity=CAPACITY)
        start = time.perf_counter()
        for i in range(TELLS):
            await ref.tell(Ping(i))
        await done.wait()
        return TELLS / (time.perf_counter() - start)


async def baseline_tell() -> float:
    send, receive = anyio.create_memory_object_stream[Ping](CAPACITY)
    done = anyio.Event()

    async def consumer() -> None:
        left = TELLS
        async with receive:
            async for _ in receive:
                left -= 1
                if not left:
                    done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(consumer)
        async with send:
            start = time.perf_counter()
            for i in range(TELLS):
                await send.send(Ping(i))
            await done.wait()
            elapsed = time.perf_counter() - start
    return TELLS / elapsed


async def _nothing() -> None:
    """The baseline's background task: it ends at once, as the `Starter`'s do."""


class Starter(Actor):
    """Starts as many background tasks as it is told; the last of them to run sets `done`."""

    def __init__(self, done: anyio.Event) -> None:
        super().__init__()
        self.done = done
        self.left = 0

    @handler
    def ping(self, msg: Ping) -> None:
        self.left += msg.i
        for _ in range(msg.i):
            self.start_soon(self._one)

    async def _one(self) -> None:
        self.left -= 1
        if not self.left:
            self.done.set()


async def ours_start_soon() -> float:
    done = anyio.Event()
    async with Supervisor("bench") as sup:
        ref = sup.spawn(Starter, done, capacity=CAPACITY)
        start = time.perf_counter()
        await ref.tell(Ping(TASKS))
        await done.wait()
        return (time.perf_counter() - start) / TASKS


async def baseline_start_soon() -> float:
    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(TASKS):
            tg.start_soon(_nothing)
    return (time.perf_counter() - start) / TASKS


async def ours_spawn() -> float:
    start = time.perf_counter()
    async with Supervisor("bench") as sup:
        refs = [sup.spawn(Echo, capacity=CAPACITY) for _ in range(SPAWNS)]
        for ref in refs:
            await ref.ask(Ping(1))
        for ref in refs:
            await ref.stop()
    return (time.perf_counter() - start) / SPAWNS


async def baseline_spawn() -> float:
    async def server(receive: Any, reply: Any) -> None:
        async with receive, reply:
            async for msg in receive:
                await reply.send(msg.i)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        pairs = []
        for _ in range(SPAWNS):
            request_send, request_receive = anyio.create_memory_object_stream[Ping](CAPACITY)
            reply_send, reply_receive = anyio.create_memory_object_stream[int](CAPACITY)
            tg.start_soon(server, request_receive, reply_send)
            pairs.append((request_send, reply_receive))
        for request_send, reply_receive in pairs:
            await request_send.send(Ping(1))
            await reply_receive.receive()
        for request_send, reply_receive in pairs:
            await request_send.aclose()
            await reply_receive.aclose()
    return (time.perf_counter() - start) / SPAWNS


async def measure(backend: str) -> None:
    for name, ours, baseline, best in (
        ("ask", ours_ask, baseline_ask, min),
        ("ask_timeout", ours_ask_with_timeout, baseline_ask, min),
        ("tell", ours_tell, baseline_tell, max),
        ("ask_traced", ours_ask_traced, ours_ask, min),
        ("start_soon", ours_start_soon, baseline_start_soon, min),
        ("spawn", ours_spawn, baseline_spawn, min),
    ):
        ours_rounds, baseline_rounds = [], []
        for _ in range(ROUNDS):  # interleaved so drift hits both
            ours_rounds.append(await ours())
            baseline_rounds.append(await baseline())
        o, b = best(ours_rounds), best(baseline_rounds)
        unit = (lambda x: f"{x:,.0f}/s") if name.startswith("tell") else (lambda x: f"{x * 1e6:.1f}us")
        print(f"{name}_{backend}: ours={unit(o)} baseline={unit(b)} ratio={o / b:.2f}", flush=True)


def main() -> None:
    for backend in ("asyncio", "trio"):
        anyio.run(measure, backend, backend=backend)


if __name__ == "__main__":
    main()
