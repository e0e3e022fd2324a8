"""What a new user met in round 6, each said in one line that says what to do: args errors
without msgspec's punctuation, one rule for durations, a workflow's name for its latest run,
a refused `awf continue` saying only why, help pages that describe, no debug line for a person."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import structlog

from agentswf.cli.run import _configure_progress, args_error
from agentswf.errors import DefinitionError
from agentswf.workflow.budgets import Budget
from agentswf.workflow.durations import to_seconds

from .here import awf_here

AWF = [sys.executable, "-m", "agentswf"]

LOOP = '''
from typing import Annotated

import msgspec
from agentswf import workflow

class Args(msgspec.Struct):
    rounds: Annotated[int, msgspec.Meta(le=5)] = 1

@workflow(name="loop", description="Loops.")
async def loop(wf, args: Args) -> int:
    return args.rounds
'''


def awf(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AWF, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def loop(tmp_path: Path) -> Path:
    path = tmp_path / "loop.py"
    path.write_text(LOOP)
    return path


def test_an_args_error_is_said_by_its_flag_without_doubled_punctuation(tmp_path, loop):
    done = awf(tmp_path, "run", "loop.py", "--", "--rounds", "9")
    assert (done.returncode, done.stderr) == (
        2, "awf: workflow loop's args: --rounds: expected `int` <= 5; give them as flags: -- [--rounds <integer, at most 5>]\n"
    )  # fmt: skip


@pytest.mark.parametrize(
    ("said", "flags", "shown"),
    [
        ("Expected `int` <= 5 - at `$.rounds`.", True, "--rounds: expected `int` <= 5"),
        ("Expected `str`, got `int` - at `$.name`.", False, "name: expected `str`, got `int`"),
        ("that is not valid JSON: malformed.", False, "that is not valid JSON: malformed"),
    ],
)
def test_args_error(said, flags, shown):
    assert args_error(said, flags=flags) == shown


def test_plain_seconds_are_a_duration_wherever_one_is_taken(tmp_path, loop):
    assert to_seconds("10") == to_seconds(10) == to_seconds("10s") == 10.0
    assert to_seconds("1.5") == 1.5
    assert Budget(wall="90").wall == "90"  # checked as to_seconds checks it
    for wrong in ("0", "-1", "1e3", ".5", "ten", "10 m"):
        with pytest.raises(DefinitionError, match=r"a positive number of seconds or a decimal and a unit, like '90', "):
            to_seconds(wrong)
    done = awf(tmp_path, "run", "loop.py", "--timeout", "10")
    assert done.returncode == 0, done.stderr
    done = awf(tmp_path, "run", "loop.py", "--timeout", "10x")
    assert done.returncode == 2 and "--timeout must be a positive number of seconds" in done.stderr


def test_a_workflows_name_is_its_latest_run(tmp_path, loop):
    assert awf(tmp_path, "run", "loop.py", "--", "--rounds", "2").returncode == 0
    latest = awf(tmp_path, "run", "loop.py", "--", "--rounds", "3")
    run_id = next(line for line in latest.stderr.splitlines() if line.startswith("awf: record ")).split("awf logs ")[1][:-1]
    done = awf(tmp_path, "logs", "loop")
    assert done.returncode == 0, done.stderr
    assert f"run {run_id} of loop" in done.stdout
    done = awf(tmp_path, "logs", "nope")
    assert (done.returncode, done.stderr) == (2, (
        "awf: no record of run 'nope' under .awf/runs: give a run's id (awf ls lists them), its directory, "
        "or a workflow's name for its latest run\n"
    ))  # fmt: skip


def test_a_refused_continue_says_only_why(tmp_path, loop):
    assert awf(tmp_path, "run", "loop.py").returncode == 0
    done = awf(tmp_path, "continue", "loop.py")
    assert done.returncode == 2
    [line] = done.stderr.splitlines()
    assert "there is nothing to continue" in line


@pytest.mark.parametrize("command", ["logs", "ls", "status", "stop", "tail", "check"])
def test_each_help_page_describes_its_command(command, monkeypatch, capsys):
    # in the test's process: test_first_use prints `awf --help` and test_awf_reach `awf run FILE --help` as processes
    done = awf_here(Path.cwd(), command, "--help", monkeypatch=monkeypatch, capsys=capsys)
    assert done.returncode == 0, done.stderr
    usage, _, rest = done.stdout.partition("\n\n")
    description = rest.split("\n\n")[0]
    assert not description.startswith(("positional arguments", "options")), done.stdout
    assert ".py" not in description  # what it does, not where it is written
    if command == "tail":
        assert usage == "usage: awf tail [RUN] [AGENT] [--no-follow] [--run-root DIR]"


def test_progress_lines_for_a_person_leave_debug_lines_out(capsys):
    try:
        _configure_progress("plain").close()
        structlog.get_logger("agentswf.launcher").debug("a client went away before its answer")
        structlog.get_logger("agentswf.run").info("run started")
    finally:
        structlog.reset_defaults()
    said = capsys.readouterr().err
    assert "run started" in said and "went away" not in said
