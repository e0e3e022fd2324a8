"""A kept pane's socket path is known before the run ends (its run's sockets and its agent give
it), and an agent can write the kept panes' directory (review 3): what it put at that path, a
link to the person's own tmux server, must not take the kept pane in."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from agentswf.harnesses.pane_keep import KeptPane, keep, kept_socket

from .test_pane_attacks import kept_root  # noqa: F401  (the kept-panes root of the test's own)

pytestmark = [pytest.mark.anyio, pytest.mark.needs("tmux")]


def _sessions(socket: Path) -> list[str]:
    listed = subprocess.run(["tmux", "-S", str(socket), "list-sessions", "-F", "#{session_name}"],
                            capture_output=True, text=True, timeout=10, check=False)  # fmt: skip
    return listed.stdout.split()


async def test_a_kept_pane_is_not_started_in_a_tmux_server_an_agent_linked_at_its_socket(kept_root: Path) -> None:  # noqa: F811
    person = kept_root / "person.sock"  # the person's own tmux server
    subprocess.run(["tmux", "-S", str(person), "-f", "/dev/null", "new-session", "-d", "-s", "mine", "--", "sleep", "60"],
                   check=True, timeout=10, stdin=subprocess.DEVNULL)  # fmt: skip
    run_sockets = kept_root / "awf-abc123"
    socket = kept_socket(run_sockets, "a")
    socket.symlink_to(person)  # planted by the agent while its run was live
    pane = KeptPane(str(socket), "a", "claude", str(run_sockets), "s1", "/", time.time())
    await keep(shutil.which("tmux") or "tmux", pane, ["sleep", "60"], {"PATH": "/usr/bin:/bin"})
    assert _sessions(person) == ["mine"]  # nothing of the kept pane in the person's server
    assert not socket.is_symlink() and _sessions(socket) == ["agent"]  # a server of its own
