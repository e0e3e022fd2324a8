"""A tmux server of the agent's own, run under the agent's keeper, driven by tmux's command line.

The server runs in the foreground (`tmux -D`) as the keeper's child, so every process in
its panes descends from the keeper: the agent's socket admits them (launcher/identity.py),
and stopping the keeper stops them all. It reads no configuration (`-f /dev/null`), listens
on a socket in the agent's private directory (`-S`), and its environment, which its panes
inherit, is the agent's and nothing more. Nothing else of the operator's tmux is touched.

The pane is the agent's for as long as it lives: its keeper is held as the agent's
(`Attempt.holds`), so nothing in it reaches the operator socket between turns either. And
the run's own tmux client obeys no server of the agent's: the socket's path is in the pane's
`$TMUX`, and a client execs what its server tells it to. Before each command the kernel is
asked who listens on the socket (`SO_PEERCRED`: the server started, by pid and start time),
and the client runs in the agent's tree anyway, under a second keeper of the pane's
(`tmux_runner.py`), so what a server an agent swapped in between the check and the command
makes it run is the agent's: refused as the agent's and swept.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from ..errors import HarnessError
from .keeper import KILL_PATIENCE_SECONDS, MARK_VARIABLE, PASS_PAUSE_SECONDS, keep_command, kill_marked, remove_tree
from .pane_kept_check import children_of, listener, parent_of, started_at
from .process import KILL_GRACE_SECONDS, attempt_mark, lifeline, scratch_directory, stop_group

TMUX_INSTALL = "apt-get install -y tmux"
SOCKET_WAIT_SECONDS = 10.0  # for the server to listen after it starts
SOCKET_POLL_SECONDS = 0.02
COMMAND_TIMEOUT_SECONDS = 10.0  # one tmux client command
MAX_ANSWER_BYTES = 4 * 1024 * 1024  # of one command's output (a 200x50 screen is some 10 KiB)
MAX_HEADER_BYTES = 64  # of an answer's header line: three numbers
_RUNNER = (
    f"import sys; sys.path.append({os.path.dirname(os.path.abspath(__file__))!r}); "
    "import tmux_runner; tmux_runner.main(sys.argv[1:])"
)
WINDOW = "agent"  # the one window of an agent's server
PANE_WIDTH, PANE_HEIGHT = 200, 50  # columns, lines: wide enough that startup screens don't wrap


def tmux_path(env: Mapping[str, str]) -> str:
    """tmux's executable; HarnessError saying how to install it when it isn't on PATH."""
    found = shutil.which("tmux", path=env.get("PATH", os.defpath))
    if found is None:
        raise HarnessError(f"placement='pane' needs tmux, which is not on PATH: install it with `{TMUX_INSTALL}`")
    return found


class TmuxServer:
    """One agent's tmux server: started under a keeper, its window running the agent's TUI.

    `holds` is told each keeper it starts (the server's and its client's): the agent's until
    the server stops."""

    def __init__(self, tmux: str, socket: Path, holds: Callable[[int], Callable[[], None]] | None = None) -> None:
        self.tmux = tmux
        self.socket = socket
        self.holds = holds
        self.keeper: Process | None = None
        self.scratch: str | None = None  # the panes' TMPDIR, as an unsandboxed attempt's (process.py), gone with the server
        self.mark = ""
        self.path = os.defpath  # the agent's PATH: tmux gives a new pane its client's PATH, not the server's
        self.server: tuple[int, int] | None = None  # the server's pid and start time, as the kernel said
        self.tui: int | None = None  # the pane's own program, the TUI
        self.tui_tree: dict[int, int] = {}  # the TUI and what it ran as it started: what a sweep leaves
        self.client: Process | None = None  # the keeper of tmux_runner.py, our tmux client in the agent's tree
        self.client_runner: int | None = None
        self.answers: BufferedByteReceiveStream | None = None
        self.lock = anyio.Lock()
        self.releases: dict[int, Callable[[], None]] = {}  # by keeper pid: released once it is reaped

    @property
    def running(self) -> bool:
        return self.keeper is not None and self.keeper.returncode is None

    def _hold(self, pid: int) -> None:
        if self.holds is not None:
            self.releases[pid] = self.holds(pid)

    def _release(self, pid: int) -> None:
        """`pid` is reaped: nobody's now (it may be given to another process, a person's `awf`)."""
        release = self.releases.pop(pid, None)
        if release is not None:
            release()

    async def start(self, env: Mapping[str, str], cwd: Path) -> int:
        """Start the server under a new keeper; the keeper's pid, once the server listens."""
        self.mark = attempt_mark(env)
        self.path = env.get("PATH", os.defpath)
        scratch = self.scratch = scratch_directory(env)
        with anyio.CancelScope(shield=True):  # as in run_in_group: never lose a half-started keeper
            keeper = self.keeper = await anyio.open_process(
                keep_command(sys.executable, lifeline(), KILL_GRACE_SECONDS, scratch, [self.tmux, *self._server_args(), "-D"]),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=cwd,
                env={**env, "TMPDIR": scratch, MARK_VARIABLE: self.mark},
                start_new_session=True,
                pass_fds=(lifeline(),),
            )
            self._hold(keeper.pid)
        with anyio.move_on_after(SOCKET_WAIT_SECONDS):
            while self.server is None:
                if keeper.returncode is not None:
                    break
                self.server = _listening_child(keeper.pid, self.socket)
                await anyio.sleep(SOCKET_POLL_SECONDS)
        if self.server is None:
            await self.stop()
            raise HarnessError(f"tmux did not start its server on {self.socket}")
        return keeper.pid

    def _server_args(self) -> list[str]:
        return ["-S", str(self.socket), "-f", "/dev/null"]

    def check(self) -> None:
        """HarnessError unless the process listening on the socket is the server started, as the kernel says."""
        listening = listener(str(self.socket), timeout=0.0)
        if self.server is None or listening != self.server[0] or started_at(listening) != self.server[1]:
            raise HarnessError(
                f"the pane's tmux socket {self.socket} is not its server's (process {listening} listens there): "
                "something in the agent's pane replaced it, and the run sends it nothing"
            )

    async def command(self, *args: str) -> str:
        """Run one tmux command against the server; its standard output. HarnessError if it fails."""
        async with self.lock:
            self.check()
            with anyio.fail_after(COMMAND_TIMEOUT_SECONDS):
                try:
                    status, out, err = await self._ask(list(args))
                except (OSError, anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound, ValueError) as error:
                    await self._stop_client()
                    raise HarnessError(f"tmux {args[0]} failed: its client broke ({error})") from None
        if status != 0:
            raise HarnessError(f"tmux {args[0]} failed: {err.decode(errors='replace').strip()}")
        return out.decode(errors="replace")

    async def _ask(self, args: list[str]) -> tuple[int, bytes, bytes]:
        if self.client is None or self.client.returncode is not None:
            await self._start_client()
        assert self.client is not None and self.client.stdin is not None and self.answers is not None
        await self.client.stdin.send(json.dumps(args).encode() + b"\n")
        header = await self.answers.receive_until(b"\n", MAX_HEADER_BYTES)
        status, out_bytes, err_bytes = (int(word) for word in header.split())  # ValueError: not three numbers
        if not 0 <= out_bytes <= MAX_ANSWER_BYTES or not 0 <= err_bytes <= MAX_ANSWER_BYTES:
            raise ValueError(f"an answer of {out_bytes} + {err_bytes} bytes")
        out = await self.answers.receive_exactly(out_bytes) if out_bytes else b""
        err = await self.answers.receive_exactly(err_bytes) if err_bytes else b""
        return status, out, err

    async def _start_client(self) -> None:
        """The tmux client loop, under a keeper of its own with the pane's mark, held as the agent's."""
        runner = [sys.executable, "-S", "-I", "-c", _RUNNER, self.tmux, str(self.socket), repr(COMMAND_TIMEOUT_SECONDS)]
        with anyio.CancelScope(shield=True):
            client = self.client = await anyio.open_process(
                keep_command(sys.executable, lifeline(), KILL_GRACE_SECONDS, None, runner),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env={"PATH": self.path, MARK_VARIABLE: self.mark},
                start_new_session=True,
                pass_fds=(lifeline(),),
            )
            self._hold(client.pid)
        assert client.stdout is not None
        self.answers = BufferedByteReceiveStream(client.stdout)

    async def _stop_client(self) -> None:
        client, self.client, self.answers, self.client_runner = self.client, None, None, None
        if client is not None:
            with anyio.CancelScope(shield=True):
                await stop_group(client)
                await client.aclose()
            self._release(client.pid)

    async def open_window(self, argv: Sequence[str], cwd: Path) -> None:
        """The agent's window, running `argv`; it stays on screen if `argv` exits (remain-on-exit)."""
        await self.command(
            "new-session", "-d", "-s", WINDOW, "-x", str(PANE_WIDTH), "-y", str(PANE_HEIGHT), "-c", str(cwd),
            ";", "set-option", "-g", "remain-on-exit", "on",
            ";", "set-option", "-g", "history-limit", "5000",
        )
        await self.command("respawn-pane", "-k", "-t", WINDOW, "-c", str(cwd), "--", *argv)
        told = (await self.command("display-message", "-p", "-t", WINDOW, "#{pane_pid}")).strip()
        # the server says which process the TUI is; the kernel says whether it is the server's child
        if self.server is None or not told.isdigit() or parent_of(int(told)) != self.server[0]:
            raise HarnessError(f"tmux named {told!r} as the pane's program, which is not a process of its server")
        self.tui = int(told)

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

    def settled(self) -> None:
        """The TUI has started and takes input, and nothing was asked of it yet: the processes it runs
        now (itself; the native binary of an npm wrapper, its helpers) are the TUI, kept by `sweep`."""
        self.tui_tree = {}
        todo = [self.tui] if self.tui is not None else []
        while todo:
            pid = todo.pop()
            started = started_at(pid)
            if started is not None:
                self.tui_tree[pid] = started
                todo.extend(children_of(pid))

    async def sweep(self) -> int:
        """Kill what the agent left running in its pane beyond the TUI itself (a `&`, a `nohup`, a
        background shell of the TUI's, another window), and beyond the client loop in its keeper;
        how many were killed. Called as a turn ends: the pane's server and TUI live on to the next."""
        kept = {pid for pid in (self.server[0] if self.server else None, self.client_pid()) if pid}
        kept |= {pid for pid, started in self.tui_tree.items() if started_at(pid) == started}
        keepers = [process.pid for process in (self.keeper, self.client) if process is not None]
        return await anyio.to_thread.run_sync(sweep_beside, keepers, kept)

    def client_pid(self) -> int | None:
        """The client loop's pid: the only child of its keeper that the sweep leaves."""
        if self.client is None or self.client.returncode is not None:
            return None
        if self.client_runner is None:
            found = children_of(self.client.pid)
            self.client_runner = found[0] if len(found) == 1 else None
        return self.client_runner

    async def stop(self) -> None:
        """The server and everything in its panes gone: the keeper stops them all."""
        await self._stop_client()
        keeper, self.keeper, scratch, self.scratch = self.keeper, None, self.scratch, None
        self.server, self.tui, self.tui_tree = None, None, {}  # a start after this finds its own
        if keeper is None:
            return
        with anyio.CancelScope(shield=True):
            await stop_group(keeper)
            await keeper.aclose()
            await anyio.to_thread.run_sync(kill_marked, self.mark)
            if scratch is not None:
                await anyio.to_thread.run_sync(remove_tree, scratch)
        self._release(keeper.pid)
        try:
            self.socket.unlink()
        except OSError:
            pass


def _live(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def _listening_child(keeper: int, socket: Path) -> tuple[int, int] | None:
    """The server, once it listens: the keeper's child the kernel says listens on `socket`, with its start time."""
    children = children_of(keeper)
    if len(children) != 1:
        return None
    listening = listener(str(socket), timeout=0.0)
    started = started_at(children[0]) if listening == children[0] else None
    return (children[0], started) if started is not None else None


def sweep_beside(keepers: list[int], kept: set[int]) -> int:
    """SIGKILL every process under `keepers` but those in `kept`, in passes until a pass finds none
    (what a killed process leaves is reparented to its keeper, a subreaper, for the next pass); how
    many were killed. The kept and the keepers themselves are walked through, never signalled."""
    killed = 0
    give_up = time.monotonic() + KILL_PATIENCE_SECONDS
    while time.monotonic() < give_up:
        found = []
        todo = list(keepers)
        while todo:
            for child in children_of(todo.pop()):
                if child in kept:
                    todo.append(child)
                elif _live(child):  # a zombie is dead already, its parent's to reap
                    found.append(child)
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        killed += len(found)
        time.sleep(PASS_PAUSE_SECONDS)
    return killed
