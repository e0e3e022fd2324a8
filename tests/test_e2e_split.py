"""The suite's own split (tests/conftest.py): a plain `pytest` leaves out the tests that need an
agent CLI, tmux or bubblewrap; `pytest -m e2e` runs them; and those skipped for want of one say
so in one summary line, not a line each.

It runs pytest in processes of its own, on two files whose end-to-end tests need tmux only.
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


def _tests(done: subprocess.CompletedProcess[str], outcome: str = "") -> set[str]:
    assert done.returncode == 0, done.stdout + done.stderr
    return {line.split()[0] for line in done.stdout.splitlines() if "::" in line and outcome in line}


def test_a_plain_run_leaves_out_the_tests_needing_tmux_and_e2e_runs_them_skipping_in_one_line():
    plain = _tests(_pytest("--collect-only", "-q"))
    without_tmux = _pytest("-m", "e2e", "-v", "-rs", path=str(Path(sys.executable).parent))  # this Python only
    e2e = _tests(without_tmux, " SKIPPED")
    assert len(e2e) == NEED_TMUX and not plain & e2e, (plain, e2e)
    assert any("test_render" in test for test in plain)  # what needs no tmux still runs
    said = [line for line in without_tmux.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(said) == 1, without_tmux.stdout
    assert re.fullmatch(rf"SKIPPED \[{NEED_TMUX}\] tests/conftest\.py:\d+: not installed here: tmux \(.*\)", said[0])
