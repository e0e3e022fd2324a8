"""An unsandboxed attempt's TMPDIR: its own, removed at its end by the run and by its keeper (a
dead run's too), following no link an agent left there; a sandboxed attempt keeps its sandbox's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from agentswf.harnesses import keeper
from agentswf.harnesses.process import SCRATCH_PREFIX, open_in_group, run_in_group

pytestmark = pytest.mark.anyio

# What an agent leaves in its TMPDIR: a file, a directory, and a link to a directory of the user's.
LEAVES = 'echo "$TMPDIR"; mkdir "$TMPDIR/cc-socks"; echo x >"$TMPDIR/cc-socks/1.sock"; ln -s "$1" "$TMPDIR/mine"'


def _users(tmp_path: Path) -> Path:
    users = tmp_path / "users"
    users.mkdir()
    (users / "kept").write_text("the user's")
    return users


async def test_an_attempt_has_a_tmpdir_of_its_own_removed_at_its_end(tmp_path):
    users = _users(tmp_path)
    argv = ["/bin/sh", "-c", LEAVES, "sh", str(users)]
    exited = await run_in_group(argv, input=b"", cwd=tmp_path, env=dict(os.environ))
    scratch = exited.stdout.strip()
    assert os.path.basename(scratch).startswith(SCRATCH_PREFIX) and os.path.dirname(scratch) == tempfile.gettempdir()
    assert not os.path.lexists(scratch)  # gone, what the agent left in it too
    assert (users / "kept").read_text() == "the user's"  # the link was unlinked, not followed


async def test_a_session_cli_has_a_tmpdir_of_its_own_removed_at_its_end(tmp_path):
    users = _users(tmp_path)
    argv = ["/bin/sh", "-c", LEAVES + "; cat >/dev/null", "sh", str(users)]
    async with open_in_group(argv, cwd=tmp_path, env=dict(os.environ)) as channel:
        scratch = (await channel.receive()).decode().strip()
        assert channel.env["TMPDIR"] == scratch
    assert os.path.basename(scratch).startswith(SCRATCH_PREFIX) and not os.path.lexists(scratch)
    assert (users / "kept").read_text() == "the user's"


async def test_a_sandboxed_attempt_keeps_its_sandboxs_tmpdir(tmp_path):
    def confine(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
        return list(argv), {**env, "TMPDIR": "/sandbox-tmp"}

    exited = await run_in_group(["/bin/sh", "-c", 'echo "$TMPDIR"'], input=b"", cwd=tmp_path, env=dict(os.environ), confine=confine)
    assert exited.stdout.strip() == "/sandbox-tmp"


def test_the_keeper_removes_the_scratch_when_the_run_dies(tmp_path):
    """The run killed (its lifeline closes): no run is left to remove the scratch, so its keeper does."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    users = _users(tmp_path)
    read, write = os.pipe()
    command = f'ln -s "{users}" "{scratch}/mine"; echo x >"{scratch}/f"; touch "{tmp_path}/ready"; sleep 1000'
    process = subprocess.Popen(
        keeper.keep_command(sys.executable, read, 2.0, str(scratch), ["/bin/sh", "-c", command]), pass_fds=(read,), start_new_session=True
    )
    os.close(read)
    deadline = time.monotonic() + 10
    while not (tmp_path / "ready").exists():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    os.close(write)  # as when the run is killed -9
    assert process.wait(5) == -signal.SIGKILL
    assert not scratch.exists() and (users / "kept").read_text() == "the user's"


def test_the_watchdog_removes_a_dead_runs_scratch_directories_its_keepers_didnt(tmp_path):
    """The run and its keepers killed at once (the watchdog SIGKILLs what carries the mark, keepers
    too): the watchdog removes the scratch directories named with the run's mark, and only those,
    following no link planted among them."""
    temp, users = tmp_path / "temp", _users(tmp_path)
    temp.mkdir()
    run_dir = temp / "awf-deadrun1"
    run_dir.mkdir()
    ours = temp / f"{SCRATCH_PREFIX}awf-deadrun1-x1"
    (ours / "cc-socks").mkdir(parents=True)
    (temp / f"{SCRATCH_PREFIX}awf-deadrun1-link").symlink_to(users)
    anothers = temp / f"{SCRATCH_PREFIX}awf-liverun2-x2"
    anothers.mkdir()
    read, write = os.pipe()
    watchdog = subprocess.Popen(
        keeper.watch_command(sys.executable, read, str(run_dir)), pass_fds=(read,), env={**os.environ, "TMPDIR": str(temp)}
    )
    os.close(read)
    os.close(write)  # the run is gone
    watchdog.wait(10)
    assert not run_dir.exists() and not ours.exists()
    assert anothers.is_dir() and (users / "kept").read_text() == "the user's"  # another run's, and a link's target, kept
