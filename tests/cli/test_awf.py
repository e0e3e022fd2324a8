"""`awf` as a person runs it: every exit code of `awf run`, `--json`, and the record commands."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .here import awf_here

AWF = [sys.executable, "-m", "agentswf"]

WORKFLOWS = '''
import msgspec
from agentswf import workflow

class Args(msgspec.Struct):
    n: int = 1

@workflow(name="ok", description="Completes.")
async def ok(wf, args: Args):
    return {"n": args.n}

@workflow(name="boom", description="Raises.")
async def boom(wf):
    raise RuntimeError("the workflow broke")

@workflow(name="halt", description="Stops.")
async def halt(wf):
    wf.stop("nothing to do")

class NotASchema:
    x: int

@workflow(name="badschema", description="Asks for an answer of a type that is no schema.")
async def badschema(wf):
    agent = await wf.agents.open("a", runtime="shell:true")
    await agent.run("Answer.", schema=list[NotASchema])

@workflow(name="slow", description="Outlives its timeout.")
async def slow(wf):
    agent = await wf.agents.open("sleeper", runtime="shell:echo $$ >> {pids}; sleep 1000")
    await agent.run("Sleep.", timeout="1h")
'''


def awf(tmp_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AWF, *args], check=False, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)


@pytest.fixture
def flows(tmp_path: Path) -> Path:
    path = tmp_path / "flows.py"
    path.write_text(WORKFLOWS.replace("{pids}", str(tmp_path / "pids")))
    return path


def test_exit_0_prints_the_value(tmp_path, flows):
    done = awf(tmp_path, "run", str(flows), "--workflow", "ok", "--", "--n", "3")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"n": 3}
    assert "awf: ok completed" in done.stderr


def test_exit_1_when_the_workflow_fails_and_json_says_why(tmp_path, flows):
    done = awf(tmp_path, "run", str(flows), "--workflow", "boom", "--json")
    assert done.returncode == 1
    record = json.loads(done.stdout)
    assert record["outcome"] == "failed" and "the workflow broke" in record["reason"]
    assert Path(record["run_dir"], "output.json").exists()


def test_exit_1_when_it_times_out(tmp_path, flows):
    done = awf(tmp_path, "run", str(flows), "--workflow", "slow", "--timeout", "1s")
    assert done.returncode == 1
    assert "timed-out" in done.stderr


def test_a_bad_schema_is_named_as_written_not_by_the_module_the_file_is_loaded_as(tmp_path, flows):
    done = awf(tmp_path, "run", str(flows), "--workflow", "badschema")
    assert done.returncode == 1
    assert "DefinitionError: list[NotASchema] can't be a turn's schema" in done.stderr
    assert "awf_workflow" not in done.stderr
    # going on would meet it again: fix it, then run again
    assert f"awf: fix that, then run it again: awf run {flows} --workflow badschema" in done.stderr
    assert "go on with" not in done.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "{flows}", "--timout", "5m"], "awf: awf run has no flag --timout (did you mean --timeout?); awf run --help lists them\n"),
        (["run", "{flows}", "--jsn=1"], "awf: awf run has no flag --jsn (did you mean --json?); awf run --help lists them\n"),
        (["run", "{flows}", "Ada"], "awf: unexpected argument 'Ada' for awf run; a workflow's args go after --: awf run {flows} -- Ada\n"),
        # the `--` forgotten: the command as it should have been
        (["run", "{flows}", "--rounds", "2"], "awf: awf run has no flag --rounds; a workflow's args go after --: awf run {flows} -- --rounds 2\n"),
        (["check", "{flows}", "--rounds=2", "--", "x"], "awf: awf check has no flag --rounds; a workflow's args go after --: awf check {flows} -- --rounds=2 x\n"),
        (["ls", "--zzz"], "awf: awf ls has no flag --zzz; awf ls --help lists them\n"),
    ],
)
def test_a_typo_in_a_flag_names_the_flag_it_looks_like(tmp_path, flows, args, said, monkeypatch, capsys):
    """In the test's process: test_exit_2_on_usage_errors_with_a_message runs `awf run` with a typo'd
    flag as a process, as tests/cli/test_check.py does `awf check` and test_control.py `awf ls`."""
    done = awf_here(tmp_path, *[arg.replace("{flows}", str(flows)) for arg in args], monkeypatch=monkeypatch, capsys=capsys)
    assert (done.returncode, done.stderr) == (2, said.replace("{flows}", str(flows)))


def test_exit_3_when_it_stops(tmp_path, flows):
    done = awf(tmp_path, "run", str(flows), "--workflow", "halt")
    assert done.returncode == 3
    assert "stopped: nothing to do" in done.stderr


USAGE_ERRORS = [
    ["run", "{flows}", "--workflow", "ok", "--timout", "5m"],  # a typo'd flag
    ["run", "missing.py"],
    ["run", "{flows}"],  # several workflows, none named
    ["run", "{flows}", "--workflow", "ok", "--", "--n", "many"],
    ["run", "{flows}", "--workflow", "boom", "--", "--n", "1"],
    ["run", "{flows}", "--workflow", "ok", "--timeout", "soon"],
    ["logs", "no-such-run"],
    ["approve", "no-such-run", "c1"],
    ["logs", "--zzz"],
]
AS_PROCESS = 2  # the first two run as a process: a usage error found before the command, and one its handler finds


@pytest.mark.parametrize("args", USAGE_ERRORS)
def test_exit_2_on_usage_errors_with_a_message(tmp_path, flows, args, monkeypatch, capsys):
    words = [arg.replace("{flows}", str(flows)) for arg in args]
    if USAGE_ERRORS.index(args) < AS_PROCESS:
        done = awf(tmp_path, *words)
    else:  # in the test's process: the same command, exit 2 as a process shown by the first two
        done = awf_here(tmp_path, *words, monkeypatch=monkeypatch, capsys=capsys)
    assert done.returncode == 2, done.stdout
    assert done.stderr.startswith("awf: ") and "Traceback" not in done.stderr


def test_ctrl_c_exits_130_and_leaves_nothing_running(tmp_path, flows):
    process = subprocess.Popen([*AWF, "run", str(flows), "--workflow", "slow"], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    pids = tmp_path / "pids"
    deadline = time.monotonic() + 30
    while not pids.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    agent_pid = int(pids.read_text().split()[0])
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and "awf: record " in stderr
    with pytest.raises(ProcessLookupError):
        os.kill(agent_pid, 0)
    assert _session(agent_pid) == []  # nor what it started: `sleep` is in its session
    run_dir = next(tmp_path.glob(".awf/runs/slow/*"))
    assert f"awf: record {run_dir.resolve()}  (awf logs {run_dir.name})" in stderr  # in full, as every ending says it
    assert json.loads((run_dir / "output.json").read_text())["outcome"] == "cancelled"
    [turn] = [json.loads(line) for line in (run_dir / "turns.jsonl").read_text().splitlines()]
    assert turn["outcome"]["kind"] == "cancelled"  # the turn Ctrl-C cut off is on the record
    said = "the run was interrupted (Ctrl-C, or its caller cancelled it)"
    assert turn["outcome"]["reason"] == said  # a person's Ctrl-C, not the workflow giving the turn up
    assert json.loads((run_dir / "output.json").read_text())["reason"] == said


AWF_SCRIPT = Path(sys.executable).parent / "awf"  # the entry point as installed ([project.scripts])


@pytest.mark.parametrize("loaded", ["_asyncio", "_csv"])  # as awf imports agentswf; as it imports its commands
def test_ctrl_c_while_awf_starts_is_one_line_not_a_traceback(tmp_path, flows, loaded):
    # As a person's terminal starts it, Ctrl-C at its default: a background job of a script (CI's, say)
    # inherits it ignored, and then Python installs no KeyboardInterrupt handler until the run's own.
    process = subprocess.Popen([AWF_SCRIPT, "run", str(flows), "--workflow", "slow"], cwd=tmp_path,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    maps = Path(f"/proc/{process.pid}/maps")
    deadline = time.monotonic() + 30
    while loaded not in _readable(maps) and time.monotonic() < deadline:  # its module is being imported
        time.sleep(0.001)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert (process.returncode, stderr) == (130, "awf: interrupted\n") or "awf: interrupted; the run was cancelled" in stderr
    assert "Traceback" not in stderr


def _readable(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_second_ctrl_c_never_loses_the_ending(tmp_path, flows, backend):
    process = subprocess.Popen(
        [*AWF, "run", str(flows), "--workflow", "slow", "--backend", backend],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids = tmp_path / "pids"
    deadline = time.monotonic() + 30
    while not pids.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    agent_pid = int(pids.read_text().split()[0])
    process.send_signal(signal.SIGINT)
    time.sleep(0.005)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    run_dir = next(tmp_path.glob(".awf/runs/slow/*"))
    assert (run_dir / "output.json").exists(), (stderr, sorted(path.name for path in run_dir.iterdir()))
    assert json.loads((run_dir / "output.json").read_text())["outcome"] == "cancelled", stderr
    deadline = time.monotonic() + 2  # a killed process's teardown may lag its group's signal a little
    while _session(agent_pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _session(agent_pid) == [], stderr


def _session(sid: int) -> list[int]:
    """Live processes whose session is `sid` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if entry.name.isdigit() and int(fields[3]) == sid and fields[0] != b"Z":
            found.append(int(entry.name))
    return found


def test_logs_of_the_latest_run(tmp_path, flows):
    awf(tmp_path, "run", str(flows), "--workflow", "ok")
    done = awf(tmp_path, "logs")
    assert done.returncode == 0
    assert "of ok" in done.stdout and "ended completed" in done.stdout


def test_version():
    done = subprocess.run([*AWF, "--version"], check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("awf ")


def test_args_nested_too_deep_are_a_usage_error(tmp_path):
    flow = tmp_path / "listed.py"
    flow.write_text(
        "from agentswf import workflow\n"
        "@workflow(name='listed', description='Takes a list.')\n"
        "async def listed(wf, args: list[list]):\n    return args\n"
    )
    done = awf(tmp_path, "run", str(flow), "--", "[" * 2000 + "]" * 2000)
    assert done.returncode == 2 and "MAX_NESTING_DEPTH" in done.stderr and "Traceback" not in done.stderr
