"""`awf` points at the line, shows a run as it goes, and finds the run a command means."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentswf.cli.mail import _post_words
from agentswf.cli.main import _parser

from .here import Said, awf_here

AWF = [sys.executable, "-m", "agentswf"]

FLOWS = '''
import os
from agentswf import tool, workflow


def lookup(table):
    return table["b"]


@workflow(name="keyerr", description="Raises a KeyError.")
async def keyerr(wf):
    return lookup({"a": 1})


@workflow(name="noisy", description="Prints while it runs.")
async def noisy(wf):
    print("printed by the workflow")
    os.system("echo written by a subprocess")
    return {"n": 1}


@workflow(name="noted", description="An agent calls a tool, then answers.")
async def noted(wf):
    def note(text: str) -> str:
        """Keep a note."""
        return "kept"

    agent = await wf.agents.open("a", runtime="shell:{script}", tools={"note": tool(note)})
    turn = await agent.run("Note, then answer.")
    return turn.value


@workflow(name="waits", description="An agent that never answers.")
async def waits(wf):
    agent = await wf.agents.open("sleeper", runtime="shell:echo $$ >> {pids}; sleep 1000")
    await agent.run("Sleep.", timeout="1h")
'''

AGENT = """#!/bin/sh
"$WFA" tool note --text 'first' </dev/null >/dev/null 2>&1
sleep 0.05
echo 'done' | "$WFA" result "$WFA_CALL_ID" >/dev/null 2>&1
"""


def awf(tmp_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AWF, *args], check=False, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)


@pytest.fixture
def flows(tmp_path: Path) -> Path:
    script = tmp_path / "agent.sh"
    script.write_text(AGENT)
    script.chmod(0o755)
    path = tmp_path / "flows.py"
    path.write_text(FLOWS.replace("{script}", str(script)).replace("{pids}", str(tmp_path / "pids")))
    return path


def _line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


# Load errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source, line, what",
    [
        ("import os\ndef broken(:\n    pass\n", 2, "SyntaxError"),
        ("import os\nimport no_such_module_for_awf\n", 2, "ModuleNotFoundError: No module named 'no_such_module_for_awf'"),
        ("x = 1\n\nraise RuntimeError('at import')\n", 3, "RuntimeError: at import"),
    ],
)
def test_a_file_that_cannot_load_is_one_line_with_its_file_and_line(tmp_path, source, line, what):
    (tmp_path / "bad.py").write_text(source)
    done = awf(tmp_path, "run", "bad.py")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "importlib" not in done.stderr
    [message] = done.stderr.splitlines()
    assert message.startswith(f"awf: {tmp_path / 'bad.py'}:{line}: ") and what in message


def test_a_syntax_error_in_an_imported_neighbour_points_at_the_neighbour(tmp_path):
    (tmp_path / "helper.py").write_text("def f(:\n")
    (tmp_path / "main.py").write_text("import helper\n")
    done = awf(tmp_path, "run", "main.py")
    assert done.returncode == 2
    [message] = done.stderr.splitlines()
    assert message.startswith(f"awf: {tmp_path / 'helper.py'}:1: SyntaxError")


def test_a_file_without_a_workflow_says_so_in_one_line(tmp_path):
    (tmp_path / "none.py").write_text("x = 1\n")
    done = awf(tmp_path, "run", "none.py")
    assert done.returncode == 2
    [message] = done.stderr.splitlines()
    assert message.startswith(f"awf: {tmp_path / 'none.py'}: defines no workflow")


# A workflow that raises ----------------------------------------------------------------------------


def test_a_raising_workflow_names_its_line_and_keeps_its_traceback(tmp_path, flows):
    done = awf(tmp_path, "run", str(flows), "--workflow", "keyerr")
    assert done.returncode == 1
    line = _line_of(flows, 'return table["b"]')
    assert "awf: keyerr failed: KeyError: 'b'" in done.stderr
    assert f"at {flows}:{line}, in lookup" in done.stderr
    [run_dir] = (tmp_path / ".awf/runs/keyerr").iterdir()
    output = json.loads((run_dir / "output.json").read_text())
    assert output["where"] == f"{flows}:{line}, in lookup"
    assert output["traceback"].startswith("Traceback (most recent call last):")
    assert f'File "{flows}", line {line}, in lookup' in output["traceback"]
    assert "agentswf/workflow/running.py" not in output["traceback"]  # it starts in the workflow
    logs = awf(tmp_path, "logs")
    assert f"at: {flows}:{line}, in lookup" in logs.stdout
    assert f'File "{flows}", line {line}, in lookup' in logs.stdout and "KeyError: 'b'" in logs.stdout


# --replay ------------------------------------------------------------------------------------------


def test_replay_of_no_such_run_is_a_usage_error(tmp_path, flows):
    done = awf(tmp_path, "run", str(flows), "--workflow", "noisy", "--replay", "nope")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and "ExceptionGroup" not in done.stderr
    assert done.stderr.splitlines()[-1].startswith("awf: --replay nope: no record of that run")


def test_replay_of_another_workflows_run_is_refused(tmp_path, flows):
    first = json.loads(awf(tmp_path, "run", str(flows), "--workflow", "keyerr", "--json").stdout)
    done = awf(tmp_path, "run", str(flows), "--workflow", "noisy", "--replay", first["run_id"])
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "a run of workflow 'keyerr', not of 'noisy'" in done.stderr.splitlines()[-1]
    assert not (tmp_path / ".awf/runs/noisy").exists()  # nothing ran


def test_a_replay_says_so_in_awf_run_and_awf_logs(tmp_path, flows):
    first = json.loads(awf(tmp_path, "run", str(flows), "--workflow", "noted", "--json").stdout)
    assert first["outcome"] == "completed"
    done = awf(tmp_path, "run", str(flows), "--workflow", "noted", "--replay", first["run_id"])
    assert done.returncode == 0, done.stderr
    assert f"a replay of {first['run_id']}" in done.stderr
    assert "replay_of=" in done.stderr  # on the line that starts the run
    logs = awf(tmp_path, "logs")
    assert "a replay of " in logs.stdout and first["run_id"] in logs.stdout
    plain = awf(tmp_path, "logs", first["run_id"])
    assert "a replay" not in plain.stdout


# Seeing a run --------------------------------------------------------------------------------------


def test_json_keeps_stdout_for_the_json_alone(tmp_path, flows):
    done = awf(tmp_path, "run", str(flows), "--workflow", "noisy", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["value"] == {"n": 1}
    assert "printed by the workflow" in done.stderr and "written by a subprocess" in done.stderr


def test_without_json_stdout_is_the_value_alone(tmp_path, flows):
    done = awf(tmp_path, "run", str(flows), "--workflow", "noisy")
    assert json.loads(done.stdout) == {"n": 1}


def test_the_run_id_and_record_come_first_then_a_line_per_turn(tmp_path, flows):
    done = awf(tmp_path, "run", str(flows), "--workflow", "noted", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    lines = done.stderr.splitlines()
    started = next(n for n, line in enumerate(lines) if "run started" in line)
    assert f"run_id={result['run_id']}" in lines[started] and f"record={result['run_dir']}" in lines[started]
    turn_started = next(n for n, line in enumerate(lines) if "turn started" in line)
    turn_ended = next(n for n, line in enumerate(lines) if "turn ended" in line)
    assert started < turn_started < turn_ended
    assert re.search(r"agent=a turn=1 call=\S+", lines[turn_started])
    assert "outcome=answered" in lines[turn_ended]


def test_logs_list_a_turns_tool_calls_before_the_answer_that_followed(tmp_path, flows):
    assert awf(tmp_path, "run", str(flows), "--workflow", "noted").returncode == 0
    logs = awf(tmp_path, "logs").stdout
    assert logs.index("tool note") < logs.index("accepted:"), logs


def test_run_help_shows_the_workflow_args(tmp_path):
    done = awf(tmp_path, "run", "--help")
    assert done.returncode == 0
    assert done.stdout.splitlines()[0] == "usage: awf run FILE [options] [-- args…]"
    assert "The words after -- are the workflow's args" in " ".join(done.stdout.split())


# Reaching a live run -------------------------------------------------------------------------------


def _start_waiting(tmp_path: Path, flows: Path, pids: Path) -> subprocess.Popen[str]:
    before = len(pids.read_text().split()) if pids.exists() else 0
    process = subprocess.Popen(
        [*AWF, "run", str(flows), "--workflow", "waits"], cwd=tmp_path, stderr=subprocess.DEVNULL, text=True
    )
    deadline = time.monotonic() + 30
    while (not pids.exists() or len(pids.read_text().split()) == before) and time.monotonic() < deadline:
        time.sleep(0.02)
    return process


def _stop(process: subprocess.Popen[str]) -> None:
    process.send_signal(2)
    process.wait(timeout=30)


def test_operator_commands_find_the_one_live_run(tmp_path, flows, monkeypatch, capsys):
    """Each command in the test's process (tests/security/test_operator_refusals.py runs each as a process
    against a live run); the runs it finds are processes."""
    def ask(cwd: Path, *words: str) -> Said:
        return awf_here(cwd, *words, monkeypatch=monkeypatch, capsys=capsys)

    none = ask(tmp_path, "pending")
    assert none.returncode == 2 and none.stderr.startswith("awf: no run is live under")
    pids = tmp_path / "pids"
    first = _start_waiting(tmp_path, flows, pids)
    try:
        pending = ask(tmp_path, "pending")
        assert pending.returncode == 0, pending.stderr
        assert pending.stderr == "awf: 0 call(s) waiting for approval\n"
        unknown = ask(tmp_path, "approve", "no-such-call")  # reaches the run, which refuses the call
        assert (unknown.returncode, unknown.stderr) == (1, "awf: no call no-such-call is waiting for approval\n")
        inbox = ask(tmp_path, "inbox", "--as", "nobody")
        assert "no run is live" not in inbox.stderr and "live runs" not in inbox.stderr
        second = _start_waiting(tmp_path, flows, pids)
        try:
            several = ask(tmp_path, "pending")
            assert several.returncode == 2
            assert several.stderr.startswith("awf: 2 live runs under") and "name one" in several.stderr
            [run_id, _] = sorted(path.name for path in (tmp_path / ".awf/runs/waits").iterdir())
            named = ask(tmp_path, "pending", run_id)
            assert named.returncode == 0, named.stderr
            named_approve = ask(tmp_path, "approve", run_id, "no-such-call")
            assert "no call no-such-call" in named_approve.stderr
        finally:
            _stop(second)
    finally:
        _stop(first)
    ended = ask(tmp_path, "pending")
    assert ended.returncode == 2 and ended.stderr.startswith("awf: no run is live under")


def test_send_words_are_run_peer_message_when_the_first_names_a_run(tmp_path, monkeypatch):
    run_dir = tmp_path / ".awf/runs/w/20260101-000000-abcd"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text("{}")
    monkeypatch.chdir(tmp_path)

    def words(*given: str) -> tuple[str | None, str, str | None]:
        options = _parser("send").parse_args(["send", *given, "--as", "human"])
        _post_words(options)
        return options.run, options.peer, options.message

    assert words("coder", "hello") == (None, "coder", "hello")
    assert words("coder") == (None, "coder", None)
    assert words("20260101-000000-abcd", "coder") == ("20260101-000000-abcd", "coder", None)
    assert words("20260101-000000-abcd", "coder", "hi") == ("20260101-000000-abcd", "coder", "hi")
