"""An agent on Temporal: its driver (each turn an activity on a worker of its task queue, its
session, its lock and its mail), and what seals and checks what crosses to a worker.

The workflow side of the run (`flow.py`) opens agents with it; like it, this is Temporal
workflow code: deterministic primitives and asyncio, never anyio.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, FailureError
from temporalio.exceptions import CancelledError as TemporalCancelled
from temporalio.exceptions import TimeoutError as TemporalTimeout
from temporalio.worker import Interceptor, WorkflowInterceptorClassInput

from ..engine.ids import ID_BYTES
from ..engine.mail.rules import MESSAGE_TURN_SECONDS
from ..engine.outcomes import Answered, Cancelled, Failed, TimedOut, Turn
from ..errors import DefinitionError, RunKeyError
from ..sandbox.spec import SandboxSpec, check_spec
from ..wire.teaching import Taught
from ..workflow.agents import Agent, taught_of
from ..workflow.durations import Duration, to_seconds
from ..workflow.tools import Tool
from .keys import RunKey, SealBroken, seal, unseal
from .messages import FORK_ACTIVITY, TURN_ACTIVITY, ForkRequest, ToolSpec, TurnRequest
from .schema_types import UnsupportedSchema, type_of

if TYPE_CHECKING:
    from .flow import TemporalRun

T = TypeVar("T")
R = TypeVar("R")

HEARTBEAT_TIMEOUT_SECONDS = 5.0  # a worker silent this long is taken as lost: its turn runs again elsewhere
TURN_GRACE_SECONDS = 30.0  # past a turn's deadline, for the worker to stop its CLI and report
TURN_ATTEMPTS = 3  # a turn's activity, tried again only when its worker was lost or failed
RETRY_INTERVAL_SECONDS = 1.0
FORK_SECONDS = 120.0  # a fork's copy of a session, on its worker (no model call)
START_WINDOW_SECONDS = 600.0  # a run's sealed request starts a workflow this close to when it was sealed (clocks differ)
MAX_CAUSES_SAID = 4  # of a failed activity's chain of causes, at most, in its turn's reason


class TemporalDriver:
    """An agent's driver on Temporal (port.AgentDriver): each turn an activity on a worker of its
    task queue, one at a time in the order given; the agent's session kept here between them; its
    mail, when nothing of it runs, starts a turn of its own."""

    def __init__(self, run: TemporalRun) -> None:
        self._run = run
        self.session: str | None = None
        self._queue = asyncio.Lock()  # turns run one at a time, in the order given
        self._taught = False  # its instructions went with an activity that ran
        self._message_turns = 0
        self._mail_activities = 0
        self.pump: asyncio.Task[None] | None = None  # turns its mail starts, when nothing else runs

    def clock(self) -> float:
        return workflow.now().timestamp()

    def wall(self) -> float:
        return workflow.now().timestamp()  # workflow time, not the host's

    def new_id(self) -> str:
        return workflow_id()

    def deadline(self, timeout: Duration | None, deadline: object) -> float:
        """Unix seconds in workflow time; the run's timeout bounds it too."""
        limit = self._run.run_deadline
        if timeout is not None:
            limit = min(limit, workflow.now().timestamp() + to_seconds(timeout, what="timeout"))
        if deadline is not None:
            unix = deadline.timestamp() if isinstance(deadline, datetime) else float(deadline)  # type: ignore[arg-type]
            if not math.isfinite(unix):
                raise DefinitionError(f"deadline must be a datetime or Unix seconds, not {deadline!r}")
            limit = min(limit, unix)
        return limit

    def check_schema(self, key: str, taught: Taught) -> None:
        rebuildable(taught.schema, f"agent {key}: the turn's schema")

    async def turn(self, agent: Agent, n: int, prompt: str, taught: Taught, deadline: float, nudge: bool) -> Turn[Any]:
        agents = self._run
        started = workflow.now().timestamp()
        async with self._queue:
            request = TurnRequest(
                workflow=agents.workflow, run_id=agents.run_id, agent=agent.key, n=n,
                runtime=agent.spec.runtime, cwd=agent.spec.cwd, instructions=self._instructions(agent),
                prompt=prompt, schema=taught.schema, tools=_specs(agent.tools),
                deadline=deadline, nudge=nudge, session=self.session, can_message=agents.board_has(agent.key),
                sandbox=agent.sandbox,
            )
            agents.started.append({"agent": agent.key, "n": n, "prompt": prompt, "at": workflow.now().timestamp()})
            try:
                turn = await self._execute(agent, request, taught.type)
            except asyncio.CancelledError:  # in the record as locally: who gave up on it, and why
                reason = Cancelled(agents.cancelled_because("turn"))
                agents.ended(Turn(outcome=reason, agent=agent.key, call_id="", n=n, started_at=started,
                                  ended_at=workflow.now().timestamp()), n)
                raise
            if turn.session is not None:  # before the next turn, queued behind this one, is sent
                self.session = turn.session
        return turn

    def ended(self, turn: Turn[Any], n: int) -> None:
        self._run.ended(turn, n)

    def _instructions(self, agent: Agent) -> str | None:
        return None if self._taught else agent.spec.instructions

    def mail_came(self, agent: Agent) -> None:
        """Mail was delivered to the agent: with no activity of its own running (whose worker
        hears of it), the mail starts a turn of its own, once the agent's earlier work is done."""
        if agent.closed or self.pump is not None or agent.key in self._run.running:
            return
        self.pump = asyncio.ensure_future(self._read_mail(agent))

    async def _read_mail(self, agent: Agent) -> None:
        try:
            async with self._queue:
                while not agent.closed and self._run.board.unread(agent.key):
                    if not await self._message_turn(agent):
                        return  # its mail stays unread: the agent's next turn takes it
        finally:
            self.pump = None

    async def _message_turn(self, agent: Agent) -> bool:
        """An activity whose agent's mail starts its turn on the worker (a turn that takes no result),
        its deadline as the local rule sets it: MESSAGE_TURN_SECONDS, longer for an asker waiting longer."""
        agents = self._run
        now = workflow.now().timestamp()
        deadline = now + MESSAGE_TURN_SECONDS
        asker_until = agents.board.standing(agent.key).latest_asker_until
        if asker_until is not None and not math.isinf(asker_until):
            deadline = max(deadline, asker_until)
        request = TurnRequest(
            workflow=agents.workflow, run_id=agents.run_id, agent=agent.key, n=self._message_turns + 1,
            runtime=agent.spec.runtime, cwd=agent.spec.cwd, instructions=self._instructions(agent), prompt="",
            schema=taught_of(str).schema, tools=_specs(agent.tools),
            deadline=min(deadline, agents.run_deadline), session=self.session, kind="message", can_message=True,
            sandbox=agent.sandbox,
        )
        self._mail_activities += 1
        turn = await self._execute(agent, request, None, activity_id=f"{agent.key}-mail-{self._mail_activities}")
        if isinstance(turn.outcome, Answered):
            return True
        agents.log("a turn started by mail could not run", agent=agent.key, reason=turn.outcome.reason or "")
        return False

    async def _execute(
        self, agent: Agent, request: TurnRequest, answer_type: Any, *, activity_id: str | None = None
    ) -> Turn[Any]:
        agents, key = self._run, agent.key
        left = max(0.0, request.deadline - workflow.now().timestamp())
        started = workflow.now().timestamp()
        agents.in_turn.add((key, request.n))
        activity_id = activity_id or f"{key}-turn-{request.n}"
        agents.began(key, activity_id)
        try:
            sealed = await workflow.execute_activity(
                TURN_ACTIVITY,
                seal_activity(TURN_ACTIVITY, activity_id, request),
                task_queue=agents.queue_of(agent.spec.runtime),
                schedule_to_close_timeout=timedelta(seconds=left + TURN_GRACE_SECONDS),
                heartbeat_timeout=timedelta(seconds=HEARTBEAT_TIMEOUT_SECONDS),
                retry_policy=RetryPolicy(
                    maximum_attempts=TURN_ATTEMPTS, initial_interval=timedelta(seconds=RETRY_INTERVAL_SECONDS)
                ),
                activity_id=activity_id,
                summary=f"{key} {request.kind} {request.n}",
            )
        except ActivityError as error:
            if isinstance(error.cause, TemporalCancelled):  # the workflow (or its branch) was cancelled
                raise asyncio.CancelledError(str(error.cause)) from error
            ended = workflow.now().timestamp()
            if isinstance(error.cause, TemporalTimeout):
                outcome: Any = TimedOut(f"the turn's activity timed out on Temporal: {error.cause}")
            elif isinstance(error.cause, ApplicationError) and error.cause.non_retryable:
                outcome = Failed(f"the worker could not run the turn: {error.cause.message}")
            else:
                outcome = Failed(f"the turn's activity failed on Temporal: {_said(error.cause or error)}", retryable=True)
            return Turn(outcome=outcome, agent=key, call_id="", n=request.n, started_at=started, ended_at=ended)
        finally:
            agents.turn_over(key, request.n)
            agents.ended_activity(key)
            if agents.board.unread(key):  # mail its worker didn't take: a turn of its own
                self.mail_came(agent)
        raw = opened_result(TURN_ACTIVITY, activity_id, sealed)
        if isinstance(raw, str):
            now = workflow.now().timestamp()
            return Turn(outcome=Failed(raw), agent=key, call_id="", n=request.n, started_at=started, ended_at=now)
        self._taught = True
        numbered = {} if raw["turn"] is None else {raw["turn"]["call_id"]: request.n}
        for line in raw["others"]:  # the turns its mail started on the worker, numbered here
            self._message_turns += 1
            other = msgspec.structs.replace(msgspec.convert(line, Turn[Any]), n=self._message_turns)
            numbered[other.call_id] = other.n
            self.session = other.session or self.session
            agents.operated(other)
        for call in raw.get("calls", []):  # the record's calls/ as the worker's local run wrote them, numbered here
            opened = call["opened"]
            agents.lines.calls.append({**call, "opened": {**opened, "n": numbered.get(opened.get("call_id"), opened.get("n"))}})
        if raw["turn"] is None:  # a message turn's activity: its turns are the others
            now = workflow.now().timestamp()
            return Turn(outcome=Answered(None), agent=key, call_id="", n=request.n, started_at=started, ended_at=now)
        turn = msgspec.convert(raw["turn"], Turn[Any])
        if raw["attempt"] > 1:  # the attempts before were lost with their worker, or failed on it
            agents.log("turn ran again", agent=key, turn=request.n, attempt=raw["attempt"], worker=raw["worker"])
        if isinstance(turn.outcome, Answered) and answer_type is not None:  # the worker checked the schema; the workflow's own type has the last word
            try:
                value = msgspec.convert(turn.outcome.value, answer_type, from_attributes=True)
            except msgspec.ValidationError as error:
                return msgspec.structs.replace(turn, outcome=Failed(f"the answer does not fit the turn's schema: {error}"))
            turn = msgspec.structs.replace(turn, outcome=Answered(value))
        return turn

    async def compact(self, agent: Agent, n: int, focus: str, deadline: float, refusal: str | None) -> Turn[str]:
        """An activity that resumes the agent's session and compacts it; where the harness can't, none."""
        if refusal is not None:
            now = workflow.now().timestamp()
            record: Turn[str] = Turn(
                outcome=Failed(refusal, False), agent=agent.key, call_id="", n=n, started_at=now, ended_at=now,
                session=self.session, kind="compaction",
            )
        else:
            async with self._queue:
                request = TurnRequest(
                    workflow=self._run.workflow, run_id=self._run.run_id, agent=agent.key, n=n,
                    runtime=agent.spec.runtime, cwd=agent.spec.cwd, instructions=None, prompt=focus,
                    schema=taught_of(str).schema, deadline=deadline, session=self.session, kind="compaction",
                    can_message=self._run.board_has(agent.key), sandbox=agent.sandbox,
                )
                record = await self._execute(agent, request, str, activity_id=f"{agent.key}-compaction-{n}")
                if record.session is not None:
                    self.session = record.session
        self._run.operated(record)
        return record

    async def set(self, agent: Agent, n: int, model: str | None, effort: str | None) -> Turn[None]:
        """Each turn's worker starts the CLI afresh from the runtime, so nothing is sent to a worker."""
        runtime = agent.spec.runtime
        runtime = msgspec.structs.replace(
            runtime, model=runtime.model if model is None else model, effort=runtime.effort if effort is None else effort
        )
        agent.spec = msgspec.structs.replace(agent.spec, runtime=runtime)
        now = workflow.now().timestamp()
        record: Turn[None] = Turn(
            outcome=Answered(None), agent=agent.key, call_id="", n=n, started_at=now, ended_at=now,
            session=self.session, kind="set", model=runtime.model, effort=runtime.effort,
        )
        self._run.operated(record)
        return record

    async def fork(self, agent: Agent, n: int, key: str) -> Turn[Any]:
        """The activity `agentswf.fork`: the session copied on a worker, after the work queued before it."""
        async with self._queue:
            if self.session is None:
                raise DefinitionError(f"agent {agent.key}: an agent cannot be forked before its first turn")
            started = workflow.now().timestamp()
            request = ForkRequest(agent=agent.key, runtime=agent.spec.runtime, cwd=agent.spec.cwd, session=self.session,
                                  sandbox=agent.sandbox, workflow=self._run.workflow, run_id=self._run.run_id, fork=key,
                                  fork_cwd=self._run.fork_cwd_of(key))
            activity_id = f"{agent.key}-fork-{n}"
            try:
                sealed = await workflow.execute_activity(
                    FORK_ACTIVITY, seal_activity(FORK_ACTIVITY, activity_id, request),
                    task_queue=self._run.queue_of(agent.spec.runtime),
                    start_to_close_timeout=timedelta(seconds=FORK_SECONDS),
                    heartbeat_timeout=timedelta(seconds=HEARTBEAT_TIMEOUT_SECONDS),
                    retry_policy=RetryPolicy(maximum_attempts=TURN_ATTEMPTS,
                                             initial_interval=timedelta(seconds=RETRY_INTERVAL_SECONDS)),
                    activity_id=activity_id, summary=f"{agent.key} fork {n} into {key}",
                )
                opened = opened_result(FORK_ACTIVITY, activity_id, sealed)
                raw = {"session": None, "reason": opened, "usage": None} if isinstance(opened, str) else opened
            except ActivityError as error:
                if isinstance(error.cause, TemporalCancelled):
                    raise asyncio.CancelledError(str(error.cause)) from error
                raw = {"session": None, "reason": str(error.cause or error), "usage": None}
            outcome: Any = Answered(key) if raw["session"] else Failed(raw["reason"] or "the fork gave no session", False)
            record: Turn[Any] = Turn(
                outcome=outcome, agent=agent.key, call_id="", n=n, started_at=started, ended_at=workflow.now().timestamp(),
                session=raw["session"], kind="fork", model=agent.spec.runtime.model, effort=agent.spec.runtime.effort,
            )
            self._run.operated(record)
        return record

    async def set_tools(self, tools: dict[str, Tool]) -> None:
        pass  # each turn's activity carries the agent's tools as they are then


def rebuildable(schema: dict[str, Any], what: str) -> None:
    """Refuse, before anything is scheduled, a schema a worker couldn't teach and check."""
    try:
        type_of(schema)
    except UnsupportedSchema as error:
        raise DefinitionError(f"{what} can't be sent to a Temporal worker: {error}") from None


class SharedSandbox(msgspec.Struct, frozen=True):
    """A sandbox of `wf.sandboxes.open` on Temporal: its spec, checked in the workflow, its cwd absolute
    (a path on the workers): each turn's worker opens it around the agent's CLI, its paths from that cwd.

    Attributes:
        key: its key in the run.
        spec: what it reads, writes and reaches, as given; paths relative to `spec.cwd`.
    """

    key: str
    spec: SandboxSpec


def sandbox_spec(key: str, sandbox: Any, run_cwd: Path, agent_cwd: Path) -> SandboxSpec | None:
    """An agent's sandbox= as the spec its worker opens (checked here as locally), its cwd absolute:
    as locally, a spec that names no cwd has its paths from the agent's cwd (`write=["."]` on a
    worktree writes the worktree), one that names one from the run's; a sandbox of `wf.sandboxes`
    from its own cwd."""
    if sandbox is None:
        return None
    if isinstance(sandbox, SharedSandbox):
        return sandbox.spec
    if not isinstance(sandbox, (SandboxSpec, Mapping)):
        raise DefinitionError(
            f"agent {key}: on the Temporal engine sandbox= takes a sandbox of wf.sandboxes.open or a spec of its own "
            f"(a SandboxSpec or a dict of cwd, read, write, network), not {type(sandbox).__name__}"
        )
    try:
        spec = check_spec(sandbox)
    except DefinitionError as error:
        raise DefinitionError(f"agent {key}: {error}") from None
    return msgspec.structs.replace(spec, cwd=str(run_cwd / spec.cwd) if spec.cwd is not None else str(agent_cwd))


def _specs(tools: dict[str, Tool]) -> tuple[ToolSpec, ...]:
    """What the worker gets of the tools; one that waits for a person is bounded by the turn's deadline alone."""
    return tuple(
        ToolSpec(name, tool.description, tool.taught.schema, None if tool.requires_approval else tool.timeout)
        for name, tool in tools.items()
    )


KEY_EXTERN = "agentswf.run_key"  # the extern function that gives workflow code its worker's run key


class KeyHolder(Interceptor):
    """Given to a worker (or a Replayer) that runs agentswf workflows: its workflows' code seals and
    checks with `key`. Each worker holds its own: an extern function of the worker's, not a global."""

    def __init__(self, key: RunKey) -> None:
        self.key = key

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> None:
        key = self.key
        input.unsafe_extern_functions[KEY_EXTERN] = lambda: key


def worker_key() -> RunKey:
    """The run key of the worker running this workflow's code (a worker without one fails its task, saying so)."""
    given = workflow.extern_functions().get(KEY_EXTERN)
    if given is None:
        raise RunKeyError("this worker runs agentswf workflows without a run key: give it interceptors=[KeyHolder(key)]"
                          " (engine.workflow_worker does)")
    key: RunKey = given()
    return key


def seal_activity(activity_type: str, activity_id: str, request: Any) -> dict[str, Any]:
    """An activity's input, sealed for this run and that activity: a worker runs nothing else."""
    info = workflow.info()
    return seal(worker_key(), request, kind="activity", workflow=info.workflow_id, run=info.run_id,
                name=f"{activity_type}/{activity_id}", by="workflow", nonce="")


def opened_result(activity_type: str, activity_id: str, raw: Any) -> Any:
    """An activity's result, if a holder of the run key made it for this one; else why not (a str)."""
    info = workflow.info()
    try:
        sealed = unseal(worker_key(), raw, kind="result", workflow=info.workflow_id, run=info.run_id,
                        name=f"{activity_type}/{activity_id}", what=f"the result of {activity_id}")
    except SealBroken as error:
        return f"{error}; something other than a worker of this deployment answered it"
    return sealed.body


def driver_of(agent: Agent) -> TemporalDriver:
    """The driver of an agent of this run (every one is a TemporalDriver)."""
    assert isinstance(agent._driver, TemporalDriver)
    return agent._driver


def workflow_time() -> float:
    return workflow.now().timestamp()


def workflow_id() -> str:
    """A message's id: from the workflow's seeded randomness, so the same on every replay."""
    return workflow.uuid4().hex[: 2 * ID_BYTES]


def _said(error: BaseException) -> str:
    """An error's message and its causes' (`Failed decoding arguments: a payload … is encrypted with payload
    key '…'`): the SDK wraps what went wrong on the worker in its own words."""
    said: list[str] = []
    seen: BaseException | None = error
    while seen is not None and len(said) < MAX_CAUSES_SAID:
        text = str(seen)
        if text and text not in said:
            said.append(text)
        seen = seen.cause if isinstance(seen, FailureError) else seen.__cause__
    return ": ".join(said)
