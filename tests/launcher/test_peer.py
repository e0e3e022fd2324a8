"""A process's parent as /proc says it: the read the identity check makes per ancestor."""

from __future__ import annotations

import errno
import os
import socket
import struct
import subprocess
import sys

import pytest

from agentswf.launcher import peer

pytestmark = pytest.mark.skipif(not peer.parents_readable(), reason="no /proc here")


def test_the_parent_of_a_live_process_is_read():
    assert peer.parent_of(os.getpid()) == os.getppid()


def test_a_name_with_a_parenthesis_and_spaces_does_not_shift_the_fields(tmp_path):
    sleeper = tmp_path / "x) 9 (y"  # the kernel names a process after its executable
    sleeper.symlink_to(subprocess.run(["which", "sleep"], capture_output=True, text=True, check=True).stdout.strip())
    child = subprocess.Popen([str(sleeper), "5"])
    try:
        assert peer.parent_of(child.pid) == os.getpid()
    finally:
        child.kill()
        child.wait()


def test_a_gone_process_has_no_parent():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert peer.parent_of(child.pid) is None


def test_out_of_descriptors_is_raised_not_taken_for_a_gone_process(monkeypatch):
    def no_fds(*args: object) -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(peer.os, "open", no_fds)
    with pytest.raises(OSError) as raised:
        peer.parent_of(os.getpid())
    assert raised.value.errno == errno.EMFILE


CONNECT_AND_HOLD = """
import socket, sys
connection = socket.socket(socket.AF_UNIX)
connection.connect(sys.argv[1])
sys.stdout.write("connected\\n"); sys.stdout.flush()
sys.stdin.read()
"""


async def test_a_peer_is_named_only_while_the_process_that_connected_runs(tmp_path):
    """A connector that exited passes as nobody: its pid may already be another process's. One
    named while it ran is the connector no more once it is gone."""
    import anyio
    from anyio.abc import SocketAttribute

    path = tmp_path / "s.sock"
    async with await anyio.create_unix_listener(path) as listener:
        connector = subprocess.Popen(
            [sys.executable, "-c", CONNECT_AND_HOLD, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert connector.stdout is not None and connector.stdin is not None
        async with await listener.accept() as stream:
            sock = stream.extra(SocketAttribute.raw_socket)
            assert connector.stdout.readline() == b"connected\n"
            named = peer.identify(sock)
            assert named == peer.Peer(connector.pid, peer.started_at(connector.pid))
            assert peer.is_connector(named)
            connector.stdin.close()
            connector.wait()  # exited and reaped
            assert peer.identify(sock) == peer.NOBODY
            assert not peer.is_connector(named)


class _Peer(socket.socket):
    """A connected socket whose kernel answers are the test's: the peer's credentials name `pid`,
    and asking for its pidfd fails with `pidfd_errno` (0: the real call)."""

    def __init__(self, pid: int, pidfd_errno: int) -> None:
        super().__init__(socket.AF_UNIX, socket.SOCK_STREAM)
        self.pid, self.pidfd_errno = pid, pidfd_errno

    def getsockopt(self, level: int, option: int, size: int = 0) -> bytes:  # type: ignore[override]
        if option == socket.SO_PEERCRED:
            return struct.pack("3i", self.pid, os.getuid(), os.getgid())
        raise OSError(self.pidfd_errno, os.strerror(self.pidfd_errno))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_PEERCRED and pidfds are Linux's")
def test_a_peer_without_a_pidfd_is_named_only_on_a_kernel_that_has_none():
    """Before Linux 6.5 (the option unknown) the pid is checked against /proc; on a later
    kernel a pidfd refused (EINVAL, ESRCH: the process is reaped) names nobody."""
    live = os.getppid()  # another live process
    with _Peer(live, errno.ENOPROTOOPT) as old_kernel, _Peer(live, errno.EINVAL) as reaped:
        assert peer.identify(old_kernel) == peer.Peer(live, peer.started_at(live))
        assert peer.identify(reaped) == peer.NOBODY
    with _Peer(live, errno.EMFILE) as out_of_fds, pytest.raises(OSError):
        peer.identify(out_of_fds)


def test_the_runs_own_process_is_named_without_a_pidfd(monkeypatch):
    """It has run since before the socket listened: no other process can have held its pid."""

    def no_pidfd(*args: object) -> bool:
        raise AssertionError("the pidfd was read for the run's own pid")

    monkeypatch.setattr(peer, "_still_running", no_pidfd)
    with _Peer(os.getpid(), 0) as own:
        assert peer.identify(own) == peer.Peer(os.getpid())
        assert peer.is_connector(peer.identify(own))
