"""What an `awf` command costs to start: CPU of a whole `python -m agentswf COMMAND` process, for
commands that read a record or ask a live run (here none is live: each says so and exits) and for
`awf run` of a file that isn't there (its imports, no run).

    python benchmarks/awf_start.py --against TREE [N]   (default N=10 of each command in each tree)

TREE is another checkout of agentswf (`git worktree add /tmp/base <commit>`); both trees run in
this one session, alternately, each process with `PYTHONPATH` at its tree. Prints each
command's median CPU (user + system, of the process and its children) in each tree, and their
ratio (this tree / TREE).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
COMMANDS = (["ls"], ["logs"], ["status"], ["pending"], ["inbox", "--as", "k"], ["worktrees"], ["run", "absent.py"])


def cpu_of(tree: Path, words: list[str], cwd: str) -> float:
    """CPU seconds of one `python -m agentswf WORDS` run with `tree` first on its path."""
    before = os.times()
    subprocess.run(
        [sys.executable, "-m", "agentswf", *words], cwd=cwd, env={**os.environ, "PYTHONPATH": str(tree)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    after = os.times()
    return (after.children_user - before.children_user) + (after.children_system - before.children_system)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--against", type=Path, required=True, help="another checkout of agentswf")
    parser.add_argument("n", type=int, nargs="?", default=10)
    options = parser.parse_args()
    trees = {"this": HERE, "against": options.against.resolve()}
    with tempfile.TemporaryDirectory(prefix="awf-bench-start-") as scratch:
        for words in COMMANDS:
            spent: dict[str, list[float]] = {name: [] for name in trees}
            for _ in range(options.n):
                for name, tree in trees.items():
                    spent[name].append(cpu_of(tree, words, scratch))
            this, against = (statistics.median(spent[name]) * 1000 for name in ("this", "against"))
            print(f"awf {' '.join(words):<16} this {this:6.0f} ms CPU, against {against:6.0f} ms: {this / against:.2f}×")


if __name__ == "__main__":
    main()
