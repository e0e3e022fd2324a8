"""The workflow side on Temporal: the `wf` a workflow function is given, as Temporal workflow code.

The same author surface as the local engine (`wf.agents.open`, `agent.run`, `wf.parallel`,
`wf.stage`, `wf.log`, `wf.stop`), written only against Temporal's deterministic primitives
and asyncio, never anyio (anyio's cancel scopes deadlock around Temporal operations, as
measured). It decides nothing the local engine's pure checks don't already decide: keys,
tools and schemas are checked by the same functions, a turn's answer by the same Taught.

What maps onto what:
- `agent.run` is the activity `agentswf.turn` (messages.TurnRequest, the whole turn), on the
  agent's task queue; its deadline is fixed once, in workflow time, and bounds every retry.
- a tool call is the update `agentswf.tool`, answered here by the tool's own handler.
- every update is taken only sealed with the deployment's run key (keys.py), checked in its
  validator (which runs when the update is delivered, never on replay; a rejected update
  leaves no history); every activity's input is sealed here, and its result checked.
- `wf.parallel` is asyncio tasks; the run's timeout a durable timer (`asyncio.timeout`).
- `wf.log` is workflow state (the query `agentswf.log`), shown as progress when not replaying.
- budgets are `Budgets` on workflow time: each turn past one is refused here, before it is scheduled.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import msgspec
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import CancelledError as TemporalCancelled
from temporalio.exceptions import TimeoutError as TemporalTimeout
from temporalio.worker import Interceptor, WorkflowInterceptorClassInput

from ..engine.accounting import Ledger
from ..engine.ids import ID_BYTES
from ..engine.lines import ApprovalDecision, ApprovalRequest, ToolCalled
from ..engine.mailrules import MESSAGE_TURN_SECONDS
from ..engine.operator import (
    MAX_INBOX_WAIT_SECONDS,
    NOT_A_PARTICIPANT,
    OperatorResponse,
    PostAs,
    ReadInbox,
    Stop,
    posted,
)
from ..engine.outcomes import Answered, Cancelled, Failed, TimedOut, Turn
from ..engine.policy import redact_value
from ..engine.rules import Refusal
from ..engine.switchboard import WORKFLOW_KEY, Mail, Posted
from ..engine.toolcall import OutcomeCode, ToolCall, ToolOutcomeKind, tool_record
from ..errors import DefinitionError, RunKeyError, StopRequested, stop_among
from ..harnesses.runtime import Runtime
from ..progress import progress
from ..sandbox.spec import SandboxSpec, check_spec
from ..wire.teaching import Taught
from ..workflow.agents import Agent, Agents, AgentSpec, Opened, _taught
from ..workflow.budgets import Budget, Budgets
from ..workflow.context import Approvals, Workflow
from ..workflow.definition import WorkflowDefinition
from ..workflow.durations import Duration, to_seconds
from ..workflow.port import plain, refused
from ..workflow.running import _failure, decode_args
from ..workflow.sandboxes import Sandboxes
from ..workflow.tools import Tool
from ..workflow.worktrees import RunWorktrees
from .board import WorkflowBoard
from .keys import RunKey, SealBroken, seal, unseal
from .messages import (
    DECIDE_UPDATE,
    FORK_ACTIVITY,
    LINES_QUERY,
    LOG_QUERY,
    MAIL_UPDATE,
    OPERATOR_UPDATE,
    PENDING_QUERY,
    TOOL_UPDATE,
    TURN_ACTIVITY,
    WORKFLOW_TYPE,
    DecideRequest,
    ForkRequest,
    MailReply,
    MailRequest,
    RunEnding,
    RunLines,
    RunRequest,
    Sealed,
    ToolReply,
    ToolRequest,
    ToolSpec,
    TurnRequest,
)
from .schema_types import UnsupportedSchema, type_of

T = TypeVar("T")
R = TypeVar("R")

HEARTBEAT_TIMEOUT_SECONDS = 5.0  # a worker silent this long is taken as lost: its turn runs again elsewhere
TURN_GRACE_SECONDS = 30.0  # past a turn's deadline, for the worker to stop its CLI and report
TURN_ATTEMPTS = 3  # a turn's activity, tried again only when its worker was lost or failed
RETRY_INTERVAL_SECONDS = 1.0
FORK_SECONDS = 120.0  # a fork's copy of a session, on its worker (no model call)
START_WINDOW_SECONDS = 600.0  # a run's sealed request starts a workflow this close to when it was sealed (clocks differ)


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
        return _workflow_id()

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
        _rebuildable(taught.schema, f"agent {key}: the turn's schema")

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
            schema=_taught(str).schema, tools=_specs(agent.tools),
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
                outcome = Failed(f"the turn's activity failed on Temporal: {error.cause or error}", retryable=True)
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
        for line in raw["others"]:  # the turns its mail started on the worker, numbered here
            self._message_turns += 1
            other = msgspec.structs.replace(msgspec.convert(line, Turn[Any]), n=self._message_turns)
            self.session = other.session or self.session
            agents.operated(other)
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
                    schema=_taught(str).schema, deadline=deadline, session=self.session, kind="compaction",
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
            request = ForkRequest(agent=agent.key, runtime=agent.spec.runtime, cwd=agent.spec.cwd, session=self.session)
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


def _rebuildable(schema: dict[str, Any], what: str) -> None:
    """Refuse, before anything is scheduled, a schema a worker couldn't teach and check."""
    try:
        type_of(schema)
    except UnsupportedSchema as error:
        raise DefinitionError(f"{what} can't be sent to a Temporal worker: {error}") from None


def _sandbox_spec(key: str, sandbox: Any, run_cwd: Path, agent_cwd: Path) -> SandboxSpec | None:
    """An agent's sandbox= as the spec its worker opens (checked here as locally), its cwd absolute:
    as locally, a spec that names no cwd has its paths from the agent's cwd (`write=["."]` on a
    worktree writes the worktree), one that names one from the run's."""
    if sandbox is None:
        return None
    if not isinstance(sandbox, (SandboxSpec, Mapping)):
        raise DefinitionError(
            f"agent {key}: on the Temporal engine sandbox= takes a spec of its own (a SandboxSpec or a dict of cwd, "
            f"read, write, network); wf.sandboxes is not on it yet"
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


def _driver(agent: Agent) -> TemporalDriver:
    """The driver of an agent of this run (every one is a TemporalDriver)."""
    assert isinstance(agent._driver, TemporalDriver)
    return agent._driver


def _workflow_time() -> float:
    return workflow.now().timestamp()


def _workflow_id() -> str:
    """A message's id: from the workflow's seeded randomness, so the same on every replay."""
    return workflow.uuid4().hex[: 2 * ID_BYTES]


class TemporalRun:
    """A run's state on Temporal, changed only in workflow code: its board, record lines, approvals,
    budgets and the activities that run; and the agents port of its `wf.agents` (port.AgentsPort)."""

    def __init__(self, *, workflow: str, run_id: str, cwd: Path, turn_queue: str, run_deadline: float) -> None:
        self.workflow = workflow
        self.run_id = run_id
        self.run_deadline = run_deadline
        self.cwd = cwd
        self._turn_queue = turn_queue
        self.log: Callable[..., None] = lambda message, **fields: None  # the run's wf.log
        self.lines = RunLines()
        self.pending: dict[str, ApprovalRequest] = {}  # tool calls waiting for a decision, by call id
        self.decisions: dict[str, ApprovalDecision] = {}
        self._tools_of: dict[tuple[str, int], list[int]] = {}  # a turn's tool calls, by their lines' index
        self.in_turn: set[tuple[str, int]] = set()  # (agent, turn) of the turns whose activity runs
        self._waiting_in: dict[str, tuple[str, int]] = {}  # a call waiting for approval: its (agent, turn)
        self.running: dict[str, str] = {}  # agent -> the id of its activity that runs
        self.budgets = Budgets(clock=_workflow_time)  # the run's budgets and what its turns spent
        self.ledger = Ledger()  # what the turns spent, by agent (`agent.usage`)
        self.stopped: str | None = None  # `awf stop`'s reason, once a person stopped the run
        self.started: list[dict[str, Any]] = []  # each turn given, as it is sent: its call.json for `awf tail`
        self.board = WorkflowBoard(
            now=_workflow_time, new_id=_workflow_id,
            on_mail=self._mail_for, on_question=self._expire_later,
        )
        self.lines.messages = self.board.lines
        self._timers: set[asyncio.Task[None]] = set()
        self.agents = Agents.over(self, budgets=self.budgets, ledger=self.ledger)  # `wf.agents`

    def _mail_for(self, key: str) -> None:
        agent = self.agents._open.get(key)
        if agent is not None:
            _driver(agent).mail_came(agent)

    def _expire_later(self, question_id: str, until: float) -> None:
        """A question's wait ends at `until`: a durable timer."""

        async def expire() -> None:
            await workflow.sleep(max(0.0, until - workflow.now().timestamp()))
            self.board.expire(question_id)

        task = asyncio.ensure_future(expire())
        self._timers.add(task)
        task.add_done_callback(self._timers.discard)

    def cancelled_because(self, what: str) -> str:
        """Why a turn the workflow gave up on was cancelled, as the local engine says it."""
        return f"the run was {self.stopped}" if self.stopped else f"the workflow cancelled the {what}"

    def began(self, key: str, activity_id: str) -> None:
        self.running[key] = activity_id
        self.board.set_state(key, "working")

    def ended_activity(self, key: str) -> None:
        self.running.pop(key, None)
        self.board.set_state(key, "idle")

    def board_has(self, key: str) -> bool:
        """Whether a route has `key` at an end: its worker then talks to the run's board."""
        return any(key in (view.sender, view.receiver) for view in self.board.views.values())

    def operated(self, record: Turn[Any]) -> None:
        """A compaction's, a set's or a mail-started turn's record, in the record's turns as on the
        local engine; its spend counts toward the budgets, in the stage open now."""
        self.lines.turns.append(msgspec.to_builtins(record))
        self.ledger.add(record)
        self.budgets.counted(record)

    def ended(self, turn: Turn[Any], n: int) -> None:
        """The turn in the record; its tool calls' lines learn its call id (the worker made it)."""
        self.lines.turns.append(msgspec.to_builtins(turn))
        self.ledger.add(turn)
        for index in self._tools_of.pop((turn.agent, n), []):
            self.lines.tools[index]["turn_call_id"] = turn.call_id

    async def approval(self, request: ToolRequest, tool: Tool) -> ApprovalDecision | None:
        """Wait for a decision on the call; None once the call's turn has ended without one."""
        asked = ApprovalRequest(
            request.call_id, request.tool, request.agent, redact_value(request.input, tool.sensitive_fields),
            asked_at=workflow.now().timestamp(),
        )
        self.pending[request.call_id] = asked
        self._waiting_in[request.call_id] = (request.agent, request.turn)
        self.log("approval asked", agent=request.agent, tool=request.tool, call=request.call_id)
        turn = (request.agent, request.turn)
        try:
            await workflow.wait_condition(lambda: request.call_id in self.decisions or turn not in self.in_turn)
        finally:
            self.pending.pop(request.call_id, None)
            self._waiting_in.pop(request.call_id, None)
        decision = self.decisions.pop(request.call_id, None)
        if decision is None:
            self.log("approval withdrawn: the call's turn ended", call=request.call_id)
            return None
        self.log("approval decided", call=request.call_id, approved=decision.approved, by=decision.by)
        return decision

    def turn_over(self, agent: str, n: int) -> None:
        """The turn's activity ended: a call of it still waiting for approval is withdrawn, at once."""
        self.in_turn.discard((agent, n))
        for call_id, turn in list(self._waiting_in.items()):
            if turn == (agent, n):
                self.pending.pop(call_id, None)
                del self._waiting_in[call_id]

    def decide(self, request: DecideRequest) -> bool:
        """True if a call by that id was waiting."""
        if request.call_id not in self.pending or request.call_id in self.decisions:
            return False
        self.decisions[request.call_id] = ApprovalDecision(request.approved, request.reason, request.by)
        return True

    def called(self, request: ToolRequest, line: ToolCalled) -> None:
        self._tools_of.setdefault((request.agent, request.turn), []).append(len(self.lines.tools))
        self.lines.tools.append(msgspec.to_builtins(line))

    def queue_of(self, runtime: Runtime) -> str:
        return runtime.task_queue or self._turn_queue

    def place(
        self, key: str, runtime: Runtime, instructions: str | None, cwd: str | Path | None, sandbox: Any,
        tools: dict[str, Tool] | None,
    ) -> tuple[AgentSpec, SandboxSpec | None]:
        """`cwd` is a path on the worker that runs the agent's turns, and `sandbox` a spec of its own (a
        SandboxSpec or a dict of cwd, read, write, network), which its turns' worker opens with bubblewrap;
        relative paths are from the agent's cwd there (the run's, for a spec that names a cwd), as locally."""
        box = _sandbox_spec(key, sandbox, self.cwd, self.cwd / cwd if cwd is not None else self.cwd)
        for name, given in (tools or {}).items():
            _rebuildable(given.taught.schema, f"agent {key}: tool {name}'s input")
        directory = str(self.cwd / cwd) if cwd is not None else (box.cwd if box is not None else str(self.cwd))
        return AgentSpec(runtime, instructions, str(directory)), box

    def same_sandbox(self, existing: Any, given: Any, placed: Any) -> bool:
        return bool(existing == placed)

    async def open_agent(self, key: str, spec: AgentSpec, tools: dict[str, Tool], sandbox: Any, placed: Any) -> Opened:
        return self._opened(key, spec, placed, None)

    def _opened(self, key: str, spec: AgentSpec, box: SandboxSpec | None, session: str | None) -> Opened:
        self.board.register(key, "agent")
        driver = TemporalDriver(self)
        driver.session = session
        return Opened(driver, (spec.runtime.model, spec.runtime.effort), None, box)

    def fork_cwd(self, key: str, parent: Agent, cwd: str | Path | None) -> str:
        return str(self.cwd / cwd) if cwd is not None else parent.spec.cwd

    def check_fork(self, parent: Agent) -> None:
        if parent.sandbox is not None:  # the fork activity would run the harness outside it
            raise DefinitionError(f"agent {parent.key} is sandboxed: a sandboxed agent isn't forked on the Temporal engine yet")

    async def open_fork(self, parent: Agent, key: str, spec: AgentSpec, tools: dict[str, Tool], session: str) -> Opened:
        """The fork's turns resume the copy, on whichever worker takes them."""
        for name, given in tools.items():
            _rebuildable(given.taught.schema, f"agent {key}: tool {name}'s input")
        return self._opened(key, spec, None, session)

    def stopper(self) -> Callable[[Agent, str], Awaitable[None]]:
        refused("wf.agents.stop", TemporalPort.name)

    async def close_agents(self, agents: dict[str, Agent]) -> None:
        """Later turns are refused (a worker keeps nothing of an agent between turns); its mail pump stops."""
        for key, agent in agents.items():
            self.board.stopped(key, "its agent was closed")
            pump = _driver(agent).pump
            if pump is not None:
                pump.cancel()

    def tool(self, agent: str, name: str) -> Tool | None:
        found = self.agents._open.get(agent)
        return None if found is None else found.tools.get(name)

    def ended_run(self) -> None:
        """The run is over: its questions' timers stop."""
        for task in list(self._timers):
            task.cancel()


class TemporalMail:
    """The mail port over the run's WorkflowBoard: workflow state, changed only in workflow code."""

    def __init__(self, board: WorkflowBoard) -> None:
        self._board = board

    async def register(self, key: str) -> None:
        self._board.register(key, "participant", can_await=False)

    async def open_route(
        self, sender: str, receiver: str, purpose: str, both_ways: bool, max_messages: int
    ) -> str | Refusal:
        return self._board.open_route(sender, receiver, purpose, both_ways, max_messages)

    async def close_route(self, route_id: str) -> None:
        self._board.close_route(route_id)

    async def post(self, sender: str, peer: str, text: str, *, reply: bool) -> Posted | Refusal:
        return self._board.post(
            sender=sender, peer=peer, text=text, reply=reply, question=False, until=math.inf, in_turn=True
        )

    async def inbox(self, key: str) -> list[Mail]:
        return self._board.take(key)

    async def receive(self, key: str) -> Mail:
        while True:
            await workflow.wait_condition(lambda: self._board.unread(key) > 0)
            taken = self._board.take(key, 1)
            if taken:  # another receiver may have taken it first
                return taken[0]


class TemporalDesk:
    """The approvals port over the workflow's pending tool calls."""

    def __init__(self, agents: TemporalRun) -> None:
        self._agents = agents

    async def pending(self) -> list[ApprovalRequest]:
        return sorted(self._agents.pending.values(), key=lambda request: request.asked_at)

    async def decide(self, call_id: str, decision: ApprovalDecision) -> bool:
        return self._agents.decide(DecideRequest(call_id, decision.approved, decision.reason, decision.by))


class TemporalPort:
    """The engine port of a run on Temporal: its WorkflowBoard, its log as workflow state, asyncio
    tasks (never anyio's, which deadlock around Temporal's operations, as measured). Temporal's history
    makes a stage durable, so no stage record is kept; wf.sandboxes and worktrees it refuses."""

    name = "Temporal"

    def __init__(self, workflow_name: str, agents: TemporalRun) -> None:
        self.mail = TemporalMail(agents.board)
        self._workflow = workflow_name
        self._lines = agents.lines

    def log(self, message: str, fields: Mapping[str, Any]) -> None:
        """A line of the run's log (the query `agentswf.log`), shown as progress when not replaying."""
        kept = plain(fields)
        self._lines.log.append({"at": workflow.now().timestamp(), "message": message, "fields": kept})
        if not workflow.unsafe.is_replaying():
            progress("agentswf.workflow", message, workflow=self._workflow, **kept)

    async def parallel(self, work: list[Callable[[], Awaitable[T]]], concurrency: int | None) -> list[T]:
        limiter = asyncio.Semaphore(concurrency or max(1, len(work)))

        async def one(call: Callable[[], Awaitable[T]]) -> T:
            async with limiter:
                return await call()

        tasks = [asyncio.ensure_future(one(call)) for call in work]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def first(self, awaitables: dict[Any, Awaitable[Any]]) -> tuple[Any, Any]:
        for awaitable in awaitables.values():  # never awaited: closed, so nothing warns of it
            close = getattr(awaitable, "close", None)
            if close is not None:
                close()
        refused("wf.race and wf.select", self.name)

    async def shielded(self, work: Callable[[], Awaitable[None]]) -> None:
        await work()  # the board's changes are workflow state: closing a route never waits

    async def stage_entered(self, name: str, result: Any) -> tuple[bool, Any]:
        return False, None

    async def stage_completed(self, name: str, value: Any) -> None:
        pass

    def stage_left(self) -> None:
        pass

    def sandboxes(self) -> Sandboxes:
        refused("wf.sandboxes", self.name)  # an agent's own sandbox= is on it

    def worktrees(self) -> RunWorktrees:
        refused("wf.worktree", self.name)


async def answer_tool(agents: TemporalRun, request: ToolRequest) -> ToolReply:
    """A tool call from a worker, answered by the tool's handler in the workflow, and recorded."""
    found = agents.tool(request.agent, request.tool)
    if found is None:
        return ToolReply("failed", error=f"agent {request.agent} has no tool {request.tool}")
    started = workflow.now().timestamp()
    approval = await agents.approval(request, found) if found.requires_approval else None
    if found.requires_approval and (approval is None or not approval.approved):
        outcome: ToolOutcomeKind
        code: OutcomeCode
        if approval is None:
            outcome, code, error = "timed-out", "", "no decision on the call's approval before its turn ended"
        else:
            why = f": {approval.reason}" if approval.reason else ""
            outcome, code, error = "refused", "rejected", f"a person rejected this call{why}; the tool did not run"
        agents.called(request, tool_record(
            call_id=request.call_id, turn_call_id="", agent=request.agent, tool=request.tool, input=request.input,
            redacted=found.sensitive_fields, outcome=outcome, error=error, code=code,
            approval=approval, started_at=started, ended_at=workflow.now().timestamp(),
        ))
        return ToolReply("failed", error=error)
    try:
        value = msgspec.convert(request.input, found.input, from_attributes=True) if found.takes_input else None
        result = found.invoke(value, ToolCall(request.call_id, request.agent, request.tool))
        if inspect.isawaitable(result):
            result = await result
        if found.output is not None:
            result = msgspec.convert(result, found.output, from_attributes=True)
        reply = ToolReply("result", msgspec.to_builtins(result))
    except (Exception, StopRequested) as error:  # the handler's failure is the call's, told to the agent, never the run's
        reply = ToolReply("failed", error=str(error) or type(error).__name__)
    agents.called(request, tool_record(
        call_id=request.call_id, turn_call_id="", agent=request.agent, tool=request.tool, input=request.input,
        redacted=found.sensitive_fields, outcome=reply.outcome, result=reply.result, error=reply.error, attempts=1,
        approval=approval, started_at=started, ended_at=workflow.now().timestamp(),
    ))
    return reply


async def answer_mail(agents: TemporalRun, request: MailRequest) -> MailReply:
    """An agent's request of the run's board, from its turn's worker; only while that turn's activity runs."""
    board, key = agents.board, request.agent
    current = agents.running.get(key) == request.activity
    value: Any = None
    if request.op == "watch":  # answered once there is news for the agent, or its activity is over
        def news() -> bool:
            return (agents.running.get(key) != request.activity or board.delivered.get(key, 0) > request.seen
                    or board.versions.get(key, 0) != request.version)

        await workflow.wait_condition(news)
        if agents.running.get(key) != request.activity:
            return MailReply(standing=msgspec.to_builtins(board.standing(key)), seen=request.seen, version=request.version)
        return MailReply(
            standing=msgspec.to_builtins(board.standing(key)), seen=board.delivered.get(key, 0),
            version=board.versions.get(key, 0), replies=board.replies_waiting(key),
        )
    if request.op == "post":
        end = board.ends.get(key)
        if end is not None:
            end.can_await = request.can_await  # where the agent runs says whether it can await a reply
        answer = board.post(
            sender=key, peer=request.peer, text=request.text, reply=request.reply, question=request.question,
            until=math.inf if request.until is None else request.until, in_turn=request.in_turn and current,
        ) if current else Refusal("no-operation", "you aren't in a turn; messages are sent while you work on one.")
        value = {"refused": msgspec.to_builtins(answer)} if isinstance(answer, Refusal) else {"posted": msgspec.to_builtins(answer)}
    elif not current:
        value = [] if request.op == "take" else None  # a turn's stale worker: it changes nothing
    elif request.op == "take":
        value = msgspec.to_builtins(board.take(key))
    elif request.op == "peers":
        value = board.peers(key)
    elif request.op == "drop-await":
        board.drop_await(key)
    else:
        board.give_up(key, request.why)
    return MailReply(standing=msgspec.to_builtins(board.standing(key)), value=value)


async def answer_person(board: WorkflowBoard, request: PostAs | ReadInbox) -> OperatorResponse:
    """As the local operator socket answers `awf inbox` and `awf send`/`awf reply --as KEY`."""
    if request.key not in board.participants():  # a person speaks as a participant, never as an agent
        return OperatorResponse(
            False, f"{request.key} is not a participant of this run (a workflow adds one with wf.participants.open)",
            {"code": NOT_A_PARTICIPANT},
        )
    if isinstance(request, ReadInbox):
        if request.wait_ms > MAX_INBOX_WAIT_SECONDS * 1000:
            return OperatorResponse(False, f"a wait is at most {MAX_INBOX_WAIT_SECONDS:g} seconds; wait again after")
        if not board.unread(request.key) and request.wait_ms > 0:
            try:  # a durable timer bounds the wait
                await workflow.wait_condition(lambda: board.unread(request.key) > 0, timeout=request.wait_ms / 1000)
            except TimeoutError:
                pass
        mail = board.take(request.key)
        return OperatorResponse(True, f"{len(mail)} message(s)", msgspec.to_builtins(mail))
    answer = board.post(
        sender=request.key, peer=request.peer, text=request.text, reply=request.reply, question=False, until=math.inf,
        in_turn=True,
    )
    return posted(request, answer)


DEFINITIONS: dict[str, WorkflowDefinition] = {}
"""The agentswf workflows this process can run as Temporal workflow code, by name (Temporal
needs its workflow class at module level, so the definitions it runs are looked up here)."""


def register(definition: WorkflowDefinition) -> None:
    """Let this process's workers run `definition` (a later one of the same name replaces it)."""
    DEFINITIONS[definition.name] = definition


@workflow.defn(name=WORKFLOW_TYPE, sandboxed=False)
class AgentswfWorkflow:
    """The Temporal workflow that runs an agentswf workflow function (a registered definition).

    Its input and every update it takes are sealed with the deployment's run key: a turn
    worker's for the agent whose turn it runs (tool calls, mail), a person's for a decision or
    a participant's mail. Each update's validator checks its seal and that its nonce is new,
    and its handler marks the nonce used before anything else (validators don't run on
    replay, so they decide nothing the handler needs)."""

    def __init__(self) -> None:
        self.wf: Workflow | None = None
        self.state: TemporalRun | None = None  # the run's state on Temporal, its wf.agents among it
        self.main: asyncio.Task[Any] | None = None  # the workflow function, running: `awf stop` cancels it
        self.nonces: set[str] = set()  # of the updates taken: a seal is good once

    @workflow.run
    async def run(self, raw: dict[str, Any]) -> dict[str, Any]:
        info = workflow.info()
        try:
            sealed = unseal(worker_key(), raw, kind="start", workflow=info.workflow_id, run="", name=WORKFLOW_TYPE,
                            what="the run's request", holder="this workflow worker")
        except SealBroken as error:
            if error.mismatch:  # this worker can't run it, one with the run's key can: its task fails, not the run
                raise RunKeyError(f"workflow {info.workflow_id}: {error}") from None
            return msgspec.to_builtins(RunEnding(outcome="failed", reason=str(error)))  # type: ignore[no-any-return]
        request = msgspec.convert(sealed.body, RunRequest)
        started = info.workflow_start_time.timestamp()
        if abs(started - request.sealed_at) > START_WINDOW_SECONDS:  # the same request, started again later
            reason = (f"the run's request was sealed {started - request.sealed_at:.0f}s before this workflow started: "
                      "a request starts the run it was sealed for, not a copy of it")
            return msgspec.to_builtins(RunEnding(outcome="failed", reason=reason))  # type: ignore[no-any-return]
        definition = DEFINITIONS.get(request.workflow)
        if definition is None:
            reason = f"this worker has no workflow named {request.workflow}"
            return msgspec.to_builtins(RunEnding(outcome="failed", reason=reason))  # type: ignore[no-any-return]
        ending = await run_definition(self, definition, request)
        await workflow.wait_condition(workflow.all_handlers_finished)  # tool calls still answering: in the record
        if self.state is not None:
            ending = msgspec.structs.replace(ending, lines=self.state.lines)
        return msgspec.to_builtins(ending)  # type: ignore[no-any-return]

    def _check(self, name: str, raw: Any, body_type: Any, signer: Callable[[Any], str]) -> Any:
        """An update's validator: its body, if it is sealed for this run and `name` by `signer(body)`, once."""
        info = workflow.info()
        try:
            sealed = unseal(worker_key(), raw, kind="update", workflow=info.workflow_id, run=info.run_id, name=name,
                            what=f"the update {name}")
            body = msgspec.convert(sealed.body, body_type)
        except (SealBroken, msgspec.ValidationError) as error:
            raise ApplicationError(str(error), type="Refused", non_retryable=True) from None
        if sealed.by != signer(body):
            raise ApplicationError(f"the update {name} is signed by {sealed.by}, not by {signer(body)}: refused",
                                   type="Refused", non_retryable=True)
        if sealed.nonce in self.nonces:
            raise ApplicationError(f"the update {name} was taken before: a seal is good once", type="Refused",
                                   non_retryable=True)
        return body

    def _once(self, raw: Any, body_type: Any) -> Any:
        """An update's handler, first: its nonce is used (its validator checked the rest)."""
        sealed = msgspec.convert(raw, Sealed)
        if sealed.nonce in self.nonces:  # the same update delivered twice at once
            raise ApplicationError("this update was taken before: a seal is good once", type="Refused")
        self.nonces.add(sealed.nonce)
        return msgspec.convert(sealed.body, body_type)

    @workflow.update(name=TOOL_UPDATE)
    async def tool(self, raw: dict[str, Any]) -> dict[str, Any]:
        request = self._once(raw, ToolRequest)
        await workflow.wait_condition(lambda: self.state is not None)
        assert self.state is not None
        reply = await answer_tool(self.state, request)
        return msgspec.to_builtins(reply)  # type: ignore[no-any-return]

    @tool.validator
    def _check_tool(self, raw: dict[str, Any]) -> None:
        request = self._check(TOOL_UPDATE, raw, ToolRequest, lambda body: f"worker:{body.agent}")
        if self.state is None or self.state.running.get(request.agent) != request.activity:
            raise ApplicationError(f"no turn of agent {request.agent} is running as {request.activity!r}: refused",
                                   type="Refused", non_retryable=True)

    @workflow.update(name=MAIL_UPDATE)
    async def mail(self, raw: dict[str, Any]) -> dict[str, Any]:
        request = self._once(raw, MailRequest)
        await workflow.wait_condition(lambda: self.state is not None)
        assert self.state is not None
        reply = await answer_mail(self.state, request)
        return msgspec.to_builtins(reply)  # type: ignore[no-any-return]

    @mail.validator
    def _check_mail(self, raw: dict[str, Any]) -> None:
        self._check(MAIL_UPDATE, raw, MailRequest, lambda body: f"worker:{body.agent}")

    @workflow.update(name=OPERATOR_UPDATE)
    async def operator(self, raw: dict[str, Any]) -> dict[str, Any]:
        """`awf inbox` and `awf send`/`awf reply --as KEY`: a person, as a participant; `awf stop`: a person."""
        request = self._once(raw, PostAs | ReadInbox | Stop)
        await workflow.wait_condition(lambda: self.state is not None)
        assert self.state is not None
        if isinstance(request, Stop):
            return msgspec.to_builtins(self._stop(request))  # type: ignore[no-any-return]
        return msgspec.to_builtins(await answer_person(self.state.board, request))  # type: ignore[no-any-return]

    @operator.validator
    def _check_operator(self, raw: dict[str, Any]) -> None:
        self._check(OPERATOR_UPDATE, raw, PostAs | ReadInbox | Stop,
                    lambda body: f"person:{body.by if isinstance(body, Stop) else body.key}")

    def _stop(self, request: Stop) -> OperatorResponse:
        """As the local operator socket's stop: the workflow function is cancelled, its turns' activities
        with it, and the run ends `stopped` with the person's name and reason."""
        assert self.wf is not None and self.state is not None
        if self.state.stopped is not None or self.main is None or self.main.done():
            return OperatorResponse(True, "the run is already stopping")
        reason = f"stopped by {request.by}" + (f": {request.reason}" if request.reason else "")
        self.state.stopped = reason
        self.main.cancel()
        self.wf.log("run stopped by a person", reason=reason)
        return OperatorResponse(True, f"stopping the run ({reason}); its agents are being stopped")

    @workflow.update(name=DECIDE_UPDATE)
    async def decide(self, raw: dict[str, Any]) -> bool:
        request = self._once(raw, DecideRequest)
        return self.state is not None and self.state.decide(request)

    @decide.validator
    def _check_decide(self, raw: dict[str, Any]) -> None:
        self._check(DECIDE_UPDATE, raw, DecideRequest, lambda body: f"person:{body.by}")

    @workflow.query(name=PENDING_QUERY)
    def pending(self) -> list[dict[str, Any]]:
        return [] if self.state is None else msgspec.to_builtins(list(self.state.pending.values()))  # type: ignore[no-any-return]

    @workflow.query(name=LOG_QUERY)
    def log(self) -> list[dict[str, Any]]:
        return [] if self.state is None else self.state.lines.log

    @workflow.query(name=LINES_QUERY)
    def lines(self, offsets: dict[str, int]) -> dict[str, list[Any]]:
        """The record's lines (turns, tools, messages, log) past `offsets`, as the run's files will hold them,
        and the turns given (`calls`: each as a local run's call.json has it, with when it was sent)."""
        if self.state is None:
            return {}
        kept = self.state.lines
        found = {"calls": self.state.started, "turns": kept.turns, "tools": kept.tools, "messages": kept.messages,
                 "log": kept.log}
        return {name: lines[max(0, int(offsets.get(name, 0))):] for name, lines in found.items()}


async def run_definition(host: AgentswfWorkflow, definition: WorkflowDefinition, request: RunRequest) -> RunEnding:
    """Run the workflow function to its end; how it ended, whatever it raised (but a cancellation)."""
    home = getattr(getattr(inspect.unwrap(definition.fn), "__code__", None), "co_filename", "")
    try:
        args = decode_args(definition, request.args)
    except DefinitionError as error:
        return RunEnding(outcome="failed", reason=f"DefinitionError: {error}")
    now = workflow.now().timestamp()
    state = host.state = TemporalRun(
        workflow=definition.name, run_id=request.run_id, cwd=Path(request.cwd), turn_queue=request.turn_queue,
        run_deadline=now + request.timeout,
    )
    state.board.register(WORKFLOW_KEY, "participant", can_await=False)
    wf = host.wf = Workflow.over(
        TemporalPort(definition.name, state), name=definition.name, run_id=request.run_id, cwd=Path(request.cwd),
        run_dir=Path(request.run_dir), agents=state.agents, approvals=Approvals(TemporalDesk(state)),
    )  # the run's record directory is on the run's host, written when the run ends
    state.log = wf.log
    if request.budget is not None:
        state.budgets.run.budget = msgspec.convert(request.budget, Budget)
    main = host.main = asyncio.ensure_future(definition.fn(wf, args) if definition.takes_args else definition.fn(wf))
    limit = asyncio.timeout(request.timeout)  # a durable timer
    try:
        async with limit:
            value = await main
    except StopRequested as stop:
        return RunEnding(outcome="stopped", reason=stop.reason)
    except asyncio.CancelledError:  # a person's `awf stop`, or the workflow was cancelled (awf run's Ctrl-C)
        if state.stopped is not None:
            return RunEnding(outcome="stopped", reason=state.stopped)
        return RunEnding(outcome="cancelled", reason="the run was cancelled")
    except workflow.NondeterminismError:
        raise
    except Exception as error:
        if isinstance(error, TimeoutError) and limit.expired():
            return RunEnding(outcome="timed-out", reason=f"the run's timeout of {request.timeout:g}s passed")
        failed = _failure(error, home)
        return RunEnding(outcome="failed", reason=failed.reason, where=failed.where, traceback=failed.traceback)
    except BaseExceptionGroup as group:
        if (stopped := stop_among(group)) is None:  # wf.stop inside the workflow's own task group
            raise
        return RunEnding(outcome="stopped", reason=stopped.reason)
    finally:
        state.board.close_all()
        await state.agents.close_all()
        state.ended_run()
    if wf.stop_reason is not None:
        return RunEnding(outcome="failed", reason=f"stop was caught: {wf.stop_reason}")
    try:
        msgspec.json.encode(value)
    except (TypeError, msgspec.EncodeError) as error:
        return RunEnding(outcome="failed", reason=f"the workflow's return value is not JSON: {error}")
    return RunEnding(outcome="completed", value=value)

