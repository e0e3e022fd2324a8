"""Where an agent's socket and launcher live, and the launcher script itself.

Each run gets `/tmp/awf-XXXX` (mode 0300: its owner can enter it but nobody can list
it, so an agent can't find a sibling's socket), and each agent a 0700 directory in it
holding the socket and `wfa`, a launcher of mode 0500 (an agent can't overwrite its
only way to answer) that runs the client on this interpreter with `-S -I`. `/tmp` and short names keep the socket path well
under the 104-byte limit of `sun_path`, and short enough that cheap models copy it right.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from . import client

RUN_DIR_MODE = 0o300
AGENT_DIR_MODE = 0o700
LAUNCHER_MODE = 0o500
SOCKET_NAME = "s.sock"
LAUNCHER_NAME = "wfa"
SOCKETS_ROOT = "/tmp"


def launcher_script(socket_path: Path, *, python: str = sys.executable) -> str:
    """The launcher: the `wfa` client on this interpreter, isolated, with the agent's socket."""
    return client.launcher_script(os.path.abspath(python), str(socket_path))


def make_run_dir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="awf-", dir=SOCKETS_ROOT))
    path.chmod(RUN_DIR_MODE)
    return path


def make_agent_dir(run_dir: Path) -> tuple[Path, Path]:
    """A new agent directory in `run_dir`: its socket path (not yet bound) and launcher."""
    agent_dir = Path(tempfile.mkdtemp(prefix="a", dir=run_dir))
    agent_dir.chmod(AGENT_DIR_MODE)
    socket_path = agent_dir / SOCKET_NAME
    launcher = agent_dir / LAUNCHER_NAME
    launcher.write_text(launcher_script(socket_path))
    launcher.chmod(LAUNCHER_MODE)
    return socket_path, launcher


def remove_run_dir(run_dir: Path) -> None:
    """Remove the run's sockets and launchers; safe to call twice."""
    if not run_dir.exists():
        return
    run_dir.chmod(0o700)
    shutil.rmtree(run_dir, ignore_errors=True)
