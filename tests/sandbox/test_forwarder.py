"""The forwarder (what runs inside in front of the command), run here on the host's loopback:
it relays its proxy port as it is and a tunnel after a CONNECT, and goes when the command does."""

from __future__ import annotations

import socket
import subprocess
import sys
from typing import Any

import anyio
import pytest

from agentswf.sandbox.runner import FORWARDER

from .kit import marked

pytestmark = pytest.mark.anyio


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def exchange(port: int, send: bytes, until: bytes) -> bytes:
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(send)
        got = b""
        with anyio.fail_after(5):
            while until not in got:
                got += await stream.receive()
        return got


async def test_it_relays_to_the_proxy_and_goes_with_the_command(tmp_path):
    heads: list[bytes] = []

    async def fake_proxy(stream: Any) -> None:
        async with stream:
            head = b""
            while b"\r\n\r\n" not in head:
                head += await stream.receive()
            heads.append(head.split(b"\r\n")[0])
            await stream.send(b"HTTP/1.1 200 OK\r\n\r\n")
            rest = head.split(b"\r\n\r\n", 1)[1]
            if rest:
                await stream.send(b"echo:" + rest)
            try:
                while True:
                    await stream.send(b"echo:" + await stream.receive())
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass

    proxy_port, tunnel_port = free_port(), free_port()
    path = tmp_path / "n.sock"
    token = "forwarder-test"
    async with await anyio.create_unix_listener(path) as listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, fake_proxy)
        command = [sys.executable, "-S", "-I", str(FORWARDER), str(path), str(proxy_port), f"127.0.0.1:{tunnel_port}",
                   "--", "sh", "-c", "while [ ! -e $0 ]; do sleep 0.02; done", str(tmp_path / "stop")]  # fmt: skip
        process = subprocess.Popen(command, env={"SANDBOX_TEST": token, "PATH": "/usr/bin:/bin"})
        try:
            with anyio.fail_after(10):
                while len(marked(token)) < 2:  # the command and the relay
                    await anyio.sleep(0.02)
            got = await exchange(proxy_port, b"CONNECT a.test:443 HTTP/1.1\r\n\r\nhi", b"echo:hi")
            assert got.startswith(b"HTTP/1.1 200")
            got = await exchange(tunnel_port, b"ping", b"echo:ping")
            assert got == b"echo:ping"  # the tunnel's CONNECT was answered inside the forwarder
            assert heads == [b"CONNECT a.test:443 HTTP/1.1", f"CONNECT 127.0.0.1:{tunnel_port} HTTP/1.1".encode()]
            (tmp_path / "stop").write_text("")
            assert process.wait(timeout=10) == 0
            with anyio.fail_after(5):
                while marked(token):  # the relay went with the command
                    await anyio.sleep(0.02)
        finally:
            if process.poll() is None:
                process.kill()
            group.cancel_scope.cancel()
