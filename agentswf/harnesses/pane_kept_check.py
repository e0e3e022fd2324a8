"""Whether a kept pane's record and server are the ones agentswf made (`pane_keep.py`).

An agent runs as the person, so it can write `/tmp/agentswf-panes-<uid>/` too: plant a
record, make its record a FIFO or a link to `/dev/zero`, or put there a socket that is a
link (hard or symbolic) to another tmux server, the person's own. `awf ls` prints commands
from the records, and `awf attach --close` stops servers and kills process groups by them.
So a record is read bounded and only if it is a regular file; it counts only where each of
its fields has the shape agentswf writes (its socket the one its run and agent give); and a
server is stopped only where the kernel says the process listening on the socket is one
started for that very socket (`tmux -S <socket> …`: the person's own server never is),
whose own children, and nothing else, are the pane programs killed.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import sys
from pathlib import Path

from .regular import read_regular

KEY_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-")  # an agent's key's
MAX_KEY_CHARS = 64
CONNECT_TIMEOUT_SECONDS = 2.0  # to reach a kept pane's server, only to ask the kernel who listens
MAX_PROC_BYTES = 64 * 1024  # of a /proc file read here
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
UNCHECKED = 0  # where the platform names no peer (not Linux): the listener is not checked


def read_record(path: Path, limit: int) -> bytes | None:
    """The bytes of the regular file `path` (not through a link), or None if it is anything else or over `limit`."""
    data = read_regular(path, limit + 1, follow=False)
    return data if data is not None and len(data) <= limit else None


def is_key(text: str) -> bool:
    return 0 < len(text) <= MAX_KEY_CHARS and set(text) <= KEY_CHARACTERS


def plain(*texts: str) -> bool:
    """No control character (a newline, an escape sequence a terminal would act on) in any of `texts`."""
    return all(text.isprintable() for text in texts)


def listener(path: str, timeout: float = CONNECT_TIMEOUT_SECONDS) -> int | None:
    """The pid of the process listening on the unix socket at `path` (not through a symbolic
    link), as the kernel says; None if nothing of ours listens there. `UNCHECKED` where no
    peer can be read. A `timeout` of 0 never blocks (a listener whose backlog is full is None)."""
    try:
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            return None
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(timeout)
            probe.connect(path)
            if not sys.platform.startswith("linux"):
                return UNCHECKED
            pid, uid, _gid = _UCRED.unpack(probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    except (OSError, struct.error):
        return None
    return pid if pid > 0 and uid == os.getuid() else None


def _proc(pid: int, name: str) -> bytes:
    try:
        with open(f"/proc/{pid}/{name}", "rb") as file:
            return file.read(MAX_PROC_BYTES)
    except OSError:
        return b""


def started_for(pid: int, path: str) -> bool:
    """Whether `pid` is a tmux server started for the socket `path` (`tmux -S <path> …`), as `keep` starts one."""
    if pid == UNCHECKED:
        return True
    words = _proc(pid, "cmdline").split(b"\0")
    return len(words) > 2 and os.path.basename(words[0]) == b"tmux" and words[1:3] == [b"-S", os.fsencode(path)]


def parent_of(pid: int) -> int | None:
    try:
        return int(_proc(pid, "stat").rsplit(b")", 1)[1].split()[1])
    except (ValueError, IndexError):
        return None


def children_of(pid: int) -> list[int]:
    """`pid`'s children, from the kernel's list of them (Linux 3.5 and later); none where it can't be read."""
    try:
        return [int(child) for child in _proc(pid, f"task/{pid}/children").split()]
    except ValueError:
        return []


def started_at(pid: int) -> int | None:
    """When `pid` started, in clock ticks since boot (/proc's stat field 22); None once it is gone.
    A pid given to another process comes with another start time."""
    try:
        return int(_proc(pid, "stat").rsplit(b")", 1)[1].split()[19])
    except (ValueError, IndexError):
        return None


def live_pane_server(path: str) -> str | None:
    """None where the process listening on a live pane's socket `path` is the pane's server, as the
    kernel says; else why not. The run starts it as its keeper's first child (`tmux.TmuxServer`),
    and it lives as long as the pane: anything of the agent's under that keeper (an orphan is
    reparented to it) started later. A server an agent started in its place, or a socket it
    swapped for a link, is not the first. The run's own tmux client checks the server by the
    pid and start time it recorded; `awf attach`, another process, checks it by this."""
    server = listener(path)
    if server is None:
        return f"nothing of the run's listens on {path}"
    if server == UNCHECKED:
        return None
    keeper = parent_of(server)
    words = [word for word in _proc(server, "cmdline").split(b"\0") if word]
    kept_by = [word for word in _proc(keeper, "cmdline").split(b"\0") if word] if keeper is not None else []
    # the keeper's command line: `… keep <fd> <grace> <the panes' scratch directory> <the server's>`
    if not started_for(server, path) or kept_by[-len(words) - 4 :][:1] != [b"keep"] or kept_by[-len(words) :] != words:
        return f"process {server} listening on {path} is not a tmux server the run started there"
    started = {child: started_at(child) for child in children_of(keeper or 0)}
    first = min((when, child) for child, when in started.items() if when is not None)[1] if started else None
    if first != server:
        return f"process {server} listening on {path} was started after the pane's server, under its keeper"
    return None


def kept_pane_server(path: str) -> str | None:
    """None where a tmux server started for the kept pane's socket `path` listens there; else why not.
    Weaker than a live pane's check: a kept pane's programs run under no keeper, and a server one of
    them starts for the same socket passes (panes.md says so)."""
    server = listener(path)
    if server is None or not started_for(server, path):
        return f"process {server} listening on {path} is not a tmux server started for it"
    return None
