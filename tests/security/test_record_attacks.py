"""Attacks on a run's record (issue 16): what a hand that can write the record (an agent given
the directory it lies in) forges for a continued run to take. Integrity can't be had against
an agent that runs as the user unsandboxed (docs/guide/security.md); what is checked is that a
forged record can't turn into more than a wrong value: no option given to a CLI, no path out
of the record, no crash of the continue."""

from __future__ import annotations

import json

import pytest

import agentswf
from agentswf import DefinitionError, Runtime, workflow
from agentswf.workflow.resume import is_session_id, sessions_on_record

from ..durable.kit import counts, marks, run_three, write_flows

pytestmark = pytest.mark.anyio


async def _failed_in_build(tmp_path):
    write_flows(tmp_path)
    (marks(tmp_path) / "fail").touch()
    failed = await run_three(tmp_path)
    assert failed.outcome == "failed", failed.reason
    (marks(tmp_path) / "fail").unlink()
    return failed


@pytest.mark.parametrize(
    "session",
    ["--dangerously-skip-permissions", "-p", "../../../home/user/.ssh/id_rsa", "/etc/passwd", "a b", "x" * 300, "", "a\nb"],
)
def test_a_session_on_record_that_is_no_session_id_is_never_resumed(tmp_path, session):
    lines = [{"agent": "a", "session": "0b9e3c1e-6f0a-4c1e-9d52-1f0c2d3e4f50"}, {"agent": "a", "session": session}]
    (tmp_path / "turns.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (tmp_path / "sessions.jsonl").write_text(json.dumps({"agent": "a", "harness": "claude"}) + "\n")
    assert not is_session_id(session)
    found = sessions_on_record(tmp_path)
    assert found["a"].session == "0b9e3c1e-6f0a-4c1e-9d52-1f0c2d3e4f50"  # the forged one is passed over


@pytest.mark.parametrize("session", ["0b9e3c1e-6f0a-4c1e-9d52-1f0c2d3e4f50", "019a7f3e-1b2c-7d4e-8f90-0a1b2c3d4e5f", "sess_01ABC"])
def test_the_clis_session_ids_are_session_ids(session):
    assert is_session_id(session)


@pytest.mark.parametrize(
    ("forged", "says"),
    [
        ({"stage": "../../../../tmp/evil"}, "is not a stage's record"),
        ({"stage": "check"}, "is not a stage's record"),  # plan.json claiming to be another stage
        ({"attempt": -1}, "not a record this version reads"),
    ],
)
async def test_a_stage_record_naming_another_file_is_refused(tmp_path, forged, says):
    failed = await _failed_in_build(tmp_path)
    path = failed.run_dir / "stages" / "plan.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **forged}))
    with pytest.raises(DefinitionError, match=says):
        await run_three(tmp_path, continue_from=failed.run_id)
    assert counts(tmp_path)["planner"] == 1


@pytest.mark.parametrize("forged", [{"n": 7}, {"pid": -1}, {"pid": 0}])
async def test_an_attempt_record_that_isnt_its_files_is_refused(tmp_path, forged):
    failed = await _failed_in_build(tmp_path)
    path = failed.run_dir / "attempts" / "1.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **forged}))
    with pytest.raises(DefinitionError, match="attempts/1.json"):
        await run_three(tmp_path, continue_from=failed.run_id)


@pytest.mark.parametrize("forged", [{"at": "soon"}, {"attempt": "one"}, {"prompt": None, "at": None}, {"turn": 5}])
async def test_a_torn_or_forged_turn_line_is_passed_over_and_the_continue_goes_on(tmp_path, forged):
    failed = await _failed_in_build(tmp_path)
    path = failed.run_dir / "turn-ids.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**line, **forged}) + "\n" for line in lines))
    done = await run_three(tmp_path, continue_from=failed.run_id, rerun="plan")  # replacing: turns compared by time
    assert done.outcome == "completed", done.reason
    assert counts(tmp_path)["greeter"] == 2  # its id'd turn had no record fit to give back: it ran again


@pytest.mark.parametrize("cwd", ["relative/dir", "/nonexistent/dir"])
async def test_a_recorded_cwd_that_is_not_an_absolute_directory_is_refused(tmp_path, cwd):
    failed = await _failed_in_build(tmp_path)
    path = failed.run_dir / "run.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "cwd": cwd}))
    with pytest.raises(DefinitionError, match="cwd"):
        await run_three(tmp_path, continue_from=failed.run_id)


FORGED_SESSION_CLI = """#!/bin/sh
# Stands in for cursor-agent whose output an agent's process forged (it can write to its CLI's
# stdout through /proc/<pid>/fd/1): the session it reports is an option.
echo "$@" >>"$OUT/argv"
cat >/dev/null
"$WFA" result "$WFA_CALL_ID" done >/dev/null
echo '{"type":"result","subtype":"success","is_error":false,"session_id":"--dangerously-skip-permissions","result":"x"}'
"""


async def test_a_session_a_cli_reports_that_is_no_session_id_is_never_resumed(tmp_path):
    cli = tmp_path / "cursor-agent"
    cli.write_text(FORGED_SESSION_CLI)
    cli.chmod(0o755)

    @workflow(name="forged", description="Two turns on a CLI whose output was forged.")
    async def flow(wf):
        agent = await wf.agents.open("c", runtime=Runtime(harness="cursor", env={"OUT": str(tmp_path)}))
        first = await agent.run("One.", timeout="20s")
        second = await agent.run("Two.", timeout="20s")
        return [first.session, second.session]

    result = await agentswf.run(flow, run_root=tmp_path / "runs", env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert result.outcome == "completed", result.reason
    assert result.value == [None, None]
    assert all("--resume" not in line for line in (tmp_path / "argv").read_text().splitlines())


def test_a_forged_attempt_record_cant_choose_the_file_awf_continue_file_runs(tmp_path):
    """`awf continue FILE` loads the file it is given, never the record's (the record is the agents' to
    write); `awf continue` without one says which file the record names before it loads it."""
    import subprocess
    import sys

    write_flows(tmp_path)
    (marks(tmp_path) / "fail").touch()
    started = subprocess.run(
        [sys.executable, "-m", "agentswf", "run", "flows.py", "--run-root", "runs", "--", "--dir", str(marks(tmp_path))],
        cwd=tmp_path, capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    assert started.returncode == 1, started.stderr
    assert "awf: go on with: awf continue flows.py " in started.stderr  # the file as it was given, not the record's
    [attempt] = (tmp_path / "runs" / "three").glob("*/attempts/1.json")
    evil = tmp_path / "evil.py"
    evil.write_text((tmp_path / "flows.py").read_text() + f"\nopen({str(tmp_path / 'OWNED')!r}, 'w').close()\n")
    attempt.write_text(json.dumps({**json.loads(attempt.read_text()), "file": str(evil)}))
    bare = subprocess.run(
        [sys.executable, "-m", "agentswf", "continue", "--run-root", "runs"],
        cwd=tmp_path, capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    assert f"awf: loading {evil}, the file on record" in bare.stderr  # unnamed, the record's file: said before it loads
    (tmp_path / "OWNED").unlink()
    (marks(tmp_path) / "fail").unlink()
    named = subprocess.run(
        [sys.executable, "-m", "agentswf", "continue", "flows.py", "--run-root", "runs"],
        cwd=tmp_path, capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    assert named.returncode == 0, named.stderr
    assert not (tmp_path / "OWNED").exists()


def test_awf_continue_says_the_sandbox_and_budget_it_keeps_from_the_record_before_it_runs(tmp_path):
    """Whoever can write the record can take its budget (or sandbox) away: `awf continue` says what it
    keeps of them, so a budget gone from the record is not gone silently; `--budget` given wins."""
    import subprocess
    import sys

    write_flows(tmp_path)
    (marks(tmp_path) / "fail").touch()
    awf = [sys.executable, "-m", "agentswf"]
    started = subprocess.run(
        [*awf, "run", "flows.py", "--run-root", "runs", "--budget", "5usd", "--", "--dir", str(marks(tmp_path))],
        cwd=tmp_path, capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    assert started.returncode == 1, started.stderr
    [attempt] = (tmp_path / "runs" / "three").glob("*/attempts/1.json")
    kept = subprocess.run(
        [*awf, "continue", "flows.py", "--run-root", "runs"], cwd=tmp_path, capture_output=True, text=True, timeout=90,
        check=False,
    )  # fmt: skip
    assert 'awf: the budget on record: {"cost_usd":5.0' in kept.stderr, kept.stderr
    assert "awf: the sandbox on record: none, its agents run unsandboxed" in kept.stderr
    [attempt] = sorted((tmp_path / "runs" / "three").glob("*/attempts/[0-9].json"))[-1:]
    attempt.write_text(json.dumps({**json.loads(attempt.read_text()), "budget": None}))  # an agent took it away
    forged = subprocess.run(
        [*awf, "continue", "flows.py", "--run-root", "runs"], cwd=tmp_path, capture_output=True, text=True, timeout=90,
        check=False,
    )  # fmt: skip
    assert "awf: the budget on record: none, no limit (--budget gives another)" in forged.stderr, forged.stderr
    given = subprocess.run(
        [*awf, "continue", "flows.py", "--run-root", "runs", "--budget", "5usd"], cwd=tmp_path, capture_output=True,
        text=True, timeout=90, check=False,
    )  # fmt: skip
    assert "the budget on record" not in given.stderr


def test_a_record_file_an_agent_made_a_fifo_or_a_device_hangs_no_awf_command(tmp_path):
    """A FIFO as one run's run.json (its open would block for good), /dev/zero as another's (never ends)."""
    import os
    import subprocess
    import sys

    runs = tmp_path / "runs"
    for name, plant in (("fifo", lambda path: os.mkfifo(path)), ("zero", lambda path: path.symlink_to("/dev/zero"))):
        record = runs / "wf" / f"20261201-000000-{name}"
        record.mkdir(parents=True)
        plant(record / "run.json")
        (record / "turns.jsonl").symlink_to("/dev/zero")
        (record / "attempts").mkdir()
        plant(record / "attempts" / "1.json")
    for command in (["ls"], ["logs", "20261201-000000-fifo"]):
        done = subprocess.run(
            [sys.executable, "-m", "agentswf", *command, "--run-root", str(runs)], cwd=tmp_path, capture_output=True,
            text=True, timeout=60, check=False,
        )  # fmt: skip
        assert "Traceback" not in done.stderr, (command, done.stderr)
