"""A replay against the run it replays: the review-fix example, its shell agents run for real, then
played from its record (`agentswf.testing.replay`), in alternating rounds in one process.

Prints ``replay: real=… replay=… ratio=…`` with the medians in seconds and ratio = real / replay
(higher is better: what a test saves by replaying a recorded run rather than running it). Against
the real CLIs the saving is larger (a turn of claude or codex costs seconds to start): the e2e test
tests/replay/test_replay_real_clis.py records and replays the same on them.

Run: PYTHONPATH=. python benchmarks/replay.py
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

import anyio

import agentswf
from agentswf.testing import replay

ROUNDS = 6
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "review_fix" / "review_fix.py"


async def main() -> None:
    review_fix = agentswf.load_workflow(EXAMPLE)
    root = Path(tempfile.mkdtemp(prefix="awf-bench-replay-"))
    try:
        real: list[float] = []
        played: list[float] = []
        record: Path | None = None
        for _ in range(ROUNDS):
            started = time.perf_counter()
            ran = await agentswf.run(review_fix, run_root=root)
            real.append(time.perf_counter() - started)
            record = record or ran.run_dir
            started = time.perf_counter()
            again = await replay(review_fix, record, run_root=root)
            played.append(time.perf_counter() - started)
            assert again.value == ran.value, (again.value, ran.value)
        ours, base = statistics.median(played), statistics.median(real)
        print(f"replay: real={base:.3f} replay={ours:.3f} ratio={base / ours:.2f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    anyio.run(main)
