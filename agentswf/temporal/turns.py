"""The turn activity: one agent's turn run by the local engine, inside a Temporal worker.

Nothing of the turn is re-implemented here: the activity opens the agent in a local run of
its own (its actors, socket, launcher and `wfa`), gives it the one turn, and closes it. What
Temporal adds is around it: a heartbeat while the turn runs (a worker killed mid-turn is
noticed within the heartbeat timeout, and the turn runs again elsewhere), the agent's
native session resumed from its last turn, and tools whose handlers live in the workflow:
each call the local broker has read and checked goes to the workflow as an update, and
the handler's answer comes back as the call's result.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import msgspec
from temporalio import activity
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import ApplicationError

from ..engine.outcomes import Turn
from ..engine.records import make_private_dirs, read_lines
from ..engine.run import run_actors
from ..engine.toolcall import ToolCall
from ..errors import DefinitionError, HarnessError, WorkflowError, leaf_errors
from ..harnesses.base import AttemptEnding, Harness, Operation, OperationResult
from ..harnesses.runtime import Runtime, harness_for
from ..workflow.agents import Agents
from ..workflow.tools import Tool
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
from .remote_board import RemoteBoard, Seen
from .schema_types import type_of

HEARTBEAT_INTERVAL_SECONDS = 1.0
IDLE_POLL_SECONDS = 0.02  # how often a turn's activity looks whether its agent is idle
DEFAULT_WORKER_ROOT = Path(".awf") / "temporal"


def proxy_tool(spec: ToolSpec, handle: WorkflowHandle[Any, Any], agent: str, turn: int) -> Tool:
    """A tool whose handler is the workflow's: the checked input goes as an update, the reply comes back."""

    async def forward(value: Any, call: ToolCall) -> Any:
        request = ToolRequest(agent, spec.name, call.id, msgspec.to_builtins(value), turn)
        raw = await handle.execute_update(TOOL_UPDATE, msgspec.to_builtins(request))
        reply = msgspec.convert(raw, ToolReply)
        if reply.outcome != "result":
            raise WorkflowError(reply.error)
        return reply.result

    return Tool(handler=forward, description=spec.description, input=type_of(spec.input), timeout=spec.timeout,
                call_param="call")


class TurnActivities:
    """The activities a worker runs: `agentswf.turn`. `client` reaches the workflows for tool calls;
    `root` is where each turn's local record is kept; `env` is what agents' CLIs start with."""

    def __init__(self, client: Client, *, root: Path | None = None, env: Mapping[str, str] | None = None) -> None:
        self.client = client
        self.root = (root or DEFAULT_WORKER_ROOT).resolve()
        self.env = dict(os.environ if env is None else env)
        self.identity = client.identity  # pid@host unless the client was given another

    @activity.defn(name=TURN_ACTIVITY)
    async def turn(self, raw: dict[str, Any]) -> dict[str, Any]:
        request = msgspec.convert(raw, TurnRequest)
        info = activity.info()
        if info.workflow_id is None:
            raise WorkflowError("agentswf.turn runs only as a workflow's activity")
        handle = self.client.get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)
        record = self.root / request.workflow / request.run_id / f"{request.agent}-{request.n}-attempt{info.attempt}"
        make_private_dirs(record)
        tools = {spec.name: proxy_tool(spec, handle, request.agent, request.n) for spec in request.tools}
        board = (handle, info.activity_id) if request.can_message else None
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(_heartbeat)
                turn, others = await run_turn(request, record, self.env, tools, board)
                group.cancel_scope.cancel()
        except Exception as error:
            why = next((leaf for leaf in leaf_errors(error) if isinstance(leaf, (DefinitionError, HarnessError))), None)
            if why is None:
                raise
            # This worker can't run the agent (its CLI is missing, its runtime is wrong): another attempt won't help.
            raise ApplicationError(str(why), type=type(why).__name__, non_retryable=True) from None
        return {"turn": turn, "others": others, "attempt": info.attempt, "worker": self.identity}


    @activity.defn(name=FORK_ACTIVITY)
    async def fork(self, raw: dict[str, Any]) -> dict[str, Any]:
        """The harness's fork of the agent's session, on this worker: the copy's session, or why not."""
        request = msgspec.convert(raw, ForkRequest)
        try:
            harness = harness_for(request.runtime, self.env)
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
        return {"session": result.session if result.ending.kind == "exited" else None, "reason": result.ending.reason,
                "usage": msgspec.to_builtins(result.usage), "worker": self.identity}


async def run_turn(
    request: TurnRequest, record: Path, env: Mapping[str, str], tools: dict[str, Tool],
    board: tuple[WorkflowHandle[Any, Any], str] | None = None,
) -> tuple[dict[str, Any] | None, list[Any]]:
    """The turn, run by the local engine in a run of its own under `record`: the Turn's builtins
    (None for a message turn's activity), and the records of the turns its mail started.

    With `board` (the run's workflow and this activity's id) the agent's switchboard is the
    workflow's: the agent messages its peers, and mail that comes once its turn is over starts
    a turn of its own here, as it would locally; the activity ends once the agent is idle."""

    def resolve(key: str, runtime: Runtime) -> Harness:
        return harness_for(runtime, env)

    left = max(0.0, request.deadline - time.time())
    turn: Turn[Any] | None = None
    seen = Seen() if board is not None else None
    remote = None if board is None else (RemoteBoard, (board[0], request.agent, board[1], request.kind == "message", seen))
    async with run_actors(record, deadline=anyio.current_time() + left, board=remote) as actors:
        sessions = {request.agent: request.session} if request.session is not None else None
        agents = Agents(actors.run, actors.board, Path(request.cwd), env, resolve, ledger=actors.ledger, sessions=sessions)
        agent = await agents.open(
            request.agent, runtime=request.runtime, tools=tools, instructions=request.instructions, cwd=request.cwd
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
