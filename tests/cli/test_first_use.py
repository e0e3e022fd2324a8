"""What `awf` says where a first-time user trips: a closed pipe, a run on Temporal asked what only
a local run answers, a continue of a run that can't be continued. Each a clear line, never a
traceback or a wrong reason.

The Temporal runs here are records as `awf run --engine temporal` writes them (run.json and
temporal.json, output.json once ended), made by hand: none of these commands reaches Temporal,
so no server is needed (tests/temporal runs the real one).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from contextlib import redirect_stderr
from pathlib import Path

import pytest

from agentswf.cli.run import _ended
from agentswf.harnesses.pane_keep import close_kept, kept_panes
from agentswf.testing.models import CLI_DIR_VARIABLE, find_cli
from agentswf.workflow.running import RunResult

from ..panes.kit import needs, needs_tmux
from .here import awf_here

AWF = [sys.executable, "-m", "agentswf"]
RUN_ID = "20261201-120000-ab12"
WORKFLOW_ID = f"slow-{RUN_ID}"


def awf(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AWF, *args], check=False, capture_output=True, text=True, timeout=60, cwd=cwd, env=env)


def temporal_run(tmp_path: Path, *, ended: bool) -> Path:
    run_dir = tmp_path / ".awf" / "runs" / "slow" / RUN_ID
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"run_id": RUN_ID, "workflow": "slow", "cwd": str(tmp_path)}))
    (run_dir / "temporal.json").write_text(json.dumps(
        {"workflow_id": WORKFLOW_ID, "address": "127.0.0.1:7233", "namespace": "default", "task_queue": "agents"}
    ))  # fmt: skip
    if ended:
        (run_dir / "output.json").write_text(json.dumps({"outcome": "cancelled", "reason": "the run was cancelled"}))
    return run_dir


def test_awf_logs_into_a_closed_pipe_is_no_traceback(tmp_path):
    flow = tmp_path / "flow.py"
    flow.write_text("from agentswf import workflow\n\n@workflow(name='ok', description='Completes.')\n"
                    "async def ok(wf):\n    return 'done'\n")  # fmt: skip
    assert awf(tmp_path, "run", str(flow)).returncode == 0
    read, write = os.pipe()
    os.close(read)  # as `awf logs | head` once head has its lines
    try:
        logs = subprocess.run([*AWF, "logs"], stdout=write, stderr=subprocess.PIPE, text=True, timeout=60, cwd=tmp_path)
    finally:
        os.close(write)
    assert logs.returncode == 141, logs.stderr
    assert "Traceback" not in logs.stderr and "BrokenPipe" not in logs.stderr, logs.stderr


@pytest.mark.parametrize("command", [["stop"], ["tail", "--no-follow"], ["inbox", "--as", "ada"], ["send", "bob", "hi", "--as", "ada"]])
def test_a_live_run_on_temporal_is_said_to_be_there_when_no_run_is_named(tmp_path, command):
    temporal_run(tmp_path, ended=False)
    said = awf(tmp_path, *command)
    assert said.returncode == 2
    assert f"run {RUN_ID} is on Temporal: name it (awf status {RUN_ID})" in said.stderr, said.stderr


@pytest.mark.parametrize("command", [["stop", RUN_ID], ["tail", RUN_ID], ["status", RUN_ID], ["pending", RUN_ID], ["approve", RUN_ID, "c1"]])
def test_stop_and_tail_go_to_a_live_run_on_temporal(tmp_path, command):
    temporal_run(tmp_path, ended=False)  # its server is gone: said in a line, not a traceback, nor "has ended"
    said = awf(tmp_path, *command, env={**os.environ, "AGENTSWF_TEMPORAL_KEY": "a person's run key, long enough too"})
    assert said.returncode == 2
    gone = said.stderr.startswith("awf: Temporal at 127.0.0.1:7233 isn't answering: ")
    assert (gone or "needs agentswf[temporal]" in said.stderr) and "Traceback" not in said.stderr, said.stderr


@pytest.mark.parametrize("command", [["inbox", RUN_ID, "--as", "ada"], ["send", RUN_ID, "bob", "hi", "--as", "ada"]])
def test_a_persons_commands_go_to_a_live_run_on_temporal(tmp_path, command):
    temporal_run(tmp_path, ended=False)  # its server is gone: said in a line, not a traceback
    said = awf(tmp_path, *command, env={**os.environ, "AGENTSWF_TEMPORAL_KEY": "a person's run key, long enough too"})
    assert said.returncode == 2
    gone = said.stderr.startswith("awf: Temporal at 127.0.0.1:7233 isn't answering: ")
    assert (gone or "needs agentswf[temporal]" in said.stderr) and "Traceback" not in said.stderr, said.stderr


def test_a_run_on_temporal_that_ended_is_tailed_from_its_record(tmp_path):
    temporal_run(tmp_path, ended=True)
    said = awf(tmp_path, "tail", RUN_ID, "--no-follow")
    assert said.returncode == 0 and "Temporal" not in said.stderr, said.stderr


def test_continue_of_a_run_on_temporal_recorded_before_its_attempts_were_says_to_start_it_anew(tmp_path):
    temporal_run(tmp_path, ended=True)  # no attempts/, as an older agentswf wrote it (tests/temporal continues one)
    flow = tmp_path / "slow.py"
    flow.write_text("from agentswf import workflow\n\n@workflow(name='slow', description='Slow.')\n"
                    "async def slow(wf):\n    return 'done'\n")  # fmt: skip
    env = {**os.environ, "AGENTSWF_TEMPORAL_KEY": "a person's run key, long enough too"}
    said = awf(tmp_path, "continue", "slow.py", RUN_ID, env=env)
    assert said.returncode == 2
    older = f"run {RUN_ID} has no attempts on record (recorded by an older agentswf); start it anew" in said.stderr
    assert (older or "needs agentswf[temporal]" in said.stderr) and "Traceback" not in said.stderr, said.stderr


def test_trace_of_a_run_on_temporal_without_messages_says_so(tmp_path):
    temporal_run(tmp_path, ended=True)  # its messages, had it any, are in messages.jsonl as a local run's
    said = awf(tmp_path, "trace", RUN_ID)
    assert said.returncode == 0 and said.stdout == "no messages in this run\n", said.stderr


@pytest.mark.parametrize("on_temporal", [True, False])
def test_the_closing_lines_offer_awf_continue_on_either_engine(tmp_path, on_temporal):
    run_dir = temporal_run(tmp_path, ended=True)
    if not on_temporal:
        (run_dir / "temporal.json").unlink()
    result = RunResult(outcome="cancelled", value=None, reason="the run was cancelled", run_id=RUN_ID, run_dir=run_dir)
    options = argparse.Namespace(json=False, file="slow.py", run_root=None, workflow=None)
    said = io.StringIO()
    with redirect_stderr(said):
        _ended(options, result, argparse.Namespace(name="slow"), tmp_path)  # type: ignore[arg-type]
    assert "awf: go on with: awf continue slow.py" in said.getvalue(), said.getvalue()


def test_continue_with_its_words_swapped_says_the_file_comes_first(tmp_path):
    run_dir = temporal_run(tmp_path, ended=True)
    (run_dir / "temporal.json").unlink()  # a local run's record
    (tmp_path / "slow.py").write_text("")
    said = awf(tmp_path, "continue", RUN_ID, "slow.py")
    assert said.returncode == 2
    assert said.stderr.strip() == f"awf: the file comes first: awf continue slow.py {RUN_ID}"


def test_continue_of_what_is_neither_a_file_nor_a_run_says_both(tmp_path):
    said = awf(tmp_path, "continue", "20261201-nosuch")
    assert said.returncode == 2
    assert said.stderr.strip() == "awf: 20261201-nosuch is neither a workflow file nor a run under .awf/runs"


@pytest.mark.parametrize("command", ["run", "continue"])
def test_backend_of_run_and_continue_says_what_it_chooses(command, monkeypatch, capsys):
    # in the test's process: test_awf_help_says_where_to_start_and_where_each_commands_flags_are prints help as a process
    said = awf_here(Path.cwd(), command, "--help", monkeypatch=monkeypatch, capsys=capsys)
    assert said.returncode == 0 and "the event loop the run's engine runs on" in said.stdout


KEEPING = """
from pathlib import Path

from agentswf import workflow
from agentswf.testing.models import ScriptedModel
from tests.panes.kit import pane_runtime
from tests.panes.test_codex_pi_panes import Verdict, script_for


@workflow(name="keeping", description="pi in a pane, kept after the run.")
async def keeping(wf):
    out = Path.cwd() / "out"
    out.mkdir(exist_ok=True)
    async with ScriptedModel(script_for(out)) as model:
        writer = await wf.agents.open("writer", runtime=pane_runtime("pi", model, out / "home", keep_pane="always"))
        turn = await writer.run("SCENARIO answer 0. Review the change.", schema=Verdict, timeout=90)
        return turn.outcome.kind
"""


@needs_tmux
@needs("pi")
def test_awf_run_names_the_panes_it_kept_and_how_to_close_them(tmp_path):
    (tmp_path / "keeping.py").write_text(KEEPING)
    repo = Path(__file__).resolve().parents[2]
    cli_dir = str(Path(find_cli("pi") or "pi").parent)
    env = {**os.environ, "PYTHONPATH": str(repo), CLI_DIR_VARIABLE: cli_dir}
    try:
        done = subprocess.run([*AWF, "run", "keeping.py"], capture_output=True, text=True, timeout=150, cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stderr
        run_id = next((tmp_path / ".awf" / "runs" / "keeping").iterdir()).name
        assert (
            f"awf: kept pane of writer (pi, released from the run): awf attach {run_id} writer; "
            f"close: awf attach --close {run_id} writer"
        ) in done.stderr.splitlines()
        closed = awf(tmp_path, "attach", "--close", run_id, "writer")
        assert closed.returncode == 0, closed.stderr
    finally:
        for pane in kept_panes():
            if pane.cwd.startswith(str(tmp_path)):
                close_kept(pane)


def test_awf_help_says_where_to_start_and_where_each_commands_flags_are():
    said = subprocess.run([*AWF, "--help"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert "Start with: awf run FILE" in said and "awf COMMAND --help gives each command's flags" in " ".join(said.split())
