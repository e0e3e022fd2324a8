"""A sandboxed agent's home is made from the CLI's files where the agent's environment points
(review 3). Another agent of the run, unsandboxed, can write there: a FIFO, or a link to a
device, in a credential's place must block nothing (the run waits for the home to be made,
in a thread no timeout can stop) and fill nothing."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from agentswf.sandbox.homes import configured_urls, prepare_home

MADE_WITHIN_SECONDS = 5.0


def _release(fifo: Path) -> None:
    """Open the FIFO's other end, so that a reader blocked on it goes on (the test's cleanup)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


@pytest.mark.parametrize(
    ("harness", "name"),
    [("claude", ".claude.json"), ("claude", ".claude/.credentials.json"), ("codex", ".codex/auth.json"),
     ("codex", ".codex/config.toml"), ("pi", ".pi/agent/models.json")],
)  # fmt: skip
def test_a_fifo_in_a_credentials_place_doesnt_block_the_home(tmp_path: Path, harness: str, name: str) -> None:
    user = tmp_path / "user"
    fifo = user / name
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    env = {"HOME": str(user)}
    thread = threading.Thread(target=lambda: (prepare_home(tmp_path / "home", harness, env), configured_urls(harness, env)))
    thread.start()
    thread.join(MADE_WITHIN_SECONDS)
    blocked = thread.is_alive()
    while thread.is_alive():
        _release(fifo)
        thread.join(0.1)
    assert not blocked, f"the home was still being made after {MADE_WITHIN_SECONDS}s: {name} is a FIFO"
    assert not (tmp_path / "home" / name).exists() or name == ".claude.json"  # nothing copied from it


def test_a_link_to_a_device_in_a_credentials_place_copies_nothing(tmp_path: Path) -> None:
    user = tmp_path / "user"
    (user / ".codex").mkdir(parents=True)
    (user / ".codex" / "auth.json").symlink_to("/dev/zero")  # copied whole, it would fill the disk
    prepare_home(tmp_path / "home", "codex", {"HOME": str(user)})
    assert not (tmp_path / "home" / ".codex" / "auth.json").exists()
