"""The suite's own split (tests/conftest.py): a plain `pytest` leaves out the tests that need an
agent CLI, tmux or bubblewrap; `pytest -m e2e` runs them; and those skipped for want of one say
so in one summary line, not a line each.

Each runs pytest in a process of its own, on two files whose end-to-end tests need tmux only.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = ("tests/cli/test_live.py", "tests/security/test_review3_panes.py")
NEED_TMUX = 4  # two in each file
PYTEST_TIMEOUT_SECONDS = 120


def _pytest(*args: str, path: str = os.environ.get("PATH", os.defpath)) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "0", *args, *FILES],
        cwd=ROOT,
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=PYTEST_TIMEOUT_SECONDS,
        check=False,
    )


def _collected(done: subprocess.CompletedProcess[str]) -> set[str]:
    assert done.returncode == 0, done.stdout + done.stderr
    return {line for line in done.stdout.splitlines() if "::" in line}


def test_a_plain_run_leaves_out_the_tests_that_need_tmux_and_e2e_runs_just_them():
    plain = _collected(_pytest("--collect-only", "-q"))
    e2e = _collected(_pytest("--collect-only", "-q", "-m", "e2e"))
    assert len(e2e) == NEED_TMUX and not plain & e2e, (plain, e2e)
    assert any("test_render" in test for test in plain)  # what needs no tmux still runs


def test_the_tests_skipped_for_want_of_tmux_say_so_in_one_line():
    without_tmux = str(Path(sys.executable).parent)  # this Python, and no tmux
    done = _pytest("-m", "e2e", "-rs", path=without_tmux)
    skips = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skips) == 1, done.stdout
    assert re.fullmatch(rf"SKIPPED \[{NEED_TMUX}\] tests/conftest\.py:\d+: not installed here: tmux \(.*\)", skips[0])
