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
from hypothesis import given
from hypothesis import strategies as st

from agentswf.cli import temporal
from agentswf.cli.shown import shown_json

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


def _fake_control(path: Path, answers: int, value: Any = None) -> threading.Thread:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    server.settimeout(60)
    answer = {"ok": True, "message": HOSTILE_MESSAGE, "value": [] if value is None else value}
    response = json.dumps(answer).encode() + b"\n"

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


# `awf status --json` prints the live run's answer as JSON: agents' keys, and what they owe and
# await, are text an agent can have written. msgspec escapes C0 controls in a JSON string, not
# U+202E or a C1 control: those are written as JSON's escapes, the same string to a parser.
HOSTILE_KEY = "review:a\u202egnp.exe \x9b2J\U0001f600"
STATUS = {"agents": [{"key": HOSTILE_KEY, "in_turn": False, "owes": [HOSTILE_MESSAGE], "awaits": None}], "pending": []}


def test_awf_status_json_escapes_what_a_forged_control_socket_answers(tmp_path: Path) -> None:
    run_dir = tmp_path / ".awf" / "runs" / "w" / "20261201-000000-abcd"
    run_dir.mkdir(parents=True)
    control = tmp_path / "c.sock"
    (run_dir / "run.json").write_text(json.dumps({"version": 1, "workflow": "w\u202e", "control": str(control)}))
    server = _fake_control(control, 1, STATUS)
    done = subprocess.run(
        [sys.executable, "-m", "agentswf", "status", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    server.join(timeout=5)
    assert done.returncode == 0, done.stderr
    assert [char for char in CONTROLS if char in done.stdout] == [], done.stdout
    assert "\\u202e" in done.stdout and "\\u009b" in done.stdout, done.stdout
    status = json.loads(done.stdout)
    assert status["workflow"] == "w\u202e"
    assert status["agents"][0]["key"] == HOSTILE_KEY and status["agents"][0]["owes"] == [HOSTILE_MESSAGE]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(JSON_VALUES, st.booleans())
def test_shown_json_is_the_same_value_with_nothing_a_terminal_obeys(value: Any, formatted: bool) -> None:
    text = shown_json(value, formatted=formatted)
    assert json.loads(text) == value
    assert all(char.isprintable() or char == "\n" for char in text), ascii(text)
