"""What a pane's tmux command costs the run, through its checked client in the agent's tree, against a bare client.

    python benchmarks/tmux_client.py [N]        (default N=200)

A pane's screen is read every 0.15 s of a turn (`capture-pane`), so each tmux command's cost
is paid a few times a second per pane. Since the run's tmux client obeys no server of the
agent's, each command is checked first (the kernel says who listens on the socket) and run by
the client loop under a keeper of the pane's (`tmux_runner.py`), not as a child of the run.
Interleaved on one real tmux server, it times N of each:

- `bare`: `tmux capture-pane -p` as a subprocess of this process (what the run did before);
- `checked`: `TmuxServer.screen()`, the check and the client loop's round trip;
- `keeper_each`: the same command under a keeper of its own each time (the design not taken).

It prints the median milliseconds of each and their ratio to `bare`, and the CPU this process
and its reaped children spent per command (the client loop, in the pane's keeper until the pane
stops, is not counted: the CPU figure says what the run's own process is spared, not the total).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from agentswf.harnesses.keeper import keep_command
from agentswf.harnesses.process import lifeline
from agentswf.harnesses.tmux import TmuxServer


def _cpu() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


async def main(n: int) -> None:
    tmux = shutil.which("tmux")
    if tmux is None:
        sys.exit("needs tmux")
    directory = Path(tempfile.mkdtemp(prefix="awfbench"))
    server = TmuxServer(tmux, directory / "t")
    try:
        await server.start({"PATH": os.defpath, "HOME": str(directory)}, directory)
        await server.open_window(["sleep", "600"], directory)
        bare = [tmux, "-S", str(server.socket), "-f", "/dev/null", "capture-pane", "-p", "-t", "agent"]
        each = keep_command(sys.executable, lifeline(), 1.0, None, bare)
        times: dict[str, list[float]] = {"bare": [], "checked": [], "keeper_each": []}
        cpu = dict.fromkeys(times, 0.0)
        for _ in range(n):
            for name in times:
                began, cpu_began = time.perf_counter(), _cpu()
                if name == "bare":
                    subprocess.run(bare, capture_output=True, check=True, env={"PATH": os.defpath})
                elif name == "checked":
                    await server.screen()
                else:
                    subprocess.run(each, capture_output=True, check=True, env={"PATH": os.defpath}, pass_fds=(lifeline(),))
                times[name].append(time.perf_counter() - began)
                cpu[name] += _cpu() - cpu_began
        floor = statistics.median(times["bare"])
        for name, taken in times.items():
            median = statistics.median(taken)
            print(f"{name:12} {median * 1000:7.2f} ms  ratio {median / floor:5.2f}  cpu {cpu[name] / n * 1000:6.2f} ms")
    finally:
        await server.stop()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 200)
