"""The turn activity: one agent's turn run by the local engine, inside a Temporal worker.

Nothing of the turn is re-implemented here: the activity opens the agent in the worker's local
run (its actors, socket directory and watchdog, opened once and held for the worker's life:
`WorkerRuns`), gives it the one turn, and closes it; its launcher and `wfa` are the agent's, as
locally. An agent with a route opens a run of its own for its turn, whose switchboard is the
workflow's (remote_board.py). What Temporal adds is around it: a heartbeat while the turn runs (a worker killed mid-turn is
noticed within the heartbeat timeout, and the turn runs again elsewhere), the agent's
native session resumed from its last turn, and tools whose handlers live in the workflow:
each call the local broker has read and checked goes to the workflow as an update, and
the handler's answer comes back as the call's result.

The worker runs only what the run key sealed (keys.py): an activity whose input isn't sealed
for its workflow's run and its own id is refused, non-retryably, and said on stderr; what
it sends (a tool call, an agent's mail) it seals as the agent whose turn it runs, and it
seals its result. The key stays in this process: agents' environments never carry it.
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import anyio
import msgspec
from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.worker import Worker

from ..engine.outcomes import Turn
from ..engine.record.layout import make_private_dirs, read_lines, regular_bytes
from ..engine.record.lines import ATTEMPTS_FILE, Logged
from ..engine.run import RunActors, run_actors
from ..engine.tools.call import ToolCall
from ..errors import ActorStopped, DefinitionError, HarnessError, WorkflowError, leaf_errors
from ..harnesses.base import AttemptEnding, Harness, Operation, OperationResult
from ..harnesses.cli_version import CliChecks
from ..harnesses.environment import scrubbed
from ..harnesses.runtime import Runtime, harness_for
from ..sandbox.runner import SandboxedHarness
from ..workflow.agents import Agents
from ..workflow.sandboxes import Sandboxes
from ..workflow.tools import Tool
from .keys import RunKey, SealBroken, seal, unseal
from .messages import (
    FORK_ACTIVITY,
    TOOL_UPDATE,
    TURN_ACTIVITY,
    ForkRequest,
    ToolReply,
    ToolRequest,
    ToolSpec,
    TurnRequest,
)
from .remote_board import RemoteBoard, Seen, seal_update
from .schema_types import type_of

HEARTBEAT_INTERVAL_SECONDS = 1.0
IDLE_POLL_SECONDS = 0.02  # how often a turn's activity looks whether its agent is idle
DEFAULT_WORKER_ROOT = Path(".awf") / "temporal"
Resolve = Callable[[str, Runtime], Harness]  # an agent's key and runtime -> the harness that runs its turns
WORKER_RUN_TURNS = 1000
"""Turns a worker's local run is given before a fresh one takes its place (once its turns have
ended): its record, its ledger and its switchboard's endpoints grow with its turns."""


class HeldRun:
    """One local run a worker keeps open, its record under `record`: its actors live in a task of
    their own (an anyio scope is left in the task that entered it); agents open in it for a turn."""

    def __init__(self, record: Path) -> None:
        self.record = record
        self.keys: set[str] = set()  # agents in a turn here now: a key is open once in a run
        self.given = 0  # turns given here
        self.actors: RunActors | None = None
        self._opened = asyncio.Event()
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._failed: BaseException | None = None

    async def open(self) -> None:
        make_private_dirs(self.record)
        self._task = asyncio.ensure_future(self._hold())
        await self._opened.wait()
        if self._failed is not None:
            raise self._failed

    async def _hold(self) -> None:
        try:
            async with run_actors(self.record, deadline=math.inf) as actors:
                self.actors = actors
                self._opened.set()
                await self._closing.wait()
        except Exception as error:  # said to the turn that opened it, or to the next: not to the worker
            self._failed = error
        finally:
            self.actors = None
            self._opened.set()

    def alive(self) -> bool:
        return self.actors is not None and not self._closing.is_set()

    async def close(self) -> None:
        self._closing.set()
        if self._task is not None:
            await asyncio.shield(self._task)


class WorkerRuns:
    """The worker's local runs: one, usually, held for the worker's life, so a turn pays no run's
    setup (its actors, socket directory and watchdog: 15-40 ms here). A turn of an agent whose key is
    in a turn in every held run (two workflows' `reviewer` at once), or once the run has been given
    `turns_per_run` turns, gets a fresh run; a run left with no turn, beside another, is closed."""

    def __init__(self, root: Path, *, turns_per_run: int = WORKER_RUN_TURNS) -> None:
        self.root = root
        self.turns_per_run = turns_per_run
        self.runs: list[HeldRun] = []
        self.clis = CliChecks()  # each CLI's version read once a worker, not once a turn
        self._opened = 0
        self._lock = asyncio.Lock()

    @asynccontextmanager
    async def lease(self, key: str) -> AsyncIterator[HeldRun]:
        """A held run with no agent `key` open, `key` taken in it for the block."""
        held = await self._take(key)
        try:
            yield held
        finally:
            held.keys.discard(key)
            await self._tidy()

    async def _take(self, key: str) -> HeldRun:
        async with self._lock:  # two turns at once open one run, not two
            for held in self.runs:
                if held.alive() and key not in held.keys and held.given < self.turns_per_run:
                    break
            else:
                self._opened += 1
                held = HeldRun(self.root / "runs" / f"{os.getpid()}-{int(time.time())}-{self._opened}")
                self.runs.append(held)
                try:
                    await held.open()
                except BaseException:
                    self.runs.remove(held)
                    raise
            held.keys.add(key)
            held.given += 1
            return held

    async def _tidy(self) -> None:
        """Close the runs with no turn that aren't the one to keep: worn out, dead, or one too many."""
        keep = next((held for held in self.runs if held.alive() and held.given < self.turns_per_run), None)
        for held in list(self.runs):
            if held is not keep and not held.keys:
                self.runs.remove(held)
                await held.close()

    async def close(self) -> None:
        runs, self.runs = self.runs, []
        for held in runs:
            await held.close()


class TurnWorker(Worker):
    """A Temporal worker of turns (`turn_worker`): once it has shut down, its held local runs close."""

    def __init__(self, *args: Any, runs: WorkerRuns, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.runs = runs

    async def __aexit__(self, exc_type: type[BaseException] | None, *args: Any) -> None:
        try:
            await super().__aexit__(exc_type, *args)
        finally:
            await self.runs.close()


TYPES_KEPT = 256
"""Schemas whose rebuilt type a worker keeps: a turn of a schema seen before reuses its type, and so
the teaching made of it (agents.TAUGHT_KEPT), rather than making a new class each turn."""


def rebuilt(schema: Any) -> Any:
    """The msgspec type of `schema` (schema_types.type_of), the same one for the same schema."""
    return _rebuilt(msgspec.json.encode(schema))


@functools.lru_cache(maxsize=TYPES_KEPT)
def _rebuilt(schema: bytes) -> Any:
    return type_of(msgspec.json.decode(schema))


def proxy_tool(spec: ToolSpec, handle: WorkflowHandle[Any, Any], key: RunKey, agent: str, turn: int, activity_id: str) -> Tool:
    """A tool whose handler is the workflow's: the checked input goes as an update, the reply comes back."""

    async def forward(value: Any, call: ToolCall) -> Any:
        request = ToolRequest(agent, spec.name, call.id, msgspec.to_builtins(value), turn, activity_id)
        raw = await handle.execute_update(TOOL_UPDATE, seal_update(key, handle, TOOL_UPDATE, request, agent))
        reply = msgspec.convert(raw, ToolReply)
        if reply.outcome != "result":
            raise WorkflowError(reply.error)
        return reply.result

    return Tool(handler=forward, description=spec.description, input=rebuilt(spec.input), timeout=spec.timeout,
                call_param="call")


def say_refused(why: str) -> None:
    """What a worker does with an activity it refused, by default: says so on stderr."""
    print(f"awf: refused: {why}", file=sys.stderr, flush=True)


class TurnActivities:
    """The activities a worker runs: `agentswf.turn`. `client` reaches the workflows for tool calls;
    `key` is the deployment's run key; `root` is where the worker's local runs keep their records;
    `env` is what agents' CLIs start with (without the key's variables); `refused(why)` hears of an
    activity refused for its seal; `harnesses(key, runtime)` runs agents in place of their CLIs
    (agentswf.testing's scripts)."""

    def __init__(
        self, client: Client, key: RunKey, *, root: Path | None = None, env: Mapping[str, str] | None = None,
        refused: Callable[[str], None] = say_refused, harnesses: Resolve | None = None,
    ) -> None:
        self.client = client
        self.key = key
        self.root = (root or DEFAULT_WORKER_ROOT).resolve()
        self.env = scrubbed(os.environ if env is None else env)
        self.identity = client.identity  # pid@host unless the client was given another
        self.refused = refused
        self.runs = WorkerRuns(self.root)
        self.resolve: Resolve = harnesses or (lambda key, runtime: harness_for(runtime, self.env))

    def _opened(self, name: str, raw: Any) -> Any:
        """The activity's input, if the run key sealed it for this very activity; else refused for good."""
        info = activity.info()
        if info.workflow_id is None:
            raise WorkflowError(f"{name} runs only as a workflow's activity")
        try:
            sealed = unseal(self.key, raw, kind="activity", workflow=info.workflow_id, run=info.workflow_run_id or "",
                            name=f"{name}/{info.activity_id}", what=f"activity {info.activity_id} of workflow {info.workflow_id}",
                            holder="this worker")
        except SealBroken as error:
            self.refused(str(error))
            raise ApplicationError(f"this worker refused the activity: {error}", type="Refused", non_retryable=True) from None
        return sealed.body

    def _sealed_result(self, name: str, body: Any) -> dict[str, Any]:
        info = activity.info()
        return seal(self.key, body, kind="result", workflow=info.workflow_id or "", run=info.workflow_run_id or "",
                    name=f"{name}/{info.activity_id}", by=f"worker:{self.identity}", nonce="")

    @activity.defn(name=TURN_ACTIVITY)
    async def turn(self, raw: dict[str, Any]) -> dict[str, Any]:
        request = msgspec.convert(self._opened(TURN_ACTIVITY, raw), TurnRequest)
        info = activity.info()
        handle = self.client.get_workflow_handle(info.workflow_id or "", run_id=info.workflow_run_id)
        tools = {spec.name: proxy_tool(spec, handle, self.key, request.agent, request.n, info.activity_id)
                 for spec in request.tools}
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(_heartbeat)
                if request.can_message:  # a local run of its own, recorded where turns_ran finds it
                    record = self.root / request.workflow / request.run_id / attempt_name(
                        request.agent, request.n, info.attempt)
                    make_private_dirs(record)
                    turn, others = await run_turn(request, record, self.env, tools, (handle, self.key, info.activity_id),
                                                  worker_root=self.root, resolve=self.resolve)
                    calls = read_calls(record, [turn, *others])
                else:
                    turn, others = None, []
                    async with self.runs.lease(request.agent) as held:
                        actors = held.actors
                        assert actors is not None
                        try:
                            async with agent_turn(actors, request, self.env, tools, worker_root=self.root, resolve=self.resolve,
                                                  clis=self.runs.clis) as turn:
                                pass
                        finally:  # whose turn it was, in the held run's log: answered once the lines before it
                            # (the call's attempts and candidates) are written, so they are read whole
                            with anyio.CancelScope(shield=True), suppress(ActorStopped):  # a run gone: said already
                                await actors.recorder.ask(Logged(time.time(), TURN_RAN, {
                                    "workflow": request.workflow, "run_id": request.run_id, "agent": request.agent,
                                    "turn": request.n, "attempt": info.attempt, "call": (turn or {}).get("call_id"),
                                    "workflow_id": info.workflow_id}))
                        calls = read_calls(held.record, [turn])
                group.cancel_scope.cancel()
        except Exception as error:
            why = next((leaf for leaf in leaf_errors(error) if isinstance(leaf, (DefinitionError, HarnessError))), None)
            if why is None:
                raise
            # This worker can't run the agent (its CLI is missing, its runtime is wrong): another attempt won't help.
            raise ApplicationError(str(why), type=type(why).__name__, non_retryable=True) from None
        return self._sealed_result(TURN_ACTIVITY, {"turn": turn, "others": others, "calls": calls,
                                                   "attempt": info.attempt, "worker": self.identity})

    @activity.defn(name=FORK_ACTIVITY)
    async def fork(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The harness's fork of the agent's session, on this worker: the copy's session, or why not."""
        request = msgspec.convert(self._opened(FORK_ACTIVITY, raw), ForkRequest)
        try:
            harness = self.resolve(request.agent, request.runtime)
        except (DefinitionError, HarnessError) as error:
            raise ApplicationError(str(error), type=type(error).__name__, non_retryable=True) from None
        operation = Operation(agent=request.agent, kind="fork", session=request.session, cwd=Path(request.cwd),
                              env={**self.env, **request.runtime.env})
        async with anyio.create_task_group() as group:
            group.start_soon(_heartbeat)
            try:
                if request.sandbox is not None:
                    result = await self._sandboxed_fork(request, harness, operation)
                else:
                    result = await harness.fork(operation)
            except DefinitionError as error:  # its sandbox can't open on this worker: another attempt won't either
                raise ApplicationError(str(error), type=type(error).__name__, non_retryable=True) from None
            except Exception as error:  # a harness that breaks fails the fork, not the run
                result = OperationResult(AttemptEnding("failed", reason=f"the agent's fork could not be run: {error}"))
            group.cancel_scope.cancel()
        return self._sealed_result(FORK_ACTIVITY, {
            "session": result.session if result.ending.kind == "exited" else None, "reason": result.ending.reason,
            "usage": msgspec.to_builtins(result.usage), "worker": self.identity,
        })

    async def _sandboxed_fork(self, request: ForkRequest, harness: Harness, operation: Operation) -> OperationResult:
        """The fork of a sandboxed agent: its CLI's fork run in the agent's sandbox, opened here as its
        turns open it, with the home this worker keeps for it in the run; the copy placed in the fork's
        kept home, where the fork's turns on a worker of this run root find it (sandboxes.md#forks)."""
        sandboxes = Sandboxes(Path(request.cwd), lambda message, **fields: None, record=self.root,
                              keep_homes=(request.workflow, request.run_id))
        confined = await sandboxes.confine(request.agent, harness, request.sandbox, Path(request.cwd))
        assert isinstance(confined, SandboxedHarness)  # a sandbox was given
        return await confined.fork_kept(operation, request.fork, Path(request.fork_cwd))


TURN_RAN = "turn ran"  # the held run's log line of each turn it ran: whose it was, and its call


def attempt_name(agent: str, n: int, attempt: int) -> str:
    return f"{agent}-{n}-attempt{attempt}"


def turns_ran(root: Path, workflow: str, run_id: str) -> list[str]:
    """The turn attempts of run `run_id` of `workflow` that the worker of `root` (its --run-root) ran,
    each `<agent>-<turn>-attempt<n>`: what its held runs' logs say, and the local runs an agent with a
    route had of its own (`<root>/<workflow>/<run id>/<agent>-<turn>-attempt<n>/`)."""
    ran = [
        attempt_name(line["fields"]["agent"], line["fields"]["turn"], line["fields"]["attempt"])
        for log in sorted(root.glob("runs/*/log.jsonl")) for line in read_lines(log)
        if line.get("message") == TURN_RAN and line.get("fields", {}).get("workflow") == workflow
        and line["fields"].get("run_id") == run_id
    ]
    own = root / workflow / run_id
    return sorted(ran + ([path.name for path in own.iterdir()] if own.is_dir() else []))


CALL_FILES_MAX_BYTES = 512 * 1024
"""A turn's call files sent back with its result, at most: what its agent wrote there (its candidates,
its output) could otherwise pass Temporal's payload limit and fail the turn. Past it, lines are left out."""


def read_calls(record: Path, turns: list[dict[str, Any] | None]) -> list[dict[str, Any]]:
    """The files of each turn's call in the local run's `record` (`calls/<call id>/`), as the run's
    record on its host holds them once its Recorder writes them again: `awf logs` shows them."""
    calls, left = [], CALL_FILES_MAX_BYTES
    for turn in turns:
        if turn is None or not turn.get("call_id"):
            continue
        directory = record / "calls" / turn["call_id"]
        found: dict[str, Any] = {}
        for name in ("call.json", "result.json", ATTEMPTS_FILE, "candidates.jsonl"):
            try:
                data = regular_bytes(directory / name) or b""
            except OSError:
                continue
            left -= len(data)
            if left < 0:
                break
            if name.endswith(".jsonl"):
                found[name] = [line for line in (_decoded(raw) for raw in data.splitlines()) if isinstance(line, dict)]
            else:
                found[name] = _decoded(data)
        if isinstance(found.get("call.json"), dict):
            calls.append({"opened": found["call.json"], "result": found.get("result.json"),
                          "attempts": found.get(ATTEMPTS_FILE, []), "candidates": found.get("candidates.jsonl", [])})
    return calls


def _decoded(data: bytes) -> Any:
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError:
        return None


@asynccontextmanager
async def agent_turn(
    actors: RunActors, request: TurnRequest, env: Mapping[str, str], tools: dict[str, Tool], *, worker_root: Path,
    resolve: Resolve, clis: CliChecks | None = None,
) -> AsyncIterator[dict[str, Any] | None]:
    """The turn (or compaction) of `request`'s agent, opened in the local run of `actors`: its Turn's
    builtins, numbered as the workflow numbers it (None for a message turn's activity). The agent is
    closed as the block ends (after the turns its mail started, for an agent with a route)."""
    sessions = {request.agent: request.session} if request.session is not None else None
    agents = Agents(actors.run, actors.board, Path(request.cwd), env, resolve, sessions=sessions)
    if clis is not None:
        agents.clis = clis
    # A sandbox never sees the worker's records (its turns' lines are read back from them).
    agents.sandboxes = Sandboxes(Path(request.cwd), lambda message, **fields: None, record=worker_root,
                                 keep_homes=(request.workflow, request.run_id))  # its session, for its next turn
    try:
        agent = await agents.open(
            request.agent, runtime=request.runtime, tools=tools, instructions=request.instructions, cwd=request.cwd,
            sandbox=request.sandbox,
        )
        # Its turns before this one ran on whichever workers took them: it numbers this one as the workflow
        # does (WFA_TURN, a script's turn.n). Not a turn that carries the instructions (the agent's first
        # that ran): the local engine puts them in its turn 1's prompt only.
        if request.instructions is None:
            agent.count_from(request.n)
        turn: Turn[Any] | None = None
        if request.kind == "compaction":
            turn = await agent.compact(request.prompt, deadline=request.deadline)
        elif request.kind == "turn":
            turn = await agent.run(
                request.prompt, schema=rebuilt(request.schema), deadline=request.deadline, nudge=request.nudge
            )
        yield None if turn is None else msgspec.to_builtins(msgspec.structs.replace(turn, n=request.n))
    finally:
        with anyio.CancelScope(shield=True):  # a cancelled turn's agent is stopped before its key is given back
            await agents.close_all()


async def run_turn(
    request: TurnRequest, record: Path, env: Mapping[str, str], tools: dict[str, Tool],
    board: tuple[WorkflowHandle[Any, Any], RunKey, str], *, worker_root: Path, resolve: Resolve,
) -> tuple[dict[str, Any] | None, list[Any]]:
    """The turn of an agent with a route, run by the local engine in a run of its own under `record` (in
    `worker_root`) whose switchboard is the workflow's (`board`: the run's workflow, the run key and this
    activity's id): the Turn's builtins (None for a message turn's activity), and the records of the turns
    its mail started. The agent messages its peers, and mail that comes once its turn is over starts a
    turn of its own here, as it would locally; the activity ends once the agent is idle."""
    left = max(0.0, request.deadline - time.time())
    seen = Seen()
    remote = (RemoteBoard, (board[0], board[1], request.agent, board[2], request.kind == "message", seen))
    async with run_actors(record, deadline=anyio.current_time() + left, board=remote) as actors:
        async with agent_turn(actors, request, env, tools, worker_root=worker_root, resolve=resolve) as ended:
            with anyio.move_on_after(max(0.0, request.deadline - time.time())):  # the run's actors end the rest
                await _until_idle(seen, first_mail=request.kind == "message")
            seen.closing = True
    others = [line for line in read_lines(record / "turns.jsonl") if line.get("started_by") == "message"]
    return ended, others


async def _until_idle(seen: Seen, *, first_mail: bool) -> None:
    """Wait until the agent has nothing to do (the turns its mail started are over); a message
    turn's activity first waits for the agent to take its mail. The agent's presence is a slot
    it sets, with no message per change, so it is read here every IDLE_POLL_SECONDS."""
    while not seen.idle() or (first_mail and not seen.took):  # noqa: ASYNC110 (a slot, set without a word)
        await anyio.sleep(IDLE_POLL_SECONDS)


async def _heartbeat() -> None:
    """Every HEARTBEAT_INTERVAL_SECONDS, from the first on: a turn shorter than that sends none (the
    heartbeat timeout counts from the activity's start), which spares the server a call per quick turn."""
    while True:
        await anyio.sleep(HEARTBEAT_INTERVAL_SECONDS)
        activity.heartbeat()
