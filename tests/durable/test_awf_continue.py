"""`awf continue` after `kill -9` and after Ctrl-C of `awf run` mid-stage-2, `awf continue --rerun`,
and `awf run --from-stage` with `--values` and without (the look-ahead), on both backends."""

from __future__ import annotations

import json
import signal

import pytest

from ..cli.here import awf_here
from .kit import attempts, awf, counts, marks, stages, start_hanging, the_run, write_flows

BACKENDS = ["asyncio", "trio"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", ["kill -9", "ctrl-c"])
def test_a_run_ended_mid_stage_2_continues_from_stage_2(tmp_path, backend, how, monkeypatch, capsys):
    run = start_hanging(tmp_path, backend)
    if how == "kill -9":
        run.send_signal(signal.SIGKILL)
        assert run.wait(timeout=30) == -signal.SIGKILL
    else:
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=60)
        assert run.returncode == 130, err
        assert "awf: go on with: awf continue" in err
    run_dir = the_run(tmp_path)
    assert counts(tmp_path) == {"greeter": 1, "planner": 1, "builder": 2, "checker": 0}

    done = awf(tmp_path, "continue", "flows.py", "--run-root", "runs", "--backend", backend)
    assert done.returncode == 0, done.stderr
    assert "(attempt 2)" in done.stderr
    # the planner never again, the builder's id'd turn given back; its hung turn runs again
    assert counts(tmp_path) == {"greeter": 1, "planner": 1, "builder": 3, "checker": 1}
    assert json.loads(done.stdout) == {"hello": "hello-1", "plan": "plan-1", "build": "built-1+built-3", "check": "checked-1"}
    first, second = attempts(run_dir)
    assert first["outcome"] == ("interrupted" if how == "kill -9" else "cancelled")
    assert ("found_interrupted_at" in first) == (how == "kill -9")
    assert second["stages"] == {"plan": "reused", "build": "ran", "check": "ran"}
    assert second["outcome"] == "completed"
    # `awf logs` and `awf ls` read the record in the test's process, as tests/cli/test_control.py runs them as processes
    logs = awf_here(tmp_path, "logs", "--run-root", "runs", monkeypatch=monkeypatch, capsys=capsys)
    assert "attempt 1, started" in logs.stdout and f": {first['outcome']} in stage build" in logs.stdout
    assert "attempt 2 (continues 1)" in logs.stdout and "plan reused (attempt 1), build ran, check ran; 2 turns run, 2 id'd turns given back" in logs.stdout
    assert "— attempt 2 —" in logs.stdout
    [_, row] = awf_here(tmp_path, "ls", "--run-root", "runs", monkeypatch=monkeypatch, capsys=capsys).stdout.split("\n\n")[0].splitlines()
    assert "completed  2 (1 interrupted)" in row if how == "kill -9" else row.split()[2:4] == ["completed", "2"]


def test_a_live_attempt_is_not_continued_beside_it(tmp_path):
    run = start_hanging(tmp_path, "asyncio")
    try:
        refused = awf(tmp_path, "continue", "flows.py", "--run-root", "runs")
        assert refused.returncode == 2
        assert "attempt 1 of run" in refused.stderr and "is still running" in refused.stderr
    finally:
        run.send_signal(signal.SIGINT)
        run.communicate(timeout=60)


def test_rerun_runs_a_stage_again_and_a_changed_file_is_said_so(tmp_path, monkeypatch, capsys):
    flows = write_flows(tmp_path)
    done = awf(tmp_path, "run", "flows.py", "--run-root", "runs", "--", "--dir", str(marks(tmp_path)))
    assert done.returncode == 0, done.stderr
    # refused in the test's process: test_a_live_attempt_is_not_continued_beside_it refuses as a process
    refused = awf_here(tmp_path, "continue", "flows.py", "--run-root", "runs", monkeypatch=monkeypatch, capsys=capsys)
    assert refused.returncode == 2 and "there is nothing to continue" in refused.stderr
    flows.write_text(flows.read_text().replace('"checked-$n"', '"rechecked-$n"'))
    again = awf(tmp_path, "continue", "flows.py", "--run-root", "runs", "--rerun", "check")
    assert again.returncode == 0, again.stderr
    assert "the workflow's file changed since attempt 1" in again.stderr
    assert json.loads(again.stdout)["check"] == "rechecked-2"
    assert counts(tmp_path) == {"greeter": 1, "planner": 1, "builder": 2, "checker": 2}


def test_the_look_ahead_runs_nothing_and_prints_the_values_needed(tmp_path):
    write_flows(tmp_path)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    words = ["run", "flows.py", "--run-root", "runs", "--from-stage", "check", "--", "--dir", str(marks(tmp_path))]
    looked = awf(tmp_path, *words, env={"TMPDIR": str(scratch)})
    assert looked.returncode == 3, looked.stderr
    needs = json.loads(looked.stdout)
    assert set(needs) == {"plan", "build"}
    assert needs["build"] == {"type": "string"}
    assert needs["plan"]["$defs"]["Plan"]["required"] == ["title"]
    assert "--values values.json" in looked.stderr
    assert "reached stage check" in looked.stderr
    assert counts(tmp_path) == {"greeter": 0, "planner": 0, "builder": 0, "checker": 0}  # the greeter's turn: a stand-in
    assert not (tmp_path / "runs" / "three").exists()  # nothing recorded
    assert list(scratch.iterdir()) == []  # not even in its scratch record


def test_from_stage_with_values_runs_from_there(tmp_path):
    write_flows(tmp_path)
    (tmp_path / "values.json").write_text(json.dumps({"plan": {"title": "given"}, "build": "made by hand"}))
    done = awf(
        tmp_path, "run", "flows.py", "--run-root", "runs", "--from-stage", "check", "--values", "values.json",
        "--", "--dir", str(marks(tmp_path)),
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"hello": "hello-1", "plan": "given", "build": "made by hand", "check": "checked-1"}
    assert counts(tmp_path) == {"greeter": 1, "planner": 0, "builder": 0, "checker": 1}
    recorded = stages(the_run(tmp_path))
    assert recorded["plan"]["provided"] is True and recorded["plan"]["value"] == {"title": "given"}
    assert (recorded["plan"]["usage"], recorded["plan"]["turns"]) == (None, 0)  # no turns, no cost
    assert attempts(the_run(tmp_path))[0]["stages"] == {"plan": "provided", "build": "provided", "check": "ran"}


def test_values_are_checked_against_each_stage_result(tmp_path):
    write_flows(tmp_path)
    (tmp_path / "values.json").write_text(json.dumps({"plan": {"title": 3}}))
    words = ["run", "flows.py", "--run-root", "runs", "--from-stage", "check", "--values", "values.json", "--", "--dir", str(marks(tmp_path))]
    stopped = awf(tmp_path, *words)
    assert stopped.returncode == 3
    assert "--values' value for stage plan doesn't fit its result: Expected `str`, got `int` - at `$.title`" in stopped.stderr
    (tmp_path / "values.json").write_text(json.dumps({"plan": {"title": "given"}}))
    missing = awf(tmp_path, *words)
    assert missing.returncode == 3 and "--values has no value for stage build" in missing.stderr
    assert counts(tmp_path)["planner"] == 0 and counts(tmp_path)["builder"] == 0
    not_json = awf(tmp_path, *words[:-3], "--values", "flows.py", "--", "--dir", "x")
    assert not_json.returncode == 2 and "is not JSON" in not_json.stderr


def test_continue_names_the_workflows_file_and_takes_the_latest_run_of_its_workflow(tmp_path):
    flows = write_flows(tmp_path)
    (marks(tmp_path) / "fail").touch()
    failed = awf(tmp_path, "run", "flows.py", "--run-root", "runs", "--", "--dir", str(marks(tmp_path)))
    assert failed.returncode == 1, failed.stderr
    run_id = the_run(tmp_path).name
    assert f"awf: go on with: awf continue flows.py {run_id} --run-root runs" in failed.stderr
    other = tmp_path / "other.py"
    other.write_text(flows.read_text().replace('name="three"', 'name="other"'))
    later = awf(tmp_path, "run", "other.py", "--run-root", "runs", "--", "--dir", str(marks(tmp_path)))
    assert later.returncode == 1, later.stderr  # the latest run under the root, of another workflow
    (marks(tmp_path) / "fail").touch()
    by_run = awf(tmp_path, "continue", run_id, "--run-root", "runs")  # `awf continue RUN`: the file on record, said
    assert by_run.returncode == 1 and "(attempt 2)" in by_run.stderr, by_run.stderr
    assert f"awf: loading {flows}, the file on record (name it to be sure: awf continue FILE RUN)" in by_run.stderr
    (marks(tmp_path) / "fail").unlink()
    done = awf(tmp_path, "continue", "flows.py", "--run-root", "runs")  # the latest run of three, not of other
    assert done.returncode == 0, done.stderr
    assert f"awf: record {the_run(tmp_path)}" in done.stderr and "(attempt 3)" in done.stderr


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_run_that_spent_its_budget_is_told_to_go_on_with_a_larger_one(tmp_path, backend):
    write_flows(tmp_path)
    words = ["--run-root", "runs", "--backend", backend]
    failed = awf(tmp_path, "run", "flows.py", *words, "--budget", "3turns,1h", "--", "--dir", str(marks(tmp_path)))
    assert failed.returncode == 1 and "3 of 3 turns given" in failed.stderr, failed.stderr  # the builder's second turn
    run_id = the_run(tmp_path).name
    # The turns ran out, not the hour: twice the turns, the hour as it was.
    go_on = f"awf: go on with: awf continue flows.py {run_id} --run-root runs --budget 6turns,1h"
    assert go_on in failed.stderr.splitlines(), failed.stderr
    (told,) = [line.removeprefix("awf: go on with: awf ") for line in failed.stderr.splitlines() if line.startswith("awf: go on with: ")]
    done = awf(tmp_path, *told.split(), "--backend", backend)  # the command as it was given
    assert done.returncode == 0, done.stderr
    assert "awf: go on with" not in done.stderr
    assert counts(tmp_path) == {"greeter": 1, "planner": 1, "builder": 2, "checker": 1}


def test_a_run_whose_budget_is_not_spent_is_told_to_go_on_without_one(tmp_path):
    write_flows(tmp_path)
    (marks(tmp_path) / "fail").touch()
    failed = awf(tmp_path, "run", "flows.py", "--run-root", "runs", "--budget", "10turns", "--", "--dir", str(marks(tmp_path)))
    assert failed.returncode == 1, failed.stderr
    (line,) = [line for line in failed.stderr.splitlines() if line.startswith("awf: go on with: ")]
    assert line.endswith(f"awf continue flows.py {the_run(tmp_path).name} --run-root runs"), line  # the budget on record will do
