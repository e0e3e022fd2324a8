"""Kept panes (`Runtime(keep_pane=…)`): an agent's TUI left after its run, for a person to read.

When the agent closes (its run ends, or it is stopped) and its policy says so ("always", or
"on-failure" when its last turn wasn't answered), everything of the run's pane is stopped as
usual; once the run has ended (`keep_when_run_ends`: its operator socket gone, so nothing in
the pane can approve or answer as a person), its TUI is started again on the same session in a
tmux server of its own, outside the run: no keeper, no run mark, no `wfa` and no agent socket in its environment, so it is
released from the run and can't answer it. The person reads the conversation there, or goes
on with it as their own session. The server's socket and a small record of it
(`<socket>.json`) are in `/tmp/agentswf-panes-<uid>/` (mode 0700); `awf ls` lists the
live ones, `awf attach RUN AGENT` attaches to one (read-only unless `--write`), and
`awf attach --close RUN AGENT` (or `--close-all`) stops it. agentswf never stops a kept
pane on its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Literal

import anyio
import msgspec
import structlog

from ..errors import HarnessError
from .keeper import MARK_VARIABLE
from .pane_kept_check import UNCHECKED, is_key, listener, parent_of, plain, read_record, started_for
from .tmux import COMMAND_TIMEOUT_SECONDS, PANE_HEIGHT, PANE_WIDTH, WINDOW

log = structlog.get_logger("agentswf.panes")

KeepPane = Literal["never", "on-failure", "always"]
KEEP_PANE_CHOICES: tuple[KeepPane, ...] = ("never", "on-failure", "always")
KEPT_DIRECTORY_MODE = 0o700
RELEASED_PREFIXES = ("WFA",)  # the agent's `wfa` and call: a kept pane can't answer the run
MAX_KEPT_RECORD_BYTES = 64 * 1024
CLOSE_GRACE_SECONDS = 3.0  # for a closed pane's TUI to exit on its hangup, before its group is killed
CLOSE_POLL_SECONDS = 0.05
KEPT_ROOT = "/tmp"  # not $TMPDIR: `awf ls` and `awf attach` find kept panes from any shell, and the path stays short


class KeptPane(msgspec.Struct, frozen=True):
    """One kept pane, as its record says: whose it was, and where its server listens."""

    socket: str
    agent: str
    harness: str
    run_sockets: str  # the run's sockets directory (run.json's `control` is in it): which run it was
    session: str
    cwd: str
    kept_at: float


def should_keep(policy: KeepPane, last_outcome: str | None) -> bool:
    """Whether a pane is kept when its agent closes, by its policy and its last turn's outcome."""
    if policy == "always":
        return True
    return policy == "on-failure" and last_outcome is not None and last_outcome != "answered"


def kept_directory() -> Path:
    return Path(KEPT_ROOT) / f"agentswf-panes-{os.getuid()}"


def kept_socket(run_sockets: Path, agent: str) -> Path:
    """Where agent `agent` of the run whose sockets are in `run_sockets` has its kept pane."""
    return kept_directory() / f"{run_sockets.name}-{hashlib.sha256(agent.encode()).hexdigest()[:12]}"


def released_env(env: Mapping[str, str]) -> dict[str, str]:
    """The agent's environment without what ties it to the run (its `wfa`, the run's mark)."""
    return {
        name: value for name, value in env.items()
        if name != MARK_VARIABLE and not name.startswith(RELEASED_PREFIXES)
    }  # fmt: skip


class PanesToKeep:
    """The panes one run's agents keep, started once the run has ended (`keep_all`). One a run:
    engine/run.py's `run_actors` sets it in RUN_PANES, so the run's tasks (its agents' among them)
    find their own run's, and nothing of one run's panes is in another's or outlives it."""

    def __init__(self) -> None:
        self.panes: list[tuple[str, KeptPane, tuple[str, ...], dict[str, str]]] = []

    async def keep_all(self) -> None:
        """The run has ended: start the panes its agents keep."""
        panes, self.panes = self.panes, []
        for tmux, pane, argv, env in panes:
            try:
                await keep(tmux, pane, argv, env)
            except (HarnessError, OSError, TimeoutError) as error:
                log.warning("the pane could not be kept", agent=pane.agent, error=str(error))


RUN_PANES: ContextVar[PanesToKeep | None] = ContextVar("agentswf_run_panes", default=None)


def keep_when_run_ends(tmux: str, pane: KeptPane, argv: Sequence[str], env: Mapping[str, str]) -> None:
    """Keep `pane` once its run has ended (`PanesToKeep.keep_all`), not before: a pane started
    beside a live run, under no keeper and no mark, would reach its operator socket as a person.
    Outside a run there is no end to wait for, and nothing is kept."""
    panes = RUN_PANES.get()
    if panes is None:
        log.warning("the pane could not be kept: its agent closed outside a run", agent=pane.agent)
        return
    panes.panes.append((tmux, pane, tuple(argv), dict(env)))


async def keep(tmux: str, pane: KeptPane, argv: Sequence[str], env: Mapping[str, str]) -> None:
    """Start the kept pane's own tmux server, running `argv` (the TUI resumed), and record it."""
    directory = kept_directory()
    directory.mkdir(mode=KEPT_DIRECTORY_MODE, exist_ok=True)
    directory.chmod(KEPT_DIRECTORY_MODE)
    with contextlib.suppress(FileNotFoundError):  # what an agent put at the path its run and key give
        os.unlink(pane.socket)  # (a link to the person's tmux server): tmux would start the pane in it
    server = [tmux, "-S", pane.socket, "-f", "/dev/null"]
    size = ["-x", str(PANE_WIDTH), "-y", str(PANE_HEIGHT)]
    command = [*server, "new-session", "-d", "-s", WINDOW, *size, "-c", pane.cwd, "--", *argv]
    with anyio.fail_after(COMMAND_TIMEOUT_SECONDS):
        done = await anyio.run_process(
            [*command, ";", "set-option", "-g", "remain-on-exit", "on"],
            check=False, env=released_env(env), cwd=pane.cwd, stdin=subprocess.DEVNULL,
        )
    if done.returncode != 0:
        raise HarnessError(f"tmux did not start the kept pane: {done.stderr.decode(errors='replace').strip()}")
    Path(f"{pane.socket}.json").write_bytes(msgspec.json.encode(pane))


def _live(socket: str) -> bool:
    return bool(_tmux(socket, "list-sessions", "-F", "#{session_name}").strip())


def kept_panes() -> list[KeptPane]:
    """The kept panes whose server still runs, oldest first; the records of gone ones are removed."""
    found = []
    for record in sorted(kept_directory().glob("*.json")):
        data = read_record(record, MAX_KEPT_RECORD_BYTES)  # a FIFO, a link to /dev/zero: not read
        try:
            pane = msgspec.json.decode(data or b"", type=KeptPane)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        if not _as_written(pane):  # a record an agent wrote: nothing of it is printed, stopped or removed
            continue
        server = listener(pane.socket)
        if server is None:
            with contextlib.suppress(OSError):  # a directory planted by the socket's name stays
                record.unlink(missing_ok=True)
                Path(pane.socket).unlink(missing_ok=True)
        elif started_for(server, pane.socket) and _live(pane.socket):
            found.append(pane)
    return sorted(found, key=lambda pane: pane.kept_at)


def _as_written(pane: KeptPane) -> bool:
    """Whether each of the record's fields has the shape `keep` writes: its socket the one its run and agent give."""
    return (
        plain(pane.socket, pane.agent, pane.harness, pane.run_sockets, pane.session, pane.cwd)
        and is_key(pane.agent) and is_key(pane.harness) and Path(pane.run_sockets).is_absolute()
        and pane.socket == str(kept_socket(Path(pane.run_sockets), pane.agent))
    )


def _tmux(socket: str, *args: str) -> str:
    try:
        done = subprocess.run(
            ["tmux", "-S", socket, *args], capture_output=True, timeout=COMMAND_TIMEOUT_SECONDS,
            env={"PATH": os.defpath}, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.decode(errors="replace")


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except OSError:
        return True


def close_kept(pane: KeptPane) -> None:
    """Stop a kept pane's server and the TUI in it (its process group killed if it outlasts a
    grace after its hangup), and remove its record."""
    server = listener(pane.socket)
    if server is None or not started_for(server, pane.socket):  # gone, or a link to another tmux server
        with contextlib.suppress(OSError):
            Path(f"{pane.socket}.json").unlink(missing_ok=True)
            Path(pane.socket).unlink(missing_ok=True)
        return
    listed = [int(pid) for pid in _tmux(pane.socket, "list-panes", "-a", "-F", "#{pane_pid}").split() if pid.isdigit()]
    leaders = [pid for pid in listed if server == UNCHECKED or parent_of(pid) == server]  # the server's own children
    _tmux(pane.socket, "kill-server")  # each pane's program gets a hangup
    deadline = time.monotonic() + CLOSE_GRACE_SECONDS
    while not all(_gone(pid) for pid in leaders) and time.monotonic() < deadline:
        time.sleep(CLOSE_POLL_SECONDS)
    for pid in leaders:
        if not _gone(pid):
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)  # a pane's program leads its own process group
    with contextlib.suppress(OSError):
        Path(f"{pane.socket}.json").unlink(missing_ok=True)
        Path(pane.socket).unlink(missing_ok=True)
