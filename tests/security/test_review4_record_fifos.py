"""Review 4: a FIFO an agent puts where the Recorder writes froze the run (it never ended).

An agent runs as the run's user and can write the run's record (docs/guide/security.md), so
what it puts there may be anything: the readers of the record already refuse a FIFO
(`records.regular_bytes`), but the Recorder's writers opened what they found by path and waited on
it (now they open without waiting and refuse what isn't a regular file or directory):

- a call's `candidates.jsonl` was opened (`LineLog._open`) with O_RDWR, which succeeds on a
  FIFO, then written with a blocking write(2) on the event loop's own thread: once the pipe is
  full (its holder filled it), every actor of the run stops, its timers and sockets too;
- the group commit (then `records.sync_paths`, now `records.fsync_all`) opened each file written since the last commit with
  O_RDONLY, which on a FIFO waits for a writer that never comes: a `call.json` swapped for a
  FIFO leaves that worker thread blocked and the run can't end.

Each run is made in a child process (so a frozen run can be killed), on either backend, by a
real shell agent; each test asserts that the run still ends, its record said to be incomplete.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

RUN = """
import sys
from functools import partial
from pathlib import Path

import anyio
import msgspec

import agentswf
import agentswf.engine.record.recorder as recorder
from agentswf import workflow

tmp, backend, commit = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
recorder.GROUP_COMMIT_SECONDS = commit  # the attack races the first commit; this takes the race out of the test


class N(msgspec.Struct):
    n: int


@workflow(name="t", description="An agent that puts a FIFO in the record.")
async def fn(wf):
    (tmp / "run_dir").write_text(str(wf.run_dir))
    a = await wf.agents.open("a", runtime=f"shell:{tmp / 'a.sh'}")
    turn = await a.run("Count.", schema=N, timeout=4)
    return turn.outcome.kind


result = anyio.run(partial(agentswf.run, fn, run_root=tmp / "runs", cwd=tmp), backend=backend)
(tmp / "ended").write_text(f"{result.outcome}\\n{result.reason}\\n")
"""

# Fills the FIFO's pipe and holds it open, so the run's next write to it blocks.
FILL_AND_HOLD = """
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_NONBLOCK)
try:
    while True:
        os.write(fd, b"x" * 65536)
except BlockingIOError:
    pass
open(sys.argv[2], "w").write(str(os.getpid()))
time.sleep(60)
"""

CANDIDATES_FIFO = """\
d="$(cat "$OUT/run_dir")/calls/$WFA_CALL_ID"
mkfifo "$d/candidates.jsonl"
{python} {fill} "$d/candidates.jsonl" "$OUT/holder" &
while [ ! -s "$OUT/holder" ]; do sleep 0.01; done
"$WFA" result "$WFA_CALL_ID" --n 1
"""

CALL_JSON_FIFO = """\
d="$(cat "$OUT/run_dir")/calls/$WFA_CALL_ID"
rm -f "$d/call.json"
mkfifo "$d/call.json"
"$WFA" result "$WFA_CALL_ID" --n 1
"""

RUN_ENDS_WITHIN_SECONDS = 15  # the turn's timeout is 4 s: a run that still stands after this is frozen


def _run(tmp_path: Path, backend: str, body: str, commit_seconds: float) -> str:
    (tmp_path / "run.py").write_text(RUN)
    (tmp_path / "fill.py").write_text(FILL_AND_HOLD)
    script = tmp_path / "a.sh"
    script.write_text(
        f"#!/bin/sh\nOUT={tmp_path}\nexport OUT\n" + body.format(python=sys.executable, fill=tmp_path / "fill.py")
    )
    script.chmod(0o755)
    with open(tmp_path / "run.err", "wb") as errors:  # the child's (it keeps its own copy)
        child = subprocess.Popen(
            [sys.executable, str(tmp_path / "run.py"), str(tmp_path), backend, str(commit_seconds)],
            cwd=tmp_path,
            stdout=errors,
            stderr=errors,
            start_new_session=True,
        )
    try:
        child.wait(timeout=RUN_ENDS_WITHIN_SECONDS)
    except subprocess.TimeoutExpired:
        pass
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)  # its keepers and watchdog kill what is left of the agent
            child.wait()
        holder = tmp_path / "holder"
        if holder.exists() and holder.read_text():
            try:
                os.kill(int(holder.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
    ended = tmp_path / "ended"
    assert ended.exists(), f"the run never ended: {textwrap.shorten((tmp_path / 'run.err').read_text(), 2000)}"
    return ended.read_text()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="shell agents under a keeper are Linux's")
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_fifo_at_a_calls_candidates_doesnt_freeze_the_run(tmp_path, backend):
    ended = _run(tmp_path, backend, CANDIDATES_FIFO, commit_seconds=1.0)
    assert ended.startswith("failed"), ended  # the record is incomplete, and the run says so
    assert "candidates.jsonl" in ended, ended


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="shell agents under a keeper are Linux's")
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_fifo_in_place_of_call_json_neither_keeps_the_run_from_ending_nor_passes_as_synced(tmp_path, backend):
    """The run ends (`_run` asserts it did), and the last group commit's failure to sync the FIFO
    fails it: the settle waits for the commit under way."""
    ended = _run(tmp_path, backend, CALL_JSON_FIFO, commit_seconds=30.0)
    assert ended.startswith("failed"), ended  # the record is incomplete, and the run says so
    assert "call.json" in ended, ended
