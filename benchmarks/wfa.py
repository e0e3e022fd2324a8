"""How long `wfa` takes an agent, through a real launcher and a real run, against the bare interpreter.

    python benchmarks/wfa.py [N]        (default N=200)

A real run (the engine on asyncio) opens a scripted agent with
a no-op tool and keeps its turn open. Interleaved, the benchmark then times N runs of each:

- `wfa result <unknown id>`: a refused answer, through the launcher, socket and AgentActor;
- `wfa tool noop`: a tool call through the AgentActor, the ToolBroker and the Recorder;
- `python -S -I -c pass` with the same interpreter: the floor any Python client pays.

The run lives in a process of its own, as it does in real use.

It prints the median seconds per call and the ratio to the floor (goal: at most 1.3).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time

import anyio

from agentswf import Workflow, tool, workflow
from agentswf.testing import answer, run_workflow


@workflow(name="bench-wfa", description="Keeps one turn open for the benchmark.")
async def bench(wf: Workflow) -> None:
    agent = await wf.agents.open("bench", runtime="shell:true", tools={"noop": tool(lambda: None, description="Nothing.")})
    await agent.run("Wait.", timeout="1h")


async def serve() -> None:
    """The run, in a process of its own as in real use: prints the launcher, ends when stdin closes."""

    async def hold(turn) -> str:
        print(turn.launcher, flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)
        return "done"

    with tempfile.TemporaryDirectory(prefix="awf-bench-runs-") as root:
        await run_workflow(bench, agents={"bench": answer(hold)}, run_root=root)


def main(argv: list[str]) -> None:
    if argv == ["--serve"]:
        anyio.run(serve)
        return
    n = int(argv[0]) if argv else 200
    engine = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert engine.stdout is not None and engine.stdin is not None
    wfa = engine.stdout.readline().strip()
    commands = {
        "wfa_result_refused": ([wfa, "result", "c0ffee00", "--verdict", "approve"], 1),
        "wfa_tool_noop": ([wfa, "tool", "noop"], 0),
        "baseline": ([sys.executable, "-S", "-I", "-c", "pass"], 0),
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for name, (command, expected) in commands.items():  # warm the caches once
        subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True)
    for _ in range(n):
        for name, (command, expected) in commands.items():
            start = time.perf_counter()
            done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True)
            times[name].append(time.perf_counter() - start)
            if done.returncode != expected:
                sys.exit(f"{name} exited {done.returncode}: {done.stderr.decode()}")
    engine.stdin.close()
    engine.wait(30)
    baseline = statistics.median(times["baseline"])
    for name in ("wfa_result_refused", "wfa_tool_noop"):
        ours = statistics.median(times[name])
        print(f"{name}: ours={ours:.5f} baseline={baseline:.5f} ratio={ours / baseline:.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
