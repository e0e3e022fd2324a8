"""`awf attach`: read-only unless --write, and a clear refusal when there is no pane."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from agentswf.cli.attach import attach_argv, find_pane
from agentswf.cli.failures import AttachFailure
from agentswf.cli.main import main
from agentswf.errors import HarnessError
from agentswf.harnesses.pane import pane_socket
from agentswf.harnesses.tmux import TmuxServer

from .kit import needs_tmux

SCREEN_WAIT_SECONDS = 10.0


def a_run(tmp_path: Path, *agents: str) -> Path:
    record = tmp_path / "runs" / "flow" / "r1"
    sockets = tmp_path / "s"
    sockets.mkdir()
    record.mkdir(parents=True)
    (record / "run.json").write_text(json.dumps({"control": str(sockets / "control.sock")}))
    for n, agent in enumerate(agents):
        (record / "calls" / f"c{n}").mkdir(parents=True)
        (record / "calls" / f"c{n}" / "call.json").write_text(json.dumps({"agent": agent}))
    return record


def test_attaching_is_read_only_unless_asked_to_write():
    assert attach_argv("/usr/bin/tmux", Path("/s/t1"), write=False)[-1] == "-r"
    assert "-r" not in attach_argv("/usr/bin/tmux", Path("/s/t1"), write=True)


def test_the_one_agent_in_a_pane_is_found_and_an_absent_one_is_refused(tmp_path):
    record = a_run(tmp_path, "a", "b")
    live = pane_socket(tmp_path / "s", "b")
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(live))
        assert find_pane(tmp_path / "runs", str(record), None) == live
        assert find_pane(tmp_path / "runs", "r1", "b") == live
        with pytest.raises(AttachFailure, match="agent a has no pane running"):
            find_pane(tmp_path / "runs", str(record), "a")


def test_awf_attach_with_nothing_to_attach_to_exits_2(tmp_path, capsys):
    record = a_run(tmp_path, "a")
    assert main(["attach", str(record)]) == 2
    assert "no agent of run r1 has a pane running" in capsys.readouterr().err


def test_closing_a_kept_pane_where_there_is_none_exits_2(tmp_path, capsys):
    record = a_run(tmp_path, "a")
    assert main(["attach", "--close", str(record)]) == 2
    assert "run r1 has no kept pane" in capsys.readouterr().err
    assert main(["attach", "--close", str(record), "a"]) == 2
    assert "agent a of run r1 has no kept pane" in capsys.readouterr().err


@asynccontextmanager
async def pane_server(socket_path: Path, *argv: str) -> AsyncIterator[TmuxServer]:
    """A pane's server as the run starts one (under a keeper), its window running `argv`."""
    server = TmuxServer(shutil.which("tmux") or "tmux", socket_path)
    await server.start({"PATH": os.defpath, "HOME": str(socket_path.parent)}, socket_path.parent)
    try:
        await server.open_window(argv, socket_path.parent)
        yield server
    finally:
        await server.stop()


def attach(record: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentswf", "attach", str(record), "writer"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
    )  # fmt: skip


@needs_tmux
@pytest.mark.anyio
async def test_awf_attach_without_a_terminal_says_it_needs_one_and_prints_the_pane(tmp_path):
    record = a_run(tmp_path, "writer")
    async with pane_server(pane_socket(tmp_path / "s", "writer"), "sh", "-c", "echo the writer is here; sleep 60"):
        deadline = time.monotonic() + SCREEN_WAIT_SECONDS
        attached = await anyio.to_thread.run_sync(attach, record)
        while "the writer is here" not in attached.stdout and time.monotonic() < deadline:  # until the shell drew it
            await anyio.sleep(0.1)
            attached = await anyio.to_thread.run_sync(attach, record)
    assert attached.returncode == 2, attached.stderr  # a usage error, not tmux's own exit 1
    assert "awf: attach needs a terminal" in attached.stderr and "open terminal failed" not in attached.stderr
    assert "| the writer is here" in attached.stdout  # the screen, each line quoted as the agent's


@needs_tmux
@pytest.mark.anyio
async def test_awf_attach_refuses_a_socket_an_agent_swapped_for_a_server_of_its_own(tmp_path):
    """A tmux client runs what its server tells it to (MSG_SHELL, lock-command): `awf attach` would
    run the agent's program in the person's terminal. The server behind the socket is checked first."""
    record = a_run(tmp_path, "writer")
    live = pane_socket(tmp_path / "s", "writer")
    async with pane_server(live, "sleep", "60") as server:
        assert (await anyio.to_thread.run_sync(attach, record)).returncode == 2  # the real one: checked, no terminal
        live.unlink()  # the agent's: a listener of its own where the socket was
        with socket.socket(socket.AF_UNIX) as fake:
            fake.bind(str(live))
            fake.listen()
            refused = await anyio.to_thread.run_sync(attach, record)
            assert refused.returncode == 2 and "not attaching" in refused.stderr, refused.stderr
            assert refused.stdout == ""  # no tmux client ran against it
            with pytest.raises(HarnessError, match="not its server's"):
                await server.screen()  # nor does the run's own
        live.unlink()  # a real tmux server the agent started there, under the pane's keeper, later
        planted = subprocess.run(["tmux", "-S", str(live), "-f", "/dev/null", "new-session", "-d", "sleep 60"],
                                 timeout=10, check=True, env={"PATH": os.defpath})  # fmt: skip
        try:
            refused = await anyio.to_thread.run_sync(attach, record)
            assert refused.returncode == 2 and "not attaching" in refused.stderr, (planted, refused.stderr)
        finally:
            subprocess.run(["tmux", "-S", str(live), "kill-server"], timeout=10, check=False)


@needs_tmux
@pytest.mark.anyio
async def test_awf_attach_refuses_a_server_the_agent_started_in_its_pane_as_the_run_starts_one(tmp_path):
    """The agent's own `tmux -S <socket> -f /dev/null -D`, orphaned in its pane, is a child of the
    pane's keeper with the very command line of the pane's server; it started later, and is refused."""
    record = a_run(tmp_path, "writer")
    live = pane_socket(tmp_path / "s", "writer")
    async with pane_server(live, "sh") as server:
        await server.type(f"rm -f {live}; ({server.tmux} -S {live} -f /dev/null -D >/dev/null 2>&1 &)\n")
        deadline = time.monotonic() + SCREEN_WAIT_SECONDS
        refused = await anyio.to_thread.run_sync(attach, record)
        while "started after" not in refused.stderr and time.monotonic() < deadline:  # until it listens, orphaned
            await anyio.sleep(0.1)
            refused = await anyio.to_thread.run_sync(attach, record)
        assert refused.returncode == 2 and "was started after the pane's server" in refused.stderr, refused.stderr
