"""What a sandbox adds to a turn's start and to one `wfa` call, against the same agent unsandboxed, in one run.

    python benchmarks/sandbox.py [N]   (default N=20)

Shell agents, so the CLI costs nothing of its own: each turn runs `/bin/sh` on a script.

- turn: `agent.run` of an agent that answers at once (`wfa result`), timed around
  `agent.run`: the start of the process tree (keeper, and for a sandbox bubblewrap, the
  namespaces and mounts, and with a network the proxy socket and the forwarder in front) and
  one `wfa` round trip;
- wfa: one `wfa tool noop` call, timed inside the agent's shell around 20 calls in a row
  (the interpreter's start through the sandbox's mounts, the connection, the identity check
  walking two more parents).

Three agents, interleaved N times: `plain` (unsandboxed: the baseline), `reader`
(`wf.sandboxes.open(key)`: no network, so no proxy) and `networked` (`network=["pypi.org"]`:
the proxy and the forwarder). Prints medians, the ratio to plain and the milliseconds added.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

import agentswf
from agentswf import Runtime, tool, workflow

CALLS_PER_TURN = 20
ANSWER = '"$WFA" result "$WFA_CALL_ID" ok\n'
LOOP = f"""\
t0=$(date +%s%N)
i=0; while [ $i -lt {CALLS_PER_TURN} ]; do "$WFA" tool noop >/dev/null || exit 1; i=$((i+1)); done
t1=$(date +%s%N)
"$WFA" result "$WFA_CALL_ID" "$(( (t1 - t0) / {CALLS_PER_TURN} ))"
"""
KINDS = ("plain", "reader", "networked")


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory(prefix="awf-bench-sandbox-") as root:
        base = Path(root)
        (base / "answer.sh").write_text(ANSWER)
        (base / "loop.sh").write_text(LOOP)
        times: dict[str, dict[str, list[float]]] = {kind: {"turn": [], "wfa": []} for kind in KINDS}

        @workflow(name="bench-sandbox", description="Turns and wfa calls, sandboxed and not.")
        async def flow(wf):
            boxes = {
                "plain": None,
                "reader": await wf.sandboxes.open("reader"),
                "networked": await wf.sandboxes.open("networked", network=["pypi.org"]),
            }
            noop = {"noop": tool(lambda: "ok", description="Nothing.")}
            answer = {
                kind: await wf.agents.open(f"{kind}-answer", runtime=Runtime(harness="shell", command=("/bin/sh", str(base / "answer.sh"))), sandbox=box)
                for kind, box in boxes.items()
            }  # fmt: skip
            loop = {
                kind: await wf.agents.open(f"{kind}-loop", runtime=Runtime(harness="shell", command=("/bin/sh", str(base / "loop.sh"))), sandbox=box, tools=noop)
                for kind, box in boxes.items()
            }  # fmt: skip
            for kind in KINDS:  # the first turn of each makes its directory (and home): not timed
                await answer[kind].run("Answer.", timeout=30)
                await loop[kind].run("Loop.", timeout=60)
            for _ in range(n):
                for kind in KINDS:
                    start = time.perf_counter()
                    turn = await answer[kind].run("Answer.", timeout=30)
                    times[kind]["turn"].append(time.perf_counter() - start)
                    assert turn.answered, turn.outcome
                    turn = await loop[kind].run("Loop.", timeout=60)
                    assert turn.answered, turn.outcome
                    times[kind]["wfa"].append(int(turn.value) / 1e9)

        result = await agentswf.run(flow, run_root=base / "runs", cwd=base)
        if not result.completed:
            sys.exit(f"the benchmark's run {result.outcome}: {result.reason}")
    print(f"N={n} turns of each, {CALLS_PER_TURN} wfa calls a turn; medians, ratio to plain, ms added")
    for measure in ("turn", "wfa"):
        baseline = statistics.median(times["plain"][measure])
        for kind in KINDS:
            median = statistics.median(times[kind][measure])
            print(
                f"{measure:5} {kind:10} {median * 1000:8.2f} ms  ratio {median / baseline:5.2f}  "
                f"added {(median - baseline) * 1000:+7.2f} ms"
            )


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 20)
