"""Processes a Temporal test starts in groups of their own (`awf worker`, `awf run`)."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence

STOP_PATIENCE_SECONDS = 10  # for a process to end after SIGTERM, before its group is killed


def stop_groups(processes: Sequence[subprocess.Popen[str]]) -> str:
    """End each process's group (SIGTERM, then SIGKILL after STOP_PATIENCE_SECONDS), close their
    standard errors, and return what they wrote there."""
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    said = ""
    for process in processes:
        try:
            process.wait(STOP_PATIENCE_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if process.stderr is not None:
            said += process.stderr.read()
            process.stderr.close()
    return said
