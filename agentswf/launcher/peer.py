"""Which process is at the other end of a unix socket, as the kernel says.

A connection's peer is read from the socket itself (`SO_PEERCRED` on Linux,
`LOCAL_PEERPID` on macOS), never from anything the peer sends, so a process can't
claim to be another. It is read once, with its start time, as the connection is taken
(`identify`), and a decision about the connection holds only if the pid still names that
process after it (`is_connector`). Where the platform gives no peer pid, the answer is
`None` and the caller decides (fail closed where it matters). A process's parent and
command line are read from /proc, for `identity.py` and for the record of a refusal; when
the run is out of file descriptors (or memory) to read them, that is raised, not taken for
a process that is gone, so the request fails `internal-error` rather than `wrong-agent`.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import struct
import sys
from typing import NamedTuple

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_SOL_LOCAL = 0  # macOS <sys/un.h>
_LOCAL_PEERPID = 0x002
_CANT_LOOK_NOW = (errno.EMFILE, errno.ENFILE, errno.ENOMEM)


_SO_PEERPIDFD = 77  # Linux 6.5+ <asm-generic/socket.h>: a pidfd of the very process that connected


class Peer(NamedTuple):
    """The process that connected, as read once, as its connection is taken (`identify`): its pid
    (None where it can't be told, or it was gone) and its start time (None for the run's own
    process, and where there is no /proc)."""

    pid: int | None
    started: bytes | None = None


NOBODY = Peer(None)


def identify(sock: socket.socket) -> Peer:
    """The process that connected `sock`, read once, as the connection is taken: every decision
    about the connection is about this process (`is_connector`), whatever becomes of its pid.

    A pid alone can lie: the connector may exit and its pid go to another process (an agent's
    own, say) before the request is checked. So its start time is read with it, and then the
    connection's pidfd asked whether that very process still runs: if it does, the start time
    read was its own. The run's own pid needs neither: this process has run since before the
    socket listened. Out of descriptors (or memory) to read /proc with, that is raised: "try
    again", not "nobody"."""
    try:
        if sys.platform == "darwin":
            return Peer(struct.unpack("i", sock.getsockopt(_SOL_LOCAL, _LOCAL_PEERPID, 4))[0] or None)
        if not sys.platform.startswith("linux"):
            return NOBODY
        pid, _uid, _gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
        if pid == os.getpid():
            return Peer(pid)
        started = started_at(pid) if pid > 0 else None
        return Peer(pid, started) if started is not None and _still_running(sock, pid) else NOBODY
    except OSError as error:
        if error.errno in _CANT_LOOK_NOW:  # out of descriptors: "try again", not "not you"
            raise
        return NOBODY
    except struct.error:
        return NOBODY


def is_connector(peer: Peer) -> bool:
    """Whether `peer.pid` names, now, the process that connected: the run's own, or one started
    when the connector was. Asked after a decision made from the pid's /proc files (its parents,
    its environment), it says they were the connector's, not those of a process given its pid
    since."""
    if peer.pid is not None and peer.pid == os.getpid():
        return True
    return peer.pid is not None and peer.started is not None and started_at(peer.pid) == peer.started


def _still_running(sock: socket.socket, pid: int) -> bool:
    """Whether the process that connected `sock`, `pid` by its credentials, runs still.

    Its pidfd names that very process, whatever has become of the pid since: signal 0 sent
    through it (one system call, no /proc file to open and read) fails ESRCH once the process
    is gone (reaped), and only then can its pid have gone to another; EPERM says it runs."""
    try:
        (pidfd,) = struct.unpack("i", sock.getsockopt(socket.SOL_SOCKET, _SO_PEERPIDFD, 4))
    except OSError as error:
        if error.errno in _CANT_LOOK_NOW:
            raise
        if error.errno == errno.ENOPROTOOPT:  # a kernel before 6.5: the pid names some process
            return os.path.exists(f"/proc/{pid}")
        return False  # EINVAL or ESRCH: the kernel has no pidfd for it, as it is reaped
    try:
        signal.pidfd_send_signal(pidfd, 0)
    except PermissionError:
        return True  # it runs, as another user
    except OSError as error:
        if error.errno in _CANT_LOOK_NOW:
            raise
        return False
    finally:
        os.close(pidfd)
    return True


MAX_COMMAND_BYTES = 2048  # of a refused process's command line, as recorded


def parents_readable() -> bool:
    """Whether another process's parent can be read here (Linux /proc); identity needs it."""
    return os.path.exists("/proc/self/stat")


MAX_STAT_BYTES = 4096  # of /proc/<pid>/stat: one line of about 300 bytes (a name of at most 64)


def stat_fields(pid: int) -> list[bytes] | None:
    """The fields of /proc/<pid>/stat after its name (so the state is [0], the parent [1]); None
    once it is gone (or unreadable).

    Read with one `os.read` rather than through `open()`'s buffered file: this runs for
    every ancestor of every request's peer, and the file object costs as much as the read."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.read(fd, MAX_STAT_BYTES)
        finally:
            os.close(fd)
    except OSError as error:
        if error.errno in _CANT_LOOK_NOW:
            raise
        return None
    return data.rsplit(b")", 1)[1].split() if b")" in data else None


def parent_of(pid: int) -> int | None:
    """The parent of `pid`, from /proc; None once it is gone (or unreadable)."""
    fields = stat_fields(pid)
    try:
        return int(fields[1]) if fields is not None else None
    except (ValueError, IndexError):
        return None


STARTTIME_FIELD = 19  # of `stat_fields`: /proc/<pid>/stat's field 22, the start time


def started_at(pid: int) -> bytes | None:
    """When `pid` started (in clock ticks since boot); None once it is gone. A pid given to
    another process comes with another start time (`is_connector`)."""
    fields = stat_fields(pid)
    return fields[STARTTIME_FIELD] if fields is not None and len(fields) > STARTTIME_FIELD else None


def command_of(pid: int | None) -> list[str]:
    """The command line `pid` runs, cut at `MAX_COMMAND_BYTES` (empty once it is gone)."""
    if pid is None:
        return []
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            data = cmdline.read(MAX_COMMAND_BYTES)
    except OSError:
        return []
    return [word.decode(errors="replace") for word in data.rstrip(b"\0").split(b"\0")] if data else []


def environment_value(pid: int, name: str) -> str | None:
    """The value of `name` in the environment `pid` was started with, from /proc; None if unset or unreadable."""
    prefix = name.encode() + b"="
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            variables = environ.read().split(b"\0")
    except OSError as error:
        if error.errno in _CANT_LOOK_NOW:
            raise
        return None
    for variable in variables:
        if variable.startswith(prefix):
            return variable[len(prefix) :].decode(errors="replace")
    return None
