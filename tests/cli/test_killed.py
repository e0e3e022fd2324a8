"""`kill -9` of `awf run`: within a few seconds, without anyone running anything, nothing of
the run is left: no agent process (the CLI, what it backgrounded, a `setsid` daemon, a double
fork), no socket, no run directory. And when the run's watchdog is killed with it, the next
`awf` command sweeps what is left."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from agentswf.harnesses.keeper import marked

from ..harnesses.kit import alive

AWF = [sys.executable, "-m", "agentswf"]
KILLED_RUN_CLEANUP_SECONDS = 5.0  # from kill -9 of the run to nothing of it left

AGENT = r"""
echo "$AGENTSWF_MARK" >"$OUT/mark"; echo "$WFA" >"$OUT/wfa"; echo $$ >>"$OUT/pids"
sleep 1000 & echo $! >>"$OUT/pids"
setsid sh -c 'trap "" TERM HUP; echo $$ >>"$OUT/pids"; exec sleep 1000' </dev/null >/dev/null 2>&1 &
( sh -c 'echo $$ >>"$OUT/pids"; exec sleep 1000' & )
while [ "$(wc -l <"$OUT/pids")" -lt 4 ]; do sleep 0.01; done
touch "$OUT/ready"
sleep 1000
"""

WORKFLOW = """
from agentswf import workflow

@workflow(name="held", description="One agent that backgrounds everything, then waits.")
async def held(wf):
    agent = await wf.agents.open("a", runtime="shell:{script}")
    idle = await wf.agents.open("idle", runtime="shell:true")  # opened, never run: no keeper of its own
    await agent.run("Wait.", timeout="1h")
"""


@pytest.fixture
def private_tmp(monkeypatch):
    """A TMPDIR of the test's own: another test's `awf` command (or another suite's on this
    machine) sweeps dead runs under the shared /tmp, and would take this test's before it looks."""
    short = tempfile.mkdtemp(prefix="k", dir="/tmp")  # short: a socket's path has 108 bytes
    monkeypatch.setenv("TMPDIR", short)
    yield short
    shutil.rmtree(short, ignore_errors=True)


def start(tmp_path: Path, backend: str) -> subprocess.Popen[bytes]:
    script = tmp_path / "agent.sh"
    script.write_text(f"#!/bin/sh\nOUT={tmp_path}\nexport OUT\n{AGENT}")
    script.chmod(0o755)
    flows = tmp_path / "flows.py"
    flows.write_text(WORKFLOW.replace("{script}", str(script)))
    run = subprocess.Popen(
        [*AWF, "run", str(flows), "--backend", backend], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 30
    while not (tmp_path / "ready").exists():
        assert time.monotonic() < deadline and run.poll() is None, "the agent never got ready"
        time.sleep(0.02)
    return run


def left(tmp_path: Path) -> tuple[list[int], list[int], bool]:
    """The agent's processes alive, those carrying the run's mark, and whether the run dir is there."""
    mark = (tmp_path / "mark").read_text().strip()
    run_mark = mark.split("/")[0]
    pids = [int(pid) for pid in (tmp_path / "pids").read_text().split()]
    run_dir = Path((tmp_path / "wfa").read_text().strip()).parent.parent
    return [pid for pid in pids if alive(pid)], marked(run_mark), run_dir.exists()


def wait_until_nothing_left(tmp_path: Path, seconds: float) -> tuple[list[int], list[int], bool]:
    deadline = time.monotonic() + seconds
    while True:
        found = left(tmp_path)
        if found == ([], [], False) or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_nothing_is_left_seconds_after_kill_9_of_the_run(tmp_path, backend, private_tmp):
    run = start(tmp_path, backend)
    alive_before, carrying_before, dir_before = left(tmp_path)
    assert len(alive_before) == 4 and len(carrying_before) >= 4 and dir_before
    started = time.monotonic()
    run.send_signal(signal.SIGKILL)
    run.wait()
    assert wait_until_nothing_left(tmp_path, KILLED_RUN_CLEANUP_SECONDS) == ([], [], False)
    assert time.monotonic() - started < KILLED_RUN_CLEANUP_SECONDS


def _watchdog_of(run_pid: int) -> int:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                command = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                continue
            if parent == run_pid and b"watch" in command and any(b"keeper.main" in word for word in command):
                return int(entry)
    raise AssertionError("the run has no watchdog")


def test_a_run_killed_with_its_watchdog_is_swept_by_the_next_awf_command(tmp_path, private_tmp):
    run = start(tmp_path, "asyncio")
    watchdog = _watchdog_of(run.pid)
    os.kill(watchdog, signal.SIGKILL)
    run.send_signal(signal.SIGKILL)
    run.wait()
    deadline = time.monotonic() + KILLED_RUN_CLEANUP_SECONDS
    while left(tmp_path)[0] and time.monotonic() < deadline:
        time.sleep(0.05)
    alive_after, _, dir_after = left(tmp_path)
    assert alive_after == []  # the keeper killed the agent's tree when its lifeline closed
    assert dir_after  # but nobody removed the run's directory
    subprocess.run([*AWF, "logs", "--run-root", str(tmp_path / "none")], cwd=tmp_path, capture_output=True, timeout=60, check=False)
    assert left(tmp_path) == ([], [], False)


def test_awf_logs_shows_the_turn_a_kill_9_cut_off(tmp_path, private_tmp):
    run = start(tmp_path, "asyncio")
    run.send_signal(signal.SIGKILL)
    run.wait()
    wait_until_nothing_left(tmp_path, KILLED_RUN_CLEANUP_SECONDS)
    shown = subprocess.run([*AWF, "logs"], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert shown.returncode == 0, shown.stderr
    assert "a turn 1 [call " in shown.stdout and ": cut off" in shown.stdout
    assert "prompt: Wait." in shown.stdout
