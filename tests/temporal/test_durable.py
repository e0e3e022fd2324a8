"""Durable for real: a run goes on across a restart of the dev server (with its database
file), and the run's timeout is a durable timer (tested in the time-skipping environment)."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path
from uuid import uuid4

import anyio
import msgspec
import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

from temporalio.testing import WorkflowEnvironment

import agentswf
from agentswf import Runtime, workflow
from agentswf.temporal import DevServer, RunKey, TemporalEngine
from agentswf.temporal.devserver import server_binary
from agentswf.temporal.engine import start_input, turn_worker, workflow_queue, workflow_worker
from agentswf.temporal.messages import WORKFLOW_TYPE, RunEnding, RunRequest


async def test_a_run_survives_a_restart_of_the_server_with_its_database(tmp_path: Path, run_key_file: Path) -> None:
    mark = tmp_path / "turn-started"
    go_on = tmp_path / "go-on"
    agent = tmp_path / "waits.sh"
    agent.write_text(
        "#!/bin/sh\ncat >/dev/null\n"
        f': > "{mark}"\n'
        f'while [ ! -e "{go_on}" ]; do sleep 0.05; done\n'
        'echo "after the restart" | "$WFA" result "$WFA_CALL_ID"\n'
    )
    agent.chmod(0o700)

    @workflow(name="restarted", description="One turn, during which the server restarts.")
    async def restarted(wf):  # type: ignore[no-untyped-def]
        one = await wf.agents.open("one", runtime=Runtime(harness="shell", command=(str(agent),)))
        turn = await one.run("Answer.", timeout="2m")
        return turn.value if turn.answered else turn.outcome.reason

    server = DevServer(db=tmp_path / "temporal.db").start()
    try:
        engine = TemporalEngine(address=server.address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
        results: list[agentswf.RunResult] = []

        async def run() -> None:
            results.append(await agentswf.run(restarted, run_root=tmp_path / "runs", engine=engine))

        async with anyio.create_task_group() as group:
            group.start_soon(run)
            with anyio.fail_after(30):
                while not mark.exists():
                    await anyio.sleep(0.05)
            await anyio.to_thread.run_sync(server.stop)
            await anyio.to_thread.run_sync(server.start)  # the same port, the same database file
            go_on.touch()
        [result] = results
        assert result.outcome == "completed", result.reason
        assert result.value == "after the restart"
    finally:
        server.stop()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the SDK's test environment is asyncio's
async def test_the_runs_timeout_is_a_durable_timer(tmp_path: Path) -> None:
    @workflow(name="waits-an-hour", description="Waits on a durable timer past its timeout.")
    async def waits(wf):  # type: ignore[no-untyped-def]
        await asyncio.sleep(3600)  # a Temporal timer, in workflow code
        return "woke"

    key = RunKey(secrets.token_urlsafe(32))
    env = await WorkflowEnvironment.start_time_skipping_v2(  # type: ignore[attr-defined]
        dev_server_existing_path=str(server_binary()),
        dev_server_extra_args=["--dynamic-config-value", "frontend.WorkflowTimeSkippingEnabled=true"],
    )
    async with env:
        queue = f"test-{uuid4().hex[:8]}"
        async with workflow_worker(env.client, queue, waits, key), turn_worker(env.client, queue, key=key):
            request = RunRequest(
                workflow=waits.name, run_id="r1", cwd=str(tmp_path), run_dir=str(tmp_path), timeout=1800.0, turn_queue=queue
            )
            workflow_id = f"waits-{uuid4().hex}"
            with anyio.fail_after(30):  # half an hour of workflow time, in seconds of wall time
                raw = await env.client.execute_workflow(
                    WORKFLOW_TYPE, start_input(key, request, workflow_id), id=workflow_id,
                    task_queue=workflow_queue(queue, waits.name),
                )
    ending = msgspec.convert(raw, RunEnding)
    assert ending.outcome == "timed-out"
    assert ending.reason == "the run's timeout of 1800s passed"
