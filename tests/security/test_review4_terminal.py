"""Review 4: what `awf` prints that an agent can have written, shown, not obeyed.

`awf approve`, `reject`, `pending`, `send` and the others printed the operator socket's message
raw. An agent can point run.json's `control` at a socket it listens on (docs/guide/security.md),
so that message can be the agent's.

`awf pending` of a run on Temporal printed a tool call's input as the agent wrote it.

The local `awf pending` shows every control character of what it prints as its escape
(review 3, `cli/shown.py`); its Temporal branch (`cli/temporal.command_pending`) printed the
input through `msgspec.json.encode`, which escapes C0 controls but leaves a right-to-left
override (U+202E) and CSI as one C1 character (U+009B) raw, so an agent's input could reorder
or rewrite what a person reads before approving the call. The workflow's query is given here
(the printing is what is tested; the query's own round trip is tests/temporal's, with a server).
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from agentswf.cli import temporal

CONTROLS = ("\x1b", "\u202e", "\x9b")
HOSTILE = {"target": "staging\u202e \x9b2J\x1b[2K"}


def test_awf_pending_of_a_temporal_run_shows_a_calls_input_not_obeys_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def query(run: dict[str, Any], name: str, arg: Any, *, update: bool, by: str = "") -> Any:
        return [{"call_id": "c1", "agent": "a", "tool": "deploy", "input": HOSTILE, "reason": "why\u202e"}]

    monkeypatch.setattr(temporal, "_ask", query)
    assert temporal.command_pending(argparse.Namespace(), {}) == 0
    printed = capsys.readouterr()
    assert "staging" in printed.out and "c1" in printed.out, printed.out
    assert [char for char in CONTROLS if char in printed.out + printed.err] == [], printed.out


# An agent can point run.json's `control` at a socket it listens on (docs/guide/security.md), and
# every answer a person's `awf` then reads is the agent's: its message is printed, so it must be
# shown, not obeyed. One socket that answers every request with the same hostile response.
HOSTILE_MESSAGE = "call c1 approved\x1b]52;c;cm0gLXJmIH4K\x07 \u202egnp.exe \x9b2J"


def _fake_control(path: Path, answers: int) -> threading.Thread:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    server.settimeout(60)
    response = json.dumps({"ok": True, "message": HOSTILE_MESSAGE, "value": []}).encode() + b"\n"

    def serve() -> None:
        with server:
            for _ in range(answers):
                try:
                    connection, _ = server.accept()
                except OSError:
                    return
                with connection:
                    connection.recv(65536)
                    connection.sendall(response)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


COMMANDS = (("approve", "c1"), ("reject", "c1", "--reason", "no"), ("pending",), ("send", "a", "hello", "--as", "you"))


def test_awf_commands_show_what_a_forged_control_socket_answers_not_obey_it(tmp_path: Path) -> None:
    run_dir = tmp_path / ".awf" / "runs" / "w" / "20261201-000000-abcd"
    run_dir.mkdir(parents=True)
    control = tmp_path / "c.sock"
    (run_dir / "run.json").write_text(json.dumps({"version": 1, "workflow": "w", "control": str(control)}))
    server = _fake_control(control, len(COMMANDS))
    raw = {}
    for command in COMMANDS:
        done = subprocess.run(
            [sys.executable, "-m", "agentswf", *command],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert "approved" in done.stdout + done.stderr, (command, done.stdout, done.stderr)
        raw[command[0]] = [char for char in CONTROLS if char in done.stdout + done.stderr]
    server.join(timeout=5)
    assert raw == {command[0]: [] for command in COMMANDS}
