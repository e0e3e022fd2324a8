"""The dev server fixture: on loopback, healthy, and gone once stopped."""

from __future__ import annotations

import socket
import subprocess

import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

from agentswf.temporal.devserver import DevServer, server_binary


def test_the_session_server_answers_on_loopback(temporal_address: str) -> None:
    done = subprocess.run(
        [str(server_binary()), "operator", "cluster", "health", "--address", temporal_address],
        capture_output=True, text=True, timeout=30,
    )
    assert "SERVING" in done.stdout
    assert temporal_address.startswith("127.0.0.1:")


def test_a_stopped_server_leaves_nothing_listening() -> None:
    server = DevServer().start()
    process = server._process
    assert process is not None
    server.stop()
    assert process.poll() is not None
    with socket.socket() as probe, pytest.raises(OSError):
        probe.settimeout(0.2)
        probe.connect(("127.0.0.1", server.port))
