"""The run's tmux client for a pane: checked against the server it started, run in the agent's
tree, and its keepers held as the agent's exactly as long as they live."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

from agentswf.errors import HarnessError
from agentswf.harnesses.tmux import TmuxServer

from .kit import needs_tmux

pytestmark = [pytest.mark.anyio, needs_tmux]


async def test_the_panes_keepers_are_held_while_they_live_and_released_once_reaped():
    directory = Path(tempfile.mkdtemp(prefix="awftm", dir="/tmp"))
    held: list[int] = []

    def holds(pid: int):
        held.append(pid)
        return lambda: held.remove(pid)

    server = TmuxServer(shutil.which("tmux") or "tmux", directory / "t", holds)
    try:
        keeper = await server.start({"PATH": os.defpath, "HOME": str(directory)}, directory)
        assert held == [keeper]
        await server.open_window(["sleep", "60"], directory)
        assert server.client is not None and len(held) == 2  # the client loop's keeper too
        broken = server.client.pid
        os.kill(server.client_pid() or 0, signal.SIGKILL)  # the loop dies: its keeper ends
        try:
            await server.screen()  # the loop's death found by this command...
        except HarnessError as error:
            assert "its client broke" in str(error)
            assert broken not in held and held == [keeper]  # reaped, so released: its pid may be anyone's next
            await server.screen()  # ...and a new loop serves the next
        # (or found before it, its keeper reaped already: then a new loop served this one)
        assert broken not in held and len(held) == 2 and held[0] == keeper
    finally:
        await server.stop()
        shutil.rmtree(directory, ignore_errors=True)
    assert held == []
