"""What the keeper adds to starting and ending an agent's process, against starting it bare.

    python benchmarks/keeper.py [N]        (default N=100)

Interleaved, N times each, on asyncio and on trio: `true` started by `run_in_group` (under
a keeper: the keeper's own start, its subreaper, the kill pass when `true` exits, the
run's sweep of the attempt's mark) and `true` started bare with `anyio.run_process`.
Prints the medians, their ratio and the milliseconds added per attempt.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import anyio

from agentswf.harnesses.process import run_in_group


async def main(n: int, backend: str) -> None:
    kept: list[float] = []
    bare: list[float] = []
    env, cwd = dict(os.environ), Path.cwd()
    for _ in range(n):
        start = time.perf_counter()
        await run_in_group(["true"], input=b"", cwd=cwd, env=env)
        kept.append(time.perf_counter() - start)
        start = time.perf_counter()
        await anyio.run_process(["true"], check=False)
        bare.append(time.perf_counter() - start)
    ours, baseline = statistics.median(kept), statistics.median(bare)
    print(
        f"keeper_{backend}: ours={ours * 1000:.1f}ms baseline={baseline * 1000:.1f}ms "
        f"ratio={ours / baseline:.1f} added={(ours - baseline) * 1000:.1f}ms"
    )


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    for backend in ("asyncio", "trio"):
        anyio.run(main, count, backend, backend=backend)
