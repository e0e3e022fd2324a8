"""`awf attach`: read-only unless --write, and a clear refusal when there is no pane."""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentswf.cli.attach import AttachFailure, attach_argv, find_pane
from agentswf.cli.main import main
from agentswf.harnesses.pane import pane_socket
from agentswf.harnesses.tmux import WINDOW

from .kit import needs_tmux

SCREEN_WAIT_SECONDS = 10.0


def a_run(tmp_path: Path, *agents: str) -> Path:
    record = tmp_path / "runs" / "flow" / "r1"
    sockets = tmp_path / "s"
    sockets.mkdir()
    record.mkdir(parents=True)
    (record / "run.json").write_text(json.dumps({"control": str(sockets / "control.sock")}))
    for n, agent in enumerate(agents):
        (record / "calls" / f"c{n}").mkdir(parents=True)
        (record / "calls" / f"c{n}" / "call.json").write_text(json.dumps({"agent": agent}))
    return record


def test_attaching_is_read_only_unless_asked_to_write():
    assert attach_argv("/usr/bin/tmux", Path("/s/t1"), write=False)[-1] == "-r"
    assert "-r" not in attach_argv("/usr/bin/tmux", Path("/s/t1"), write=True)


def test_the_one_agent_in_a_pane_is_found_and_an_absent_one_is_refused(tmp_path):
    record = a_run(tmp_path, "a", "b")
    live = pane_socket(tmp_path / "s", "b")
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(live))
        assert find_pane(tmp_path / "runs", str(record), None) == live
        assert find_pane(tmp_path / "runs", "r1", "b") == live
        with pytest.raises(AttachFailure, match="agent a has no pane running"):
            find_pane(tmp_path / "runs", str(record), "a")


def test_awf_attach_with_nothing_to_attach_to_exits_2(tmp_path, capsys):
    record = a_run(tmp_path, "a")
    assert main(["attach", str(record)]) == 2
    assert "no agent of run r1 has a pane running" in capsys.readouterr().err


def test_closing_a_kept_pane_where_there_is_none_exits_2(tmp_path, capsys):
    record = a_run(tmp_path, "a")
    assert main(["attach", "--close", str(record)]) == 2
    assert "run r1 has no kept pane" in capsys.readouterr().err
    assert main(["attach", "--close", str(record), "a"]) == 2
    assert "agent a of run r1 has no kept pane" in capsys.readouterr().err


@needs_tmux
def test_awf_attach_without_a_terminal_says_it_needs_one_and_how_to_see_the_pane(tmp_path):
    record = a_run(tmp_path, "writer")
    live = pane_socket(tmp_path / "s", "writer")
    tmux = ["tmux", "-S", str(live)]
    subprocess.run([*tmux, "new-session", "-d", "-s", WINDOW, "echo the writer is here; sleep 60"], check=True, timeout=10)
    try:
        attached = subprocess.run(
            [sys.executable, "-m", "agentswf", "attach", str(record), "writer"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30,
        )
        assert attached.returncode == 2, attached.stderr  # a usage error, not tmux's own exit 1
        assert "awf: attach needs a terminal" in attached.stderr and "open terminal failed" not in attached.stderr
        told = attached.stderr.rsplit(" with ", 1)[1].strip()
        deadline = time.monotonic() + SCREEN_WAIT_SECONDS
        screen = subprocess.run(shlex.split(told), capture_output=True, text=True, timeout=10)
        while "the writer is here" not in screen.stdout and time.monotonic() < deadline:  # until the shell drew it
            time.sleep(0.1)
            screen = subprocess.run(shlex.split(told), capture_output=True, text=True, timeout=10)
        assert "the writer is here" in screen.stdout, (told, screen.stderr)  # what it says to run shows the pane
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, capture_output=True, timeout=10)
