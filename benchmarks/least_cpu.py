"""A tool call's and a record line's CPU, the least of several runs, against their raw floors.

On a shared VM `scale.py`'s and `recorder.py`'s ratios swing by a third between rounds of one
tree (issue 32's measurements): one run takes whatever the neighbours leave it. The least of
several runs in one process is the least disturbed, so two trees compare by it, alternately.

- ``call_cpu_<backend>``: CPU per tool call (`scale.ours` of AGENTS agents × CALLS calls less the
  same with none, over the calls), the least of RUNS; against the raw exchange's CPU
  (`scale.baseline`, the same client bytes to a bare listener), the least of RUNS.
- ``line_cpu_<backend>``: CPU per record line through `Appends` (`recorder.ours_appends`),
  the least of RUNS; against the plain loop encoding and appending the same lines.

Run: PYTHONPATH=. python benchmarks/least_cpu.py   (from each tree, alternately)
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import recorder
import scale

AGENTS = 4
CALLS = 500
RUNS = 7


def _cpu_of(backend: str, work: Callable[[], Awaitable[Any]]) -> float:
    start = time.process_time()
    anyio.run(work, backend=backend)
    return time.process_time() - start


def call_cpu(backend: str, measure: Callable[..., Awaitable[Any]]) -> float:
    """Seconds of CPU a call costs, the least of RUNS."""
    runs = []
    for _ in range(RUNS):
        with_calls = _cpu_of(backend, lambda: measure(AGENTS, CALLS, AGENTS))
        without = _cpu_of(backend, lambda: measure(AGENTS, 0, AGENTS))
        runs.append((with_calls - without) / (AGENTS * CALLS))
    return min(runs)


def line_cpu(backend: str, measure: Callable[[Path], Awaitable[Any]]) -> float:
    """Seconds of CPU a line costs, the least of RUNS."""
    runs = []
    for _ in range(RUNS):
        with tempfile.TemporaryDirectory(prefix="awf-least-") as root:
            runs.append(_cpu_of(backend, lambda: measure(Path(root))) / recorder.EVENTS)
    return min(runs)


def main() -> None:
    for backend in ("asyncio", "trio"):
        ours, raw = call_cpu(backend, scale.ours), call_cpu(backend, scale.baseline)
        print(f"call_cpu_{backend}: ours={ours * 1e6:.1f}us baseline={raw * 1e6:.1f}us ratio={ours / raw:.2f}")
        ours, raw = line_cpu(backend, recorder.ours_appends), line_cpu(backend, recorder.baseline_ask)
        print(f"line_cpu_{backend}: ours={ours * 1e6:.2f}us baseline={raw * 1e6:.2f}us ratio={ours / raw:.2f}")


if __name__ == "__main__":
    main()
