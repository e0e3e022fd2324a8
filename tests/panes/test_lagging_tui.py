"""A pane's startup screens answered on a TUI that lags as claude does under load, in a real tmux.

The TUI here is a small program of the test's own, standing in for claude's trust menu (which
can't be made to lag on demand): it drops the keys pressed in its first moments, draws each
key's effect late, and its menu wraps from "Yes" back to "No, exit", which exits. A pane that
pressed a key per stale screen ran past "Yes" and confirmed "No, exit".
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from agentswf.harnesses.pane import PaneHarness
from agentswf.harnesses.pane_spec import StartupScreen, TuiSpec
from agentswf.harnesses.pi import PiHarness
from agentswf.harnesses.tmux import TmuxServer

from .kit import needs_tmux

pytestmark = [pytest.mark.anyio, needs_tmux]

LAGGING_MENU = r"""
import os, sys, termios, time, tty
DROP, LAG = float(sys.argv[1]), float(sys.argv[2])
tty.setraw(0)
options, at = ["No, exit", "Yes, I trust this folder"], 0
def draw(text):
    os.write(1, b"\x1b[2J\x1b[H" + text.replace("\n", "\r\n").encode())
def menu():
    lines = [(" > " if n == at else "   ") + option for n, option in enumerate(options)]
    draw("Quick safety check: trust this folder?\n\n" + "\n".join(lines) + "\n\nEnter to confirm\n")
menu()
started = time.monotonic()
while True:
    key = os.read(0, 1)
    if key == b"\x1b":
        key += os.read(0, 2)
    if time.monotonic() - started < DROP:
        continue  # not reading its keys yet: dropped
    time.sleep(LAG)  # drawn late
    if key == b"\x1b[B":
        at = (at + 1) % len(options)
    elif key == b"\x1b[A":
        at = (at - 1) % len(options)
    elif key == b"\r":
        if at == 0:
            draw("EXITED\n")
            sys.exit(1)
        draw("READY: ? for help\n")
        while True:
            os.read(0, 1)
    menu()
"""

LAGGING_TUI = TuiSpec(
    startup=(StartupScreen("trust this folder?", "Yes, I trust this folder"),),
    ready=("? for help",),
    busy=(),
    blocked=(),
    login=(),
    typed=True,
    confirms_delivery=False,
    launch=lambda cli, session: ([], session),
    cursor=">",
    settle=0.5,
)


@pytest.mark.parametrize("drop,lag", [(0.6, 0.4), (0.0, 0.5)])
async def test_a_lagging_menu_that_drops_early_keys_is_answered_with_its_choice(tmp_path, drop, lag):
    program = tmp_path / "menu.py"
    program.write_text(LAGGING_MENU)
    pane = PaneHarness(PiHarness("/bin/true"), LAGGING_TUI, "tmux")
    socket = Path(os.environ.get("TMPDIR", "/tmp")) / f"awf-lag-{os.getpid()}-{tmp_path.name[-12:]}"
    pane.server = TmuxServer("tmux", socket)
    env = {"PATH": os.defpath, "HOME": str(tmp_path), "TERM": "xterm-256color"}
    await pane.server.start(env, tmp_path)
    try:
        await pane.server.open_window([sys.executable, str(program), str(drop), str(lag)], tmp_path)
        assert await pane._past_startup() is None
        screen = await pane.server.screen()
        assert "READY" in screen and "EXITED" not in screen, screen
    finally:
        await pane.server.stop()
