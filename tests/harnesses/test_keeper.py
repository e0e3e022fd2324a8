"""The keeper on its own: the CLI's exit status passed through as the CLI's, its tree killed when
the CLI ends, on SIGTERM after the grace, and at once when its lifeline closes; forks while it kills."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from agentswf.harnesses import keeper
from agentswf.harnesses.process import run_in_group

from .kit import alive

pytestmark = pytest.mark.anyio


async def run(command: str, tmp_path: Path, **kwargs):
    return await run_in_group(["/bin/sh", "-c", command], input=b"", cwd=tmp_path, env=dict(os.environ), **kwargs)


@pytest.mark.parametrize(
    "command, status",
    [("exit 0", 0), ("exit 3", 3), ("kill -SEGV $$", -signal.SIGSEGV), ("kill -KILL $$", -signal.SIGKILL)],
)
async def test_the_clis_exit_status_is_the_keepers(tmp_path, command, status):
    assert (await run(command, tmp_path)).exit_code == status


async def test_a_program_that_cant_be_run_exits_127_saying_why(tmp_path):
    exited = await run_in_group(["/nonexistent/cli"], input=b"", cwd=tmp_path, env=dict(os.environ))
    assert exited.exit_code == 127 and "can't run /nonexistent/cli" in exited.stderr


async def test_the_keeper_is_the_root_of_the_attempt_and_the_cli_runs_on_its_streams(tmp_path):
    roots: list[int] = []
    exited = await run('echo "$PPID"; cat; echo err >&2', tmp_path, started=roots.append)
    assert exited.stdout.split()[0] == str(roots[0]) and exited.stderr == "err\n"
    assert not alive(roots[0])


def spawn_keeper(command: str, grace: float = 2.0) -> tuple[subprocess.Popen[bytes], int]:
    """A keeper started by hand, with a lifeline of its own: (the keeper, the lifeline's write end)."""
    read, write = os.pipe()
    process = subprocess.Popen(
        keeper.keep_command(sys.executable, read, grace, None, ["/bin/sh", "-c", command]), pass_fds=(read,), start_new_session=True
    )
    os.close(read)
    return process, write


def wait_for_lines(path: Path, count: int) -> list[int]:
    deadline = time.monotonic() + 10
    while not path.exists() or len(path.read_text().split()) < count:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    return [int(pid) for pid in path.read_text().split()]


ESCAPING = (
    'setsid sh -c \'trap "" TERM HUP; echo $$ >>"{pids}"; exec sleep 1000\' </dev/null >/dev/null 2>&1 & '
    "( sh -c 'echo $$ >>\"{pids}\"; exec sleep 1000' & ); "
)


def test_closing_the_lifeline_kills_the_tree_at_once(tmp_path):
    pids = tmp_path / "pids"
    process, write = spawn_keeper(ESCAPING.format(pids=pids) + "sleep 1000")
    escaped = wait_for_lines(pids, 2)
    started = time.monotonic()
    os.close(write)  # as when the run dies
    assert process.wait(5) == -signal.SIGKILL  # the CLI was killed, and the keeper says so
    assert time.monotonic() - started < 1.0
    assert [pid for pid in escaped if alive(pid)] == []


def test_sigterm_gives_the_cli_its_grace_then_kills_what_is_left(tmp_path):
    pids = tmp_path / "pids"
    ignores_term = f'trap "" TERM; echo $$ >>"{pids}"; while :; do sleep 0.05; done'  # the pid once TERM is ignored
    process, write = spawn_keeper(ESCAPING.format(pids=pids) + ignores_term, grace=0.5)
    escaped = wait_for_lines(pids, 3)
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    assert process.wait(5) == -signal.SIGKILL  # the CLI ignored SIGTERM: killed after the grace
    assert 0.5 <= time.monotonic() - started < 2.0
    assert [pid for pid in escaped if alive(pid)] == []
    os.close(write)


def test_processes_forking_while_they_are_killed_are_all_killed(tmp_path):
    command = f'for i in 1 2 3 4 5 6; do (while :; do sleep 1000 & echo $! >>"{tmp_path}/pids"; sleep 0.002; done) & done; sleep 0.3'
    process, write = spawn_keeper(command)
    assert process.wait(10) == 0
    time.sleep(0.05)
    forked = [int(pid) for pid in (tmp_path / "pids").read_text().split()]
    assert len(forked) > 20 and [pid for pid in forked if alive(pid)] == []
    os.close(write)


async def test_cancelling_stops_the_keeper_and_its_tree(tmp_path):
    pids = tmp_path / "pids"
    async with anyio.create_task_group() as group:
        group.start_soon(run, ESCAPING.format(pids=pids) + "sleep 1000", tmp_path)
        with anyio.fail_after(10):
            while not pids.exists() or len(pids.read_text().split()) < 2:  # both escapes started
                await anyio.sleep(0.01)
        group.cancel_scope.cancel()
    assert [pid for pid in wait_for_lines(pids, 2) if alive(pid)] == []
