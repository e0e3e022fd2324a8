"""A pane's program runs with the agent's PATH, in a real tmux.

tmux gives a pane the PATH of the client that made it, not its server's: a pane made by a client
with the system's default PATH ran pi 1.x (a `#!/usr/bin/env node` script) on whichever Node.js
/usr/bin had, not the one the agent's PATH names.
"""

from __future__ import annotations

import os
import shutil

import anyio
import pytest

from agentswf.harnesses.tmux import TmuxServer

from .kit import needs_tmux

pytestmark = [pytest.mark.anyio, needs_tmux]
SCREEN_WAIT_SECONDS = 10.0


async def test_a_panes_program_is_found_on_and_runs_with_the_agents_path(tmp_path):
    tools = tmp_path / "tools"
    tools.mkdir()
    program = tools / "only-here"  # on the agent's PATH alone
    program.write_text('#!/bin/sh\necho "PATH=$PATH"\nexec sleep 60\n')
    program.chmod(0o755)
    path = f"{tools}{os.pathsep}{os.defpath}"
    server = TmuxServer(shutil.which("tmux") or "tmux", tmp_path / "tmux.sock")
    await server.start({"PATH": path, "HOME": str(tmp_path), "TERM": "xterm-256color"}, tmp_path)
    try:
        await server.open_window(["only-here"], tmp_path)
        with anyio.fail_after(SCREEN_WAIT_SECONDS):
            while "PATH=" not in (screen := await server.screen()) and not await server.dead():
                await anyio.sleep(0.05)
        assert f"PATH={path}" in screen.replace("\n", ""), screen
    finally:
        await server.stop()
