"""`TemporalEngine`: `agentswf.run(definition, engine=TemporalEngine(...))` runs the workflow on Temporal.

The process that calls `run` hosts the workflow's code: a Temporal worker on the queue
`<task_queue>.workflow.<name>` (only processes that have this definition poll it), and,
unless `run_turns=False`, the turn activities on `task_queue` too, so one process is enough
to try it; `awf worker` processes on `task_queue` take turns beside it. It starts the
workflow, its request sealed with the deployment's run key (keys.py), and waits for its end.

Temporal's client is asyncio's only. Under trio the engine runs its client and workers on
an asyncio loop of their own, in a thread, submitted with an empty context (otherwise
trio's sniffio state leaks into that loop): `on_asyncio`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.lowlevel
import anyio.to_thread
import msgspec
import sniffio
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError, WorkflowHandle
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from ..actors import ActorRef, Supervisor
from ..engine.accounting import Ledger, RunUsage
from ..engine.mail.words import Mail
from ..engine.outcomes import Turn
from ..engine.record.attempts import AttemptRecord, RecordRefused, read_attempts
from ..engine.record.layout import DEFAULT_RUN_ROOT, TEMPORAL_FILE, make_run_record_dir, read_json
from ..engine.record.lines import (
    AttemptOutput,
    CallOpened,
    CandidateSeen,
    Logged,
    MessageRead,
    MessageSent,
    ResultAccepted,
    RunEnded,
    RunStarted,
    ToolCalled,
    TurnEnded,
)
from ..engine.record.recorder import Appends, LogLines, Recorder
from ..engine.run import RECORDER_MAILBOX_CAPACITY
from ..errors import DefinitionError
from ..progress import run_started
from ..workflow.budgets import Budget
from ..workflow.continuing import USAGE_FILE, continued_run
from ..workflow.definition import WorkflowDefinition
from ..workflow.durable import Durable
from ..workflow.durations import Duration, to_seconds
from ..workflow.run_options import DEFAULT_RUN_TIMEOUT_SECONDS
from ..workflow.running import RunResult
from .attempts import attempt_input, attempt_workflow_id, end_attempt, sessions_opened, write_kept
from .codec import PayloadKeys, data_converter, held_keys, hosting
from .driver import KeyHolder
from .flow import AgentswfWorkflow, register
from .keys import RunKey, held, load_key, seal
from .messages import WORKFLOW_TYPE, RunEnding, RunRequest
from .turns import Resolve, TurnActivities, TurnWorker, say_refused

T = TypeVar("T")
DEFAULT_NAMESPACE = "default"
DEFAULT_MAX_TURNS = 100  # turns a worker runs at once
CANCEL_WAIT_SECONDS = 10.0  # after a cancelled run's workflow is cancelled, for its turns to stop


def workflow_queue(task_queue: str, name: str) -> str:
    """The queue a workflow's own code is run from: only processes with its definition poll it."""
    return f"{task_queue}.workflow.{name}"


async def connect(address: str, namespace: str = DEFAULT_NAMESPACE, *, keys: PayloadKeys | None = None) -> Client:
    """A client of the deployment: what it sends encrypted with its payload key, what it reads decrypted
    (codec.py), the process's own (`held_keys`, from its environment) unless `keys` are given."""
    return await Client.connect(address, namespace=namespace,
                                data_converter=data_converter(held_keys() if keys is None else keys))


class TemporalEngine:
    """Runs workflows on Temporal: given a connected `client` (asyncio only; `connect` makes one
    with the deployment's payload key), or an `address`.

    `task_queue` is where agents' turns go unless their Runtime names another queue.
    `run_turns` makes this process a worker of that queue too. `key` is the deployment's run key
    (every process of it holds the same one); without it, `load_key` finds it, making the
    default key file on first use.
    """

    def __init__(
        self,
        *,
        task_queue: str,
        client: Client | None = None,
        address: str | None = None,
        namespace: str = DEFAULT_NAMESPACE,
        run_turns: bool = True,
        worker_root: Path | None = None,
        key: RunKey | None = None,
    ) -> None:
        if (client is None) == (address is None):
            raise DefinitionError("TemporalEngine takes a client or an address, one of them")
        self.key = held(key if key is not None else load_key(create=True))
        self.task_queue = task_queue
        self.client = client
        self.address = address
        self.namespace = client.namespace if client is not None else namespace
        self.run_turns = run_turns
        self.worker_root = worker_root

    async def run(
        self,
        definition: WorkflowDefinition,
        *,
        args: Any = None,
        run_root: str | Path | None = None,
        cwd: str | Path | None = None,
        timeout: Duration | None = None,
        budget: Budget | None = None,
        continue_from: str | Path | None = None,
        rerun: str | None = None,
    ) -> RunResult:
        """Run `definition` on Temporal to its end, as `agentswf.run` does locally; `budget` holds
        as locally, kept by the workflow (flow.py). A workflow with `policies` is refused before it
        starts: its tool calls are answered by the workflow's handlers, which no policy sees there.

        `continue_from` (a run on Temporal: its id or directory) makes this a new attempt of it, as
        locally, in a Temporal workflow of its own: its stages recorded complete and its id'd turns
        answered are given back, not run (`rerun` runs a stage again), its spend carried (attempts.py)."""
        if definition.policies:
            raise DefinitionError(f"not on {type(self).__name__} yet: policies (workflow {definition.name}'s "
                                  "policies=); run locally for them")
        directory = Path(cwd or Path.cwd()).resolve()
        root = Path(run_root) if run_root is not None else DEFAULT_RUN_ROOT
        root = root if root.is_absolute() else directory / root
        seconds = DEFAULT_RUN_TIMEOUT_SECONDS if timeout is None else to_seconds(timeout, what="the run's timeout")
        first_started: float | None = None
        if continue_from is not None:
            continued = continued_run(definition, root, continue_from, args, cwd, on_temporal=True)
            await settled(continued.run_dir)
            args, directory, first_started = continued.args, continued.cwd, continued.started_at
            budget = budget if budget is not None else continued.budget
            run_id, record_dir = continued.run_dir.name, continued.run_dir
        else:
            run_id, record_dir = make_run_record_dir(root / definition.name)
        durable = Durable.begin(
            record_dir, definition, continuing=continue_from is not None, rerun=rerun,
            budget={name: cap for name, cap in msgspec.to_builtins(budget).items() if cap is not None} if budget else None,
        )  # the attempt claimed, as locally: a continue reads it
        request = RunRequest(
            workflow=definition.name, run_id=run_id, args=args, cwd=str(directory), run_dir=str(record_dir), timeout=seconds,
            turn_queue=self.task_queue, budget=msgspec.to_builtins(budget) if budget is not None else None,
            attempt=attempt_input(durable),
        )
        workflow_id = attempt_workflow_id(definition.name, run_id, durable.attempt.n)
        started = durable.attempt.started_at
        (record_dir / TEMPORAL_FILE).write_bytes(msgspec.json.encode(
            {"workflow_id": workflow_id, "address": self._address(), "namespace": self.namespace,
             "task_queue": self.task_queue, "started_at": started, "run_turns": self.run_turns}
        ))  # the attempt's: what `awf status`, `awf approve` and the next `awf continue` reach
        ledger = durable.ledger  # the run's spend, from what its earlier attempts spent
        endings: list[RunEnding] = []
        work = anyio.CancelScope()

        async def shielded() -> None:
            # As a local run's actors: the Recorder outlives the caller's cancellation long enough to
            # record how the run ended. The cancellation reaches the workflow through `work` alone.
            with anyio.CancelScope(shield=True):
                async with Supervisor("temporal-record") as supervisor:  # the record's one writer
                    recorder = supervisor.spawn(
                        Recorder, record_dir, LogLines(), Appends(), ledger, name="recorder",
                        capacity=RECORDER_MAILBOX_CAPACITY,
                    )
                    await recorder.ask(RunStarted(
                        run_id, definition.name, args, str(directory), first_started or started, "",
                    ))
                    run_started(run_id, record_dir, engine="temporal", workflow_id=workflow_id)
                    ending = RunEnding(outcome="cancelled", reason="the run was cancelled")
                    with work:
                        ending = await on_asyncio(lambda: self._run(definition, request, workflow_id))
                    await write_record(recorder, ending, started, (record_dir, durable.attempt))
                    endings.append(ending)
            watch.cancel_scope.cancel()

        async with anyio.create_task_group() as watch:
            watch.start_soon(_pass_on_cancellation, work)
            watch.start_soon(shielded)
        await anyio.lowlevel.checkpoint_if_cancelled()  # the caller's cancellation goes on to the caller
        [ending] = endings
        return RunResult(
            ending.outcome, ending.value, ending.reason, run_id, record_dir, ending.where, ending.traceback,
            ledger.snapshot(), durable.attempt.n,
        )

    def _address(self) -> str:
        """The frontend's HOST:PORT, for `awf approve` and the like to reach the run."""
        if self.client is not None:
            return str(self.client.service_client.config.target_host)
        return self.address or ""

    async def _run(self, definition: WorkflowDefinition, request: RunRequest, workflow_id: str) -> RunEnding:
        client = self.client or await connect(self.address or "", self.namespace)
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(workflow_worker(client, self.task_queue, definition, self.key))
            if self.run_turns:
                await stack.enter_async_context(turn_worker(client, self.task_queue, key=self.key, root=self.worker_root))
            handle = await client.start_workflow(
                WORKFLOW_TYPE, start_input(self.key, request, workflow_id), id=workflow_id,
                task_queue=workflow_queue(self.task_queue, definition.name),
            )
            try:
                raw = await handle.result()
            except WorkflowFailureError as error:  # its host ended it (codec.HostCipher), or a person terminated it
                return RunEnding(outcome="failed", reason=failed_on_temporal(error))
            except asyncio.CancelledError:  # the caller gave up (Ctrl-C): the workflow is cancelled, as a local run is
                # Shielded from anyio's repeated cancellation too, when the host is anyio on asyncio.
                with anyio.CancelScope(shield=True):
                    ending = await _cancel(handle)
                    await stack.aclose()  # the workers stop once the workflow has
                return ending
        return msgspec.convert(raw, RunEnding)


def failed_on_temporal(error: WorkflowFailureError) -> str:
    """Why a workflow ended other than an agentswf workflow ends (its result a RunEnding), in a line."""
    cause = error.cause
    return f"its workflow failed on Temporal: {getattr(cause, 'message', None) or cause or error}"


async def _cancel(handle: WorkflowHandle[Any, Any]) -> RunEnding:
    """Cancel the workflow and wait, bounded, for how it ended (its worker is still here to end it)."""
    await handle.cancel()
    try:
        return msgspec.convert(await asyncio.wait_for(handle.result(), CANCEL_WAIT_SECONDS), RunEnding)
    except Exception:  # it did not end in time, or not as an agentswf workflow ends
        return RunEnding(outcome="cancelled", reason="the run was cancelled")


async def _pass_on_cancellation(work: anyio.CancelScope) -> None:
    """Wait; once cancelled (by the caller, or at the run's end), cancel the run's own work."""
    try:
        await anyio.sleep_forever()
    finally:
        work.cancel()


async def settle_record(run_dir: Path) -> str:
    """Write the record of a Temporal run whose host ended before it could (killed, say), from the
    workflow's result on Temporal, once the workflow has ended. What happened, in a line."""
    info = msgspec.json.decode((run_dir / TEMPORAL_FILE).read_bytes())
    if not await _settle(run_dir, info):
        return f"run {run_dir.name} is still running on Temporal (workflow {info['workflow_id']})"
    return f"run {run_dir.name}'s record was written from Temporal: its host ended before it could"


async def settled(run_dir: Path) -> None:
    """Before a continue: the record of the run's last attempt written from Temporal where its host ended
    before it could (its stages and id'd turns with it); raises DefinitionError while it still runs there."""
    if (run_dir / "output.json").exists():
        return
    info = msgspec.json.decode((run_dir / TEMPORAL_FILE).read_bytes())
    if not await _settle(run_dir, info):
        raise DefinitionError(f"continue {run_dir.name}: it is still running on Temporal (workflow {info['workflow_id']}); "
                              "awf stop it, or wait for it to end")


async def _settle(run_dir: Path, info: dict[str, Any]) -> bool:
    """The record written from the workflow's result, with its attempt's; False while the workflow runs."""
    started = float(info.get("started_at") or msgspec.json.decode((run_dir / "run.json").read_bytes())["started_at"])
    try:
        attempts = read_attempts(run_dir)
    except RecordRefused:
        attempts = []
    unended = attempts[-1] if attempts and attempts[-1].ended_at is None else None  # the host's, ended here
    try:  # what the attempts before it spent, as the host left usage.json (a turn of its own is not in it yet)
        earlier = msgspec.convert(read_json(run_dir / USAGE_FILE), RunUsage) if unended is not None and unended.n > 1 else None
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        earlier = None

    async def fetch() -> RunEnding | None:
        client = await connect(info["address"], info["namespace"])
        handle = client.get_workflow_handle(info["workflow_id"])
        description = await handle.describe()
        if description.status is None or description.status == WorkflowExecutionStatus.RUNNING:
            return None
        try:
            return msgspec.convert(await handle.result(), RunEnding)
        except WorkflowFailureError as error:
            return RunEnding(outcome="failed", reason=f"the workflow ended {description.status.name}: {error.cause}")

    ending = await on_asyncio(fetch)
    if ending is None:
        return False
    async with Supervisor("temporal-record") as supervisor:
        recorder = supervisor.spawn(
            Recorder, run_dir, LogLines(), Appends(), Ledger(unended.n if unended else 1, earlier), name="recorder",
            capacity=RECORDER_MAILBOX_CAPACITY,
        )
        await write_record(recorder, ending, started, (run_dir, unended) if unended is not None else None)
    return True


async def write_record(
    recorder: ActorRef, ending: RunEnding, started: float, attempt: tuple[Path, AttemptRecord] | None = None
) -> None:
    """The run's record as a local run's, from the lines its workflow kept: `awf logs RUN` reads it;
    and the `attempt`'s (in the run's directory): its stages' and id'd turns' records, then its end."""
    if attempt is not None:
        await anyio.to_thread.run_sync(write_kept, *attempt, ending.lines.durable)
        for session in sessions_opened(ending.lines.durable, attempt[1].n):
            await recorder.ask(session)
    for turn in ending.lines.turns:
        await recorder.ask(TurnEnded(msgspec.convert(turn, Turn[Any])))
    for line in ending.lines.tools:  # built, not converted: ToolCalled's approval type is only named for checkers
        await recorder.ask(ToolCalled(**line))
    for call in ending.lines.calls:  # calls/<call id>/ as the worker's local run wrote them
        try:  # files an agent may have written to on its worker, as locally: what doesn't fit is left out
            opened = msgspec.convert(call["opened"], CallOpened)
            lines: list[AttemptOutput | CandidateSeen] = [msgspec.convert(line, AttemptOutput) for line in call["attempts"]]
            lines += [msgspec.convert(line, CandidateSeen) for line in call["candidates"]]
        except (msgspec.ValidationError, KeyError, TypeError):
            continue
        await recorder.ask(opened)
        for line in lines:
            await recorder.ask(line)
        if isinstance(call.get("result"), dict) and "value" in call["result"]:
            await recorder.ask(ResultAccepted(opened.call_id, call["result"]["value"]))
    for line in ending.lines.log:
        await recorder.ask(msgspec.convert(line, Logged))
    for line in ending.lines.messages:  # messages.jsonl, as the local switchboard has it written
        if line["event"] == "sent":
            await recorder.ask(MessageSent(msgspec.convert(line["mail"], Mail), line["route"], line["read"]))
        else:
            await recorder.ask(MessageRead(line["message_id"], line["by"], line["at"]))
    await recorder.ask(
        RunEnded(ending.outcome, ending.reason, ending.value, started, time.time(), ending.where, ending.traceback)
    )
    if attempt is not None:
        await anyio.to_thread.run_sync(end_attempt, *attempt, ending.lines.attempt, ending.outcome, ending.reason)


def start_input(key: RunKey, request: RunRequest, workflow_id: str) -> dict[str, Any]:
    """The workflow's input: `request`, sealed now for the workflow `workflow_id` (its worker runs nothing else)."""
    now = msgspec.structs.replace(request, sealed_at=time.time())
    return seal(key, now, kind="start", workflow=workflow_id, run="", name=WORKFLOW_TYPE, by="starter", nonce="")


def workflow_worker(client: Client, task_queue: str, definition: WorkflowDefinition, key: RunKey) -> Worker:
    """A worker that runs `definition`'s workflow code (from its queue under `task_queue`), with `key`; a
    worker's answer it can't decrypt ends the run (codec.HostCipher)."""
    register(definition)
    return Worker(
        hosting(client), task_queue=workflow_queue(task_queue, definition.name), workflows=[AgentswfWorkflow],
        workflow_runner=UnsandboxedWorkflowRunner(), interceptors=[KeyHolder(key)],
    )


def turn_worker(
    client: Client, task_queue: str, *, key: RunKey | None = None, root: Path | None = None,
    max_concurrent: int | None = None, refused: Callable[[str], None] = say_refused, harnesses: Resolve | None = None,
) -> Worker:
    """A worker that runs agents' turns and forks (the activities `agentswf.turn`, `agentswf.fork`)
    from `task_queue`, each only if sealed with `key` (load_key's without it). The process becomes
    non-dumpable: its agents, of its user, can't read the key from it. Its turns run in one local
    run it holds until it shuts down (turns.WorkerRuns). `harnesses` stands in for the agents'
    CLIs (agentswf.testing's scripted agents)."""
    activities = TurnActivities(client, held(key if key is not None else load_key(create=True)), root=root,
                                refused=refused, harnesses=harnesses)
    return TurnWorker(
        client, task_queue=task_queue, activities=[activities.turn, activities.fork],
        max_concurrent_activities=max_concurrent or DEFAULT_MAX_TURNS, runs=activities.runs,
    )


async def on_asyncio(work: Callable[[], Awaitable[T]]) -> T:
    """`await work()` on asyncio: here under asyncio; under trio on a loop in a thread of its own."""
    if sniffio.current_async_library() == "asyncio":
        return await work()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="agentswf-temporal", daemon=True)
    thread.start()
    try:
        future: concurrent.futures.Future[T] = contextvars.Context().run(
            asyncio.run_coroutine_threadsafe, _coroutine(work), loop
        )
        try:
            return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            loop.call_soon_threadsafe(future.cancel)
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(concurrent.futures.wait, [future])
            if future.cancelled() or future.exception() is not None:
                raise
            return future.result()  # the work caught the cancellation and ended as it chose
    finally:
        loop.call_soon_threadsafe(loop.stop)
        await anyio.to_thread.run_sync(thread.join)
        loop.close()


async def _coroutine(work: Callable[[], Awaitable[T]]) -> T:
    return await work()
