"""How long `wfa` takes an agent, through a real launcher and a real run, against the bare interpreter.

    python benchmarks/wfa.py [N]        (default N=200)

A real run (the engine on asyncio) opens a shell agent with two no-op tools; the agent's
command is this file's timing loop, so every `wfa` it times comes from inside the agent's
attempt, under its keeper, as an agent's own does (a request from anywhere else would be
refused `wrong-agent`), and the run's process does nothing but answer. Interleaved, it
times N runs of each:

- `wfa result <unknown id>`: a refused answer, through the launcher, socket, identity check
  and AgentActor;
- `wfa tool noop`: a tool call through the AgentActor, the ToolBroker and the Recorder, its
  handler a plain function, so run in a worker thread;
- `wfa tool noop_async`: the same with an `async def` handler, run on the run's loop;
- `python -S -I -c pass` with the same interpreter: the floor any Python client pays.

It prints the median seconds per call and the ratio to the floor (goals: at most 1.25 for the
result, 1.3 for the tool); `identity_check`: what the run's identity check (the peer's
ancestry read from /proc, up to the keeper) costs per request, timed in the agent's process on
its own real ancestry; and `in_process_round_trip`: the client's `call()` made N times from
the agent's own process, so the run's side and the socket without a process's start.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

import agentswf
from agentswf import Workflow, tool, workflow
from agentswf.launcher.client import build_request, call
from agentswf.launcher.identity import agent_refusal
from agentswf.launcher.peer import command_of, parent_of
from agentswf.launcher.place import SOCKET_NAME

CHECKS = 20000


def keeper_of(pid: int) -> int:
    """The keeper this process runs under: its first ancestor running keeper.py."""
    current: int | None = pid
    while current is not None and current > 1:
        if any("keeper.main" in word for word in command_of(current)):
            return current
        current = parent_of(current)
    sys.exit("not run under a keeper")


def client(n: int, out: Path) -> None:
    """The agent's side: time the commands from inside the attempt, write the medians to `out`."""
    wfa = os.environ["WFA"]
    commands = {
        "wfa_result_refused": ([wfa, "result", "c0ffee00", "--verdict", "approve"], 1),
        "wfa_tool_noop": ([wfa, "tool", "noop"], 0),
        "wfa_tool_noop_async": ([wfa, "tool", "noop_async"], 0),
        "baseline": ([sys.executable, "-S", "-I", "-c", "pass"], 0),
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for command, _ in commands.values():  # warm the caches once
        subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    for _ in range(n):
        for name, (command, expected) in commands.items():
            start = time.perf_counter()
            done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, check=False)
            times[name].append(time.perf_counter() - start)
            if done.returncode != expected or b"wrong-agent" in done.stderr:
                sys.exit(f"{name} exited {done.returncode}: {done.stderr.decode()}")
    baseline = statistics.median(times["baseline"])
    report = []
    for name in ("wfa_result_refused", "wfa_tool_noop", "wfa_tool_noop_async"):
        ours = statistics.median(times[name])
        report.append(f"{name}: ours={ours:.5f} baseline={baseline:.5f} ratio={ours / baseline:.2f}")
    roots = {keeper_of(os.getpid())}
    current, depth = os.getpid(), 0
    while current not in roots:  # the parents a check of this process reads (one fewer than wfa's)
        current, depth = parent_of(current) or 0, depth + 1
    start = time.perf_counter()
    for _ in range(CHECKS):
        agent_refusal(os.getpid(), agent="bench", run_pid=1, roots=roots, parent_of=parent_of)
    check = (time.perf_counter() - start) / CHECKS
    refused = statistics.median(times["wfa_result_refused"])
    report.append(
        f"identity_check: {check * 1e6:.1f}us per request ({depth} parents read) "
        f"= {check / refused * 100:.2f}% of a refused wfa result"
    )
    socket = str(Path(wfa).parent / SOCKET_NAME)
    requests = {
        "result": build_request(["result", "c0ffee00", "--verdict", "approve"]),
        "tool": build_request(["tool", "noop"], lambda: ""),
        "tool_async": build_request(["tool", "noop_async"], lambda: ""),
    }
    served = {name: [] for name in requests}
    for _ in range(n):
        for name, fields in requests.items():
            start = time.perf_counter()
            call(socket, fields)
            served[name].append(time.perf_counter() - start)
    report.append(
        "in_process_round_trip: "
        + " ".join(f"{name}={statistics.median(times) * 1e3:.3f}ms" for name, times in served.items())
        + " (the client's call() from the agent's process: the run's side and the socket, no process start)"
    )
    out.write_text("\n".join(report) + "\n")


@workflow(name="bench-wfa", description="One agent times wfa from inside its turn.")
async def bench(wf: Workflow, args: list[str]) -> None:
    n, out = args
    command = f"{sys.executable} {__file__} --client {n} {out}"
    noop = tool(lambda: None, description="Nothing.")

    async def nothing() -> None:
        return None

    tools = {"noop": noop, "noop_async": tool(nothing, description="Nothing, on the run's loop.")}
    agent = await wf.agents.open("bench", runtime=f"shell:{command}", tools=tools)
    turn = await agent.run("Time wfa.", timeout="1h", nudge=False)
    assert turn.outcome.kind == "unanswered", turn.outcome


def main(argv: list[str]) -> None:
    if argv[:1] == ["--client"]:
        client(int(argv[1]), Path(argv[2]))
        return
    n = argv[0] if argv else "200"
    with tempfile.TemporaryDirectory(prefix="awf-bench-runs-") as root:
        out = Path(root) / "report"
        result = anyio.run(lambda: agentswf.run(bench, args=[n, str(out)], run_root=root, cwd=root))
        if result.outcome != "completed":
            sys.exit(f"the run ended {result.outcome}: {result.reason}")
        print(out.read_text(), end="")


if __name__ == "__main__":
    main(sys.argv[1:])
