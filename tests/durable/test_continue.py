"""A run that failed in stage 2, continued: stage 1's agent never runs again, its value is the
recorded one, stage 2 runs (its id'd turn answered before the failure is given back, not run),
and the record numbers the attempts. Real shell agents, each run counted in a file."""

from __future__ import annotations

import msgspec
import pytest

import agentswf
from agentswf import DefinitionError, workflow
from agentswf.engine.record.attempts import read_sessions

from .kit import attempts, counts, marks, run_three, stages, write_flows


async def test_a_run_failed_in_stage_2_continues_without_running_stage_1_again(tmp_path):
    write_flows(tmp_path)
    (marks(tmp_path) / "fail").touch()
    failed = await run_three(tmp_path)
    assert failed.outcome == "failed" and "the build broke" in failed.reason
    assert counts(tmp_path) == {"greeter": 1, "planner": 1, "builder": 1, "checker": 0}
    assert set(stages(failed.run_dir)) == {"plan"}  # written before stage build started

    (marks(tmp_path) / "fail").unlink()
    done = await run_three(tmp_path, continue_from=failed.run_id)
    assert done.outcome == "completed", done.reason
    assert (done.run_id, done.run_dir, done.attempt) == (failed.run_id, failed.run_dir, 2)
    # planner: never again; greeter and builder's first turn: their id'd turns given back
    assert counts(tmp_path) == {"greeter": 1, "planner": 1, "builder": 2, "checker": 1}
    assert done.value == {"hello": "hello-1", "plan": "plan-1", "build": "built-1+built-2", "check": "checked-1"}

    first, second = attempts(done.run_dir)
    assert (first["n"], first["outcome"], first["stage"], first["stages"]) == (1, "failed", "build", {"plan": "ran", "build": "ran"})
    assert (second["n"], second["continues"], second["outcome"]) == (2, 1, "completed")
    assert second["stages"] == {"plan": "reused", "build": "ran", "check": "ran"}
    assert (second["reused_turns"], second["turns"], second.get("file_changed", False)) == (2, 2, False)
    recorded = stages(done.run_dir)
    assert recorded["plan"]["attempt"] == 1 and recorded["plan"]["value"] == {"title": "plan-1"}
    assert recorded["build"]["attempt"] == 2 and recorded["build"]["value"] == "built-1+built-2"
    assert recorded["build"]["turns"] == 1  # its id'd turn was given back: not a turn of this attempt
    assert recorded["plan"]["sessions"] == [{"agent": "planner", "harness": "shell", "session": None}]
    assert (done.run_dir / "attempts" / "1.output.json").exists()  # attempt 1's ending, kept aside
    opened = read_sessions(done.run_dir)
    assert [(line["attempt"], line["agent"]) for line in opened][:4] == [(1, "greeter"), (1, "planner"), (1, "builder"), (1, "checker")]
    assert all("fresh" not in line and "resumed" not in line for line in opened if line["attempt"] == 1)
    again = [line for line in opened if line["attempt"] == 2]
    assert len(again) == 4 and all(line["fresh"].startswith("its harness can't resume: a shell agent") for line in again)


async def test_a_completed_run_is_not_continued_but_a_stage_can_be_rerun(tmp_path):
    done = await run_three(tmp_path)
    assert done.outcome == "completed", done.reason
    with pytest.raises(DefinitionError, match="completed in attempt 1; there is nothing to continue"):
        await run_three(tmp_path, continue_from=done.run_id)
    assert counts(tmp_path) == {"greeter": 1, "planner": 1, "builder": 2, "checker": 1}

    with pytest.raises(DefinitionError, match=r"--rerun biuld: run \S+ has no stage biuld on record \(its stages: build, check, plan\)"):
        await run_three(tmp_path, continue_from=done.run_id, rerun="biuld")
    again = await run_three(tmp_path, continue_from=done.run_id, rerun="build")
    assert again.outcome == "completed", again.reason
    # build (its id'd turn too: answered after build began) and what follows it run again; plan doesn't
    assert counts(tmp_path) == {"greeter": 1, "planner": 1, "builder": 4, "checker": 2}
    assert again.value == {"hello": "hello-1", "plan": "plan-1", "build": "built-3+built-4", "check": "checked-2"}
    replaced = sorted(path.name for path in (again.run_dir / "replaced").iterdir())
    assert replaced == ["build.1.json", "check.1.json"]
    assert attempts(again.run_dir)[1]["stages"] == {"plan": "reused", "build": "ran", "check": "ran"}


async def test_a_changed_workflow_file_is_said_so(tmp_path):
    flows = write_flows(tmp_path)
    (marks(tmp_path) / "fail").touch()
    failed = await run_three(tmp_path)
    (marks(tmp_path) / "fail").unlink()
    flows.write_text(flows.read_text() + "\n# changed\n")
    done = await run_three(tmp_path, continue_from=failed.run_dir)
    assert done.outcome == "completed", done.reason
    assert attempts(done.run_dir)[1]["file_changed"] is True


async def test_an_id_given_again_with_another_prompt_is_refused(tmp_path):
    write_flows(tmp_path)
    (marks(tmp_path) / "fail").touch()
    failed = await run_three(tmp_path)
    (marks(tmp_path) / "prompt").write_text("Build something else.")
    refused = await run_three(tmp_path, continue_from=failed.run_id)
    assert refused.outcome == "failed"
    assert "turn id 'build-1' was answered in attempt 1 for another prompt" in refused.reason
    assert counts(tmp_path)["builder"] == 1


async def test_a_continue_takes_the_args_and_the_workflow_it_was_started_with(tmp_path):
    write_flows(tmp_path)
    (marks(tmp_path) / "fail").touch()
    failed = await run_three(tmp_path)
    with pytest.raises(DefinitionError, match="takes the args it was started with"):
        await run_three(tmp_path, continue_from=failed.run_id, args={"dir": "/elsewhere"})

    @workflow(name="other", description="Another workflow.")
    async def other(wf):
        return 1

    with pytest.raises(DefinitionError, match="that is a run of workflow 'three', not of 'other'"):
        await agentswf.run(other, continue_from=failed.run_dir)
    with pytest.raises(DefinitionError, match="rerun re-runs a stage of a run being continued"):
        await agentswf.run(other, rerun="build")


async def test_a_stage_value_that_is_not_json_is_a_clear_error(tmp_path):
    @workflow(name="opaque", description="A stage returns what JSON can't hold.")
    async def opaque(wf):
        return await wf.stage("make", lambda: _value(object()))

    result = await agentswf.run(opaque, run_root=tmp_path)
    assert result.outcome == "failed"
    assert "stage make's value is not JSON" in result.reason and "return plain data or a msgspec Struct" in result.reason


async def test_a_recorded_value_that_no_longer_fits_its_result_stops_the_continue(tmp_path):
    class Old(msgspec.Struct):
        n: int

    class New(msgspec.Struct):
        n: str

    shapes = {"result": Old, "fail": True}

    @workflow(name="shapes", description="A stage whose result type changes between attempts.")
    async def flow(wf):
        value = await wf.stage("make", lambda: _value({"n": 1}), result=shapes["result"])
        if shapes["fail"]:
            raise RuntimeError("after make")
        return msgspec.to_builtins(value)

    failed = await agentswf.run(flow, run_root=tmp_path)
    assert failed.outcome == "failed"
    shapes.update(result=New, fail=False)
    stopped = await agentswf.run(flow, run_root=tmp_path, continue_from=failed.run_id)
    assert stopped.outcome == "stopped"
    assert "stage make's record (attempt 1) no longer fits its result" in stopped.reason
    assert "--rerun make" in stopped.reason
    rerun = await agentswf.run(flow, run_root=tmp_path, continue_from=failed.run_id, rerun="make")
    assert rerun.outcome == "failed"  # New can't hold n=1 either: the stage ran, and its own check refused
    assert "stage make's value does not fit its result" in rerun.reason


async def _value(value):
    return value


async def test_a_run_timed_out_in_stage_2_continues(tmp_path):
    write_flows(tmp_path)
    (marks(tmp_path) / "hang").touch()
    timed = await run_three(tmp_path, timeout="5s")
    assert timed.outcome == "timed-out"
    (marks(tmp_path) / "hang").unlink()
    done = await run_three(tmp_path, continue_from=timed.run_id)
    assert done.outcome == "completed", done.reason
    assert counts(tmp_path) == {"greeter": 1, "planner": 1, "builder": 3, "checker": 1}
    assert [attempt["outcome"] for attempt in attempts(done.run_dir)] == ["timed-out", "completed"]


async def test_a_stage_is_on_record_before_the_next_one_starts(tmp_path):
    @workflow(name="order", description="Stage two looks for stage one's record.")
    async def order(wf):
        await wf.stage("one", lambda: _value({"a": 1}))

        async def two():
            return msgspec.json.decode((wf.run_dir / "stages" / "one.json").read_bytes())

        return await wf.stage("two", two)

    result = await agentswf.run(order, run_root=tmp_path)
    assert result.outcome == "completed", result.reason
    record = result.value
    assert (record["stage"], record["attempt"], record["value"], record["outcome"]) == ("one", 1, {"a": 1}, "succeeded")
    assert record["started_at"] <= record["ended_at"]
    assert oct((result.run_dir / "stages" / "one.json").stat().st_mode & 0o777) == "0o600"
