"""`awf stop` and `awf tail` of a run on Temporal, as of a local run: the stop is a person's sealed
operator update, the run ends `stopped` with the person's name and reason and its turn in flight
cancelled (its CLI stopped on its worker); `awf tail` follows the record's lines the workflow keeps
(the query `agentswf.lines`) and ends with the run's ending."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from uuid import uuid4

import anyio
import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

import agentswf
from agentswf import workflow
from agentswf.engine.operator_wire import Stop
from agentswf.harnesses.keeper import MARK_VARIABLE
from agentswf.temporal import TemporalEngine, on_asyncio
from agentswf.temporal.keys import RunKey, load_key, seal

from .test_examples import _replay
from .test_turns import _lingering
from .test_workers import Workers, host_killed_mid_turn

AGENT = """#!/bin/sh
prompt=$(cat)
case "$prompt" in
  *Second*) : > "{mark}"; sleep 57.321 ;;
  *) printf done | "$WFA" result "$WFA_CALL_ID" ;;
esac
"""


async def awf(*words: str) -> tuple[int, str, str]:
    done = await anyio.run_process([sys.executable, "-m", "agentswf", *words], check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_a_person_stops_a_temporal_run_and_tail_follows_it_to_its_end(temporal_address: str, tmp_path: Path) -> None:
    mark = tmp_path / "second"
    script = tmp_path / "agent.sh"
    script.write_text(AGENT.format(mark=mark))
    script.chmod(0o700)
    runs = tmp_path / "runs"

    @workflow(name="stoppable", description="A turn that answers, a log line, a turn that waits to be stopped.")
    async def stoppable(wf):  # type: ignore[no-untyped-def]
        agent = await wf.agents.open("a", runtime=f"shell:{script}")
        await agent.run("First.", nudge=False)
        wf.log("first done\x1b[2J")  # as text an agent wrote: shown, not obeyed by the terminal
        return (await agent.run("Second.", timeout="2m", nudge=False)).outcome.kind

    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
    results: list[agentswf.RunResult] = []
    said: dict[str, tuple[int, str, str]] = {}

    async def run() -> None:
        results.append(await agentswf.run(stoppable, run_root=runs, engine=engine))

    async def tail(run_id: str) -> None:
        said["tail"] = await awf("tail", run_id, "--run-root", str(runs))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        with anyio.fail_after(60):
            while not mark.exists():
                await anyio.sleep(0.05)
        [record] = runs.glob("stoppable/*/temporal.json")
        run_id = record.parent.name
        code, out, err = await awf("tail", run_id, "--no-follow", "--run-root", str(runs))
        assert code == 0, err
        assert "a: turn 1 ended answered" in out and "first done\\x1b[2J" in out and "run " not in out, out
        assert "a: turn 1 started: First." in out and "a: turn 2 started: Second." in out, out
        code, out, err = await awf("status", run_id, "--run-root", str(runs))
        assert code == 0, err
        assert "log: first done\\x1b[2J" in out and "\x1b" not in out, out
        workflow_id = json.loads(record.read_text())["workflow_id"]
        refused = await on_asyncio(functools.partial(forged_stops, temporal_address, workflow_id))
        assert "signed by worker:a, not by person:mallory: refused" in refused[0], refused
        assert "was signed with run key" in refused[1] and "not with this run's" in refused[1], refused
        group.start_soon(tail, run_id)
        said["stop"] = await awf("stop", run_id, "--by", "alice", "--reason", "seen enough", "--run-root", str(runs))
    code, _, err = said["stop"]
    assert code == 0, err
    assert "awf: stopping the run (stopped by alice: seen enough); its agents are being stopped" in err, err
    assert f"awf: run {run_id} stopped  (awf logs {run_id})" in err, err
    [result] = results
    assert (result.outcome, result.reason) == ("stopped", "stopped by alice: seen enough")
    turns = [json.loads(line) for line in (result.run_dir / "turns.jsonl").read_text().splitlines()]
    assert [turn["outcome"]["kind"] for turn in turns] == ["answered", "cancelled"]
    assert turns[1]["outcome"]["reason"] == "the run was stopped by alice: seen enough"  # the person, as locally
    assert json.loads((result.run_dir / "output.json").read_text())["outcome"] == "stopped"
    assert await on_asyncio(functools.partial(_replay, temporal_address, workflow_id)) is None  # the stop replays
    code, out, err = said["tail"]
    assert code == 0, err
    followed = out.splitlines()
    assert [line.split(" ", 1)[1] for line in followed if " ended " in line] == [  # a start shows only while live
        "a: turn 1 ended answered", "a: turn 2 ended cancelled: the run was stopped by alice: seen enough",
    ], out
    assert followed[-1].endswith("run stopped: stopped by alice: seen enough"), out
    with anyio.fail_after(10):  # the turn's activity was cancelled, and its CLI stopped with it
        while _lingering("sleep 57.321"):
            await anyio.sleep(0.1)


async def forged_stops(address: str, workflow_id: str) -> list[str]:
    """A stop sealed as an agent's worker, and one sealed with another key: how the workflow refused each."""
    from temporalio.client import Client, WorkflowUpdateFailedError

    handle = (await Client.connect(address)).get_workflow_handle(workflow_id)
    run_id = (await handle.describe()).run_id
    said = []
    for key, by in ((load_key(), "worker:a"), (RunKey("another deployment's key, long enough too"), "person:mallory")):
        sealed = seal(key, Stop("mine now", "mallory"), kind="update", workflow=workflow_id, run=run_id,
                      name="agentswf.operator", by=by)
        try:
            await handle.execute_update("agentswf.operator", sealed)
            said.append("taken")
        except WorkflowUpdateFailedError as error:
            said.append(str(getattr(error.cause, "message", error.cause)))
    return said


def test_an_agents_awf_stop_of_a_temporal_run_is_refused_before_anything_is_signed(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "w" / "20260101-000000-abcd"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"run_id": run_dir.name, "workflow": "w", "started_at": 0}))
    (run_dir / "temporal.json").write_text(json.dumps(
        {"workflow_id": "w-1", "address": "127.0.0.1:1", "namespace": "default", "task_queue": "q", "started_at": 0}
    ))
    done = subprocess.run(
        [sys.executable, "-m", "agentswf", "stop", run_dir.name, "--run-root", str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=60, env={**os.environ, MARK_VARIABLE: "an agent's mark"},
    )
    assert done.returncode == 2
    assert "this command is for people" in done.stderr and "nothing was sent" in done.stderr, done.stderr


@pytest.fixture
def keeper(temporal_address: str, tmp_path: Path) -> Iterator[Workers]:
    started = Workers(temporal_address, f"test-{uuid4().hex[:8]}", tmp_path)
    try:
        yield started
    finally:
        started.stop()


async def test_a_stopped_run_whose_host_is_gone_gets_its_record_from_temporal(keeper: Workers, tmp_path: Path) -> None:
    agent, runs = await host_killed_mid_turn(keeper, tmp_path, go_on=tmp_path / "never")
    [record] = runs.glob("outlives/*/temporal.json")
    run_id = record.parent.name
    with anyio.fail_after(90):  # the sticky queue's timeout (10 s), then the keeper takes the update
        code, _, err = await awf("stop", run_id, "--reason", "host gone", "--run-root", str(runs))
    assert code == 0, err
    assert "written from Temporal" in err and f"awf: run {run_id} stopped" in err, err
    output = json.loads((record.parent / "output.json").read_text())
    assert (output["outcome"], output["reason"]) == ("stopped", "stopped by operator: host gone")
    [turn] = [json.loads(line) for line in (record.parent / "turns.jsonl").read_text().splitlines()]
    assert turn["outcome"] == {"kind": "cancelled", "reason": "the run was stopped by operator: host gone"}
    with anyio.fail_after(10):  # its turn's activity was cancelled on the keeper, and its CLI stopped
        while _lingering(str(agent)):
            await anyio.sleep(0.1)
