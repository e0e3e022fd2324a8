"""A tmux server of the agent's own, run under the agent's keeper, driven by tmux's command line.

The server runs in the foreground (`tmux -D`) as the keeper's child, so every process in
its panes descends from the keeper: the agent's socket admits them (launcher/identity.py),
and stopping the keeper stops them all. It reads no configuration (`-f /dev/null`), listens
on a socket in the agent's private directory (`-S`), and its environment, which its panes
inherit, is the agent's and nothing more. Nothing else of the operator's tmux is touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio
from anyio.abc import Process

from ..errors import HarnessError
from .keeper import MARK_VARIABLE, keep_command, kill_marked
from .process import KILL_GRACE_SECONDS, attempt_mark, lifeline, stop_group

TMUX_INSTALL = "apt-get install -y tmux"
SOCKET_WAIT_SECONDS = 10.0  # for the server to listen after it starts
SOCKET_POLL_SECONDS = 0.02
COMMAND_TIMEOUT_SECONDS = 10.0  # one tmux client command
WINDOW = "agent"  # the one window of an agent's server
PANE_WIDTH, PANE_HEIGHT = 200, 50  # columns, lines: wide enough that startup screens don't wrap


def tmux_path(env: Mapping[str, str]) -> str:
    """tmux's executable; HarnessError saying how to install it when it isn't on PATH."""
    found = shutil.which("tmux", path=env.get("PATH", os.defpath))
    if found is None:
        raise HarnessError(f"placement='pane' needs tmux, which is not on PATH: install it with `{TMUX_INSTALL}`")
    return found


class TmuxServer:
    """One agent's tmux server: started under a keeper, its window running the agent's TUI."""

    def __init__(self, tmux: str, socket: Path) -> None:
        self.tmux = tmux
        self.socket = socket
        self.keeper: Process | None = None
        self.mark = ""
        self.path = os.defpath  # the agent's PATH: tmux gives a new pane its client's PATH, not the server's

    @property
    def running(self) -> bool:
        return self.keeper is not None and self.keeper.returncode is None

    async def start(self, env: Mapping[str, str], cwd: Path) -> int:
        """Start the server under a new keeper; the keeper's pid, once the server listens."""
        self.mark = attempt_mark(env)
        self.path = env.get("PATH", os.defpath)
        with anyio.CancelScope(shield=True):  # as in run_in_group: never lose a half-started keeper
            keeper = self.keeper = await anyio.open_process(
                keep_command(sys.executable, lifeline(), KILL_GRACE_SECONDS, [self.tmux, *self._server_args(), "-D"]),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=cwd,
                env={**env, MARK_VARIABLE: self.mark},
                start_new_session=True,
                pass_fds=(lifeline(),),
            )
        with anyio.move_on_after(SOCKET_WAIT_SECONDS):
            while not self.socket.exists():
                if keeper.returncode is not None:
                    break
                await anyio.sleep(SOCKET_POLL_SECONDS)
        if not self.socket.exists():
            await self.stop()
            raise HarnessError(f"tmux did not start its server on {self.socket}")
        return keeper.pid

    def _server_args(self) -> list[str]:
        return ["-S", str(self.socket), "-f", "/dev/null"]

    async def command(self, *args: str) -> str:
        """Run one tmux command against the server; its standard output. HarnessError if it fails."""
        with anyio.fail_after(COMMAND_TIMEOUT_SECONDS):
            done = await anyio.run_process(
                [self.tmux, *self._server_args(), *args], check=False, env={"PATH": self.path}
            )
        if done.returncode != 0:
            raise HarnessError(f"tmux {args[0]} failed: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout.decode(errors="replace")

    async def open_window(self, argv: Sequence[str], cwd: Path) -> None:
        """The agent's window, running `argv`; it stays on screen if `argv` exits (remain-on-exit)."""
        await self.command(
            "new-session", "-d", "-s", WINDOW, "-x", str(PANE_WIDTH), "-y", str(PANE_HEIGHT), "-c", str(cwd),
            ";", "set-option", "-g", "remain-on-exit", "on",
            ";", "set-option", "-g", "history-limit", "5000",
        )
        await self.command("respawn-pane", "-k", "-t", WINDOW, "-c", str(cwd), "--", *argv)

    async def screen(self) -> str:
        """What the pane shows now, as text (no colours), trailing blank lines dropped."""
        return (await self.command("capture-pane", "-p", "-t", WINDOW)).rstrip("\n")

    async def dead(self) -> bool:
        """Whether the pane's program has exited."""
        return (await self.command("display-message", "-p", "-t", WINDOW, "#{pane_dead}")).strip() == "1"

    async def type(self, text: str) -> None:
        """Type `text` into the pane, key by key (`send-keys -l`: nothing in it is a key name)."""
        await self.command("send-keys", "-t", WINDOW, "-l", "--", text)

    async def paste(self, text: str) -> None:
        """Paste `text` into the pane as a bracketed paste."""
        await self.command("set-buffer", "-b", "awf", "--", text)
        await self.command("paste-buffer", "-b", "awf", "-d", "-p", "-t", WINDOW)

    async def keys(self, *names: str) -> None:
        """Press keys by tmux's names (Enter, Down, Escape)."""
        await self.command("send-keys", "-t", WINDOW, *names)

    async def stop(self) -> None:
        """The server and everything in its panes gone: the keeper stops them all."""
        keeper, self.keeper = self.keeper, None
        if keeper is None:
            return
        with anyio.CancelScope(shield=True):
            await stop_group(keeper)
            await keeper.aclose()
            await anyio.to_thread.run_sync(kill_marked, self.mark)
        try:
            self.socket.unlink()
        except OSError:
            pass
