"""Which process is at the other end of a unix socket, as the kernel says.

A connection's peer is read from the socket itself (`SO_PEERCRED` on Linux,
`LOCAL_PEERPID` on macOS), never from anything the peer sends, so a process can't
claim to be another. Where the platform gives no peer pid, the answer is `None` and
the caller decides (fail closed where it matters).
"""

from __future__ import annotations

import socket
import struct
import sys

from anyio.abc import SocketAttribute, SocketStream

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_SOL_LOCAL = 0  # macOS <sys/un.h>
_LOCAL_PEERPID = 0x002


def peer_pid(stream: SocketStream) -> int | None:
    """The pid of the process that connected `stream`, or None where it can't be read."""
    try:
        sock: socket.socket = stream.extra(SocketAttribute.raw_socket)
        if sys.platform.startswith("linux"):
            pid, _uid, _gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
            return pid if pid > 0 else None
        if sys.platform == "darwin":
            return struct.unpack("i", sock.getsockopt(_SOL_LOCAL, _LOCAL_PEERPID, 4))[0] or None
    except (OSError, struct.error, KeyError, TypeError):
        return None
    return None
