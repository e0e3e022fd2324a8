"""The turn activity: one agent's turn run by the local engine, inside a Temporal worker.

Nothing of the turn is re-implemented here: the activity opens the agent in a local run of
its own (its actors, socket, launcher and `wfa`), gives it the one turn, and closes it. What
Temporal adds is around it: a heartbeat while the turn runs (a worker killed mid-turn is
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

import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import msgspec
from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ApplicationError

from ..engine.outcomes import Turn
from ..engine.record.layout import make_private_dirs, read_lines
from ..engine.run import run_actors
from ..engine.tools.call import ToolCall
from ..errors import DefinitionError, HarnessError, WorkflowError, leaf_errors
from ..harnesses.base import AttemptEnding, Harness, Operation, OperationResult
from ..harnesses.environment import scrubbed
from ..harnesses.runtime import Runtime, harness_for
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


def proxy_tool(spec: ToolSpec, handle: WorkflowHandle[Any, Any], key: RunKey, agent: str, turn: int, activity_id: str) -> Tool:
    """A tool whose handler is the workflow's: the checked input goes as an update, the reply comes back."""

    async def forward(value: Any, call: ToolCall) -> Any:
        request = ToolRequest(agent, spec.name, call.id, msgspec.to_builtins(value), turn, activity_id)
        raw = await handle.execute_update(TOOL_UPDATE, seal_update(key, handle, TOOL_UPDATE, request, agent))
        reply = msgspec.convert(raw, ToolReply)
        if reply.outcome != "result":
            raise WorkflowError(reply.error)
        return reply.result

    return Tool(handler=forward, description=spec.description, input=type_of(spec.input), timeout=spec.timeout,
                call_param="call")


def say_refused(why: str) -> None:
    """What a worker does with an activity it refused, by default: says so on stderr."""
    print(f"awf: refused: {why}", file=sys.stderr, flush=True)


class TurnActivities:
    """The activities a worker runs: `agentswf.turn`. `client` reaches the workflows for tool calls;
    `key` is the deployment's run key; `root` is where each turn's local record is kept; `env` is
    what agents' CLIs start with (without the key's variables); `refused(why)` hears of an
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
        record = self.root / request.workflow / request.run_id / f"{request.agent}-{request.n}-attempt{info.attempt}"
        make_private_dirs(record)
        tools = {spec.name: proxy_tool(spec, handle, self.key, request.agent, request.n, info.activity_id)
                 for spec in request.tools}
        board = (handle, self.key, info.activity_id) if request.can_message else None
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(_heartbeat)
                turn, others = await run_turn(request, record, self.env, tools, board, worker_root=self.root,
                                              resolve=self.resolve)
                group.cancel_scope.cancel()
        except Exception as error:
            why = next((leaf for leaf in leaf_errors(error) if isinstance(leaf, (DefinitionError, HarnessError))), None)
            if why is None:
                raise
            # This worker can't run the agent (its CLI is missing, its runtime is wrong): another attempt won't help.
            raise ApplicationError(str(why), type=type(why).__name__, non_retryable=True) from None
        return self._sealed_result(TURN_ACTIVITY, {"turn": turn, "others": others, "attempt": info.attempt,
                                                   "worker": self.identity})


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
                result = await harness.fork(operation)
            except Exception as error:  # a harness that breaks fails the fork, not the run
                result = OperationResult(AttemptEnding("failed", reason=f"the agent's fork could not be run: {error}"))
            group.cancel_scope.cancel()
        return self._sealed_result(FORK_ACTIVITY, {
            "session": result.session if result.ending.kind == "exited" else None, "reason": result.ending.reason,
            "usage": msgspec.to_builtins(result.usage), "worker": self.identity,
        })


async def run_turn(
    request: TurnRequest, record: Path, env: Mapping[str, str], tools: dict[str, Tool],
    board: tuple[WorkflowHandle[Any, Any], RunKey, str] | None = None, *, worker_root: Path, resolve: Resolve,
) -> tuple[dict[str, Any] | None, list[Any]]:
    """The turn, run by the local engine in a run of its own under `record` (in `worker_root`): the
    Turn's builtins (None for a message turn's activity), and the records of the turns its mail started.

    With `board` (the run's workflow, the run key and this activity's id) the agent's switchboard is the
    workflow's: the agent messages its peers, and mail that comes once its turn is over starts
    a turn of its own here, as it would locally; the activity ends once the agent is idle."""

    left = max(0.0, request.deadline - time.time())
    turn: Turn[Any] | None = None
    seen = Seen() if board is not None else None
    remote = None if board is None else (
        RemoteBoard, (board[0], board[1], request.agent, board[2], request.kind == "message", seen)
    )
    async with run_actors(record, deadline=anyio.current_time() + left, board=remote) as actors:
        sessions = {request.agent: request.session} if request.session is not None else None
        agents = Agents(actors.run, actors.board, Path(request.cwd), env, resolve, ledger=actors.ledger, sessions=sessions)
        # A sandbox never sees the worker's records (its turns' lines are read back from them).
        agents.sandboxes = Sandboxes(Path(request.cwd), lambda message, **fields: None, record=worker_root)
        agent = await agents.open(
            request.agent, runtime=request.runtime, tools=tools, instructions=request.instructions, cwd=request.cwd,
            sandbox=request.sandbox,
        )
        if request.kind == "compaction":
            turn = await agent.compact(request.prompt, deadline=request.deadline)
        elif request.kind == "turn":
            turn = await agent.run(
                request.prompt, schema=type_of(request.schema), deadline=request.deadline, nudge=request.nudge
            )
        if seen is not None:
            with anyio.move_on_after(max(0.0, request.deadline - time.time())):  # the run's actors end the rest
                await _until_idle(seen, first_mail=request.kind == "message")
            seen.closing = True
        await agents.close_all()  # cancelled, the run's actors stop it as they end
    others = [line for line in read_lines(record / "turns.jsonl") if line.get("started_by") == "message"]
    ended = None if turn is None else msgspec.to_builtins(msgspec.structs.replace(turn, n=request.n))
    return ended, others


async def _until_idle(seen: Seen, *, first_mail: bool) -> None:
    """Wait until the agent has nothing to do (the turns its mail started are over); a message
    turn's activity first waits for the agent to take its mail. The agent's presence is a slot
    it sets, with no message per change, so it is read here every IDLE_POLL_SECONDS."""
    while not seen.idle() or (first_mail and not seen.took):  # noqa: ASYNC110 (a slot, set without a word)
        await anyio.sleep(IDLE_POLL_SECONDS)


async def _heartbeat() -> None:
    while True:
        activity.heartbeat()
        await anyio.sleep(HEARTBEAT_INTERVAL_SECONDS)
