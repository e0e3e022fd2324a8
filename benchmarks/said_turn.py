"""What keeping an attempt's output costs a turn (harnesses/said.py): a shell agent that writes
1 MiB to its standard error before its answer, against one that writes nothing.

    python benchmarks/said_turn.py [N]   (default N=20 turns of each, interleaved, in one run)

Prints each kind's median turn, timed around `agent.run`, and their difference. Run it on two
trees alternately (`PYTHONPATH=<other tree> python benchmarks/said_turn.py`) to compare them:
it uses the public API only.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

import agentswf
from agentswf import workflow

ANSWER = '"$WFA" result "$WFA_CALL_ID" ok >/dev/null'
LOUD = f"shell:head -c {1 << 20} /dev/zero | tr '\\0' x >&2; {ANSWER}"
QUIET = f"shell:{ANSWER}"


async def main(n: int) -> None:
    times: dict[str, list[float]] = {"quiet": [], "loud": []}

    @workflow(name="said", description="turns that write 1 MiB to standard error, and turns that don't")
    async def flow(wf):  # type: ignore[no-untyped-def]
        agents = {kind: await wf.agents.open(kind, runtime=runtime) for kind, runtime in (("quiet", QUIET), ("loud", LOUD))}
        for _ in range(n):
            for kind, agent in agents.items():
                start = time.perf_counter()
                turn = await agent.run("Answer.", timeout="60s")
                times[kind].append(time.perf_counter() - start)
                assert turn.answered, turn.outcome

    with tempfile.TemporaryDirectory(prefix="awf-bench-said-") as scratch:
        result = await agentswf.run(flow, run_root=Path(scratch) / "runs", cwd=scratch)
        assert result.outcome == "completed", result.reason
    quiet, loud = (statistics.median(times[kind]) * 1000 for kind in ("quiet", "loud"))
    print(f"{agentswf.__file__}: quiet {quiet:.1f} ms, loud {loud:.1f} ms, loud - quiet {loud - quiet:.1f} ms (medians of {n})")


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 20)
