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
- `wf.stage` and id'd turns follow the local engine's plan (workflow/durable.py) from the attempt's
  input: a continued run's finished stages and answered id'd turns are given back, not run again;
  their records go back to the run's host in the result (attempts.py).
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import msgspec
from temporalio import workflow
from temporalio.exceptions import ApplicationError

from ..engine.accounting import Ledger
from ..engine.mail.switchboard import WORKFLOW_KEY, Mail, Posted
from ..engine.operator import posted
from ..engine.operator_wire import MAX_INBOX_WAIT_SECONDS, NOT_A_PARTICIPANT, OperatorResponse, PostAs, ReadInbox, Stop
from ..engine.outcomes import Turn
from ..engine.record.lines import ApprovalDecision, ApprovalRequest, ToolCalled
from ..engine.rules import Refusal
from ..engine.tools.call import OutcomeCode, ToolCall, ToolOutcomeKind, tool_record
from ..engine.tools.policy import redact_value
from ..errors import DefinitionError, RunKeyError, StopRequested, stop_among
from ..harnesses.runtime import Runtime
from ..progress import progress
from ..sandbox.copies import forkable
from ..sandbox.spec import SandboxSpec
from ..workflow.agents import Agent, Agents, AgentSpec, Opened
from ..workflow.budgets import Budget, Budgets
from ..workflow.context import Approvals, Workflow
from ..workflow.definition import WorkflowDefinition
from ..workflow.port import plain, refused
from ..workflow.running import decode_args, failure_ending
from ..workflow.sandboxes import Sandboxes, given_spec
from ..workflow.tools import Tool
from ..workflow.worktrees import RunWorktrees
from .attempts import WorkflowDurable
from .board import WorkflowBoard
from .driver import (
    START_WINDOW_SECONDS,
    SharedSandbox,
    TemporalDriver,
    driver_of,
    rebuildable,
    sandbox_spec,
    worker_key,
    workflow_id,
    workflow_time,
)
from .keys import SealBroken, unseal
from .messages import (
    DECIDE_UPDATE,
    LINES_QUERY,
    LOG_QUERY,
    MAIL_UPDATE,
    OPERATOR_UPDATE,
    PENDING_QUERY,
    TOOL_UPDATE,
    WORKFLOW_TYPE,
    DecideRequest,
    MailReply,
    MailRequest,
    RunEnding,
    RunLines,
    RunRequest,
    Sealed,
    ToolReply,
    ToolRequest,
)

T = TypeVar("T")
R = TypeVar("R")

class TemporalRun:
    """A run's state on Temporal, changed only in workflow code: its board, record lines, approvals,
    budgets and the activities that run; and the agents port of its `wf.agents` (port.AgentsPort)."""

    def __init__(
        self, *, workflow: str, run_id: str, cwd: Path, turn_queue: str, run_deadline: float,
        durable: WorkflowDurable | None = None,
    ) -> None:
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
        self.budgets = Budgets(clock=workflow_time)  # the run's budgets and what its turns spent
        self.ledger = durable.ledger if durable is not None else Ledger()  # what the turns spent, by agent (`agent.usage`)
        self.stopped: str | None = None  # `awf stop`'s reason, once a person stopped the run
        self.started: list[dict[str, Any]] = []  # each turn given, as it is sent: its call.json for `awf tail`
        self.board = WorkflowBoard(
            now=workflow_time, new_id=workflow_id,
            on_mail=self._mail_for, on_question=self._expire_later,
        )
        self.lines.messages = self.board.lines
        self._timers: set[asyncio.Task[None]] = set()
        self._own_sandboxes: dict[str, Any] = {}  # an agent's sandbox= spec of its own, as given: its fork's opens from its cwd
        self.agents = Agents.over(self, budgets=self.budgets, ledger=self.ledger)  # `wf.agents`
        self.durable = self.agents.durable = durable  # the attempt's stages and id'd turns (attempts.py)
        if durable is not None:
            durable.carry(self.budgets)  # a continued run's: from what its earlier attempts spent
            self.lines.durable = durable.kept

    def _mail_for(self, key: str) -> None:
        agent = self.agents._open.get(key)
        if agent is not None:
            driver_of(agent).mail_came(agent)

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
        if self.durable is not None:
            self.durable.counted(record)

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
        if runtime.placement == "pane":  # a pane on whichever worker runs each turn: nobody there to attach
            refused(f"agent {key}: an agent in a pane (placement='pane')", TemporalPort.name)
        box = sandbox_spec(key, sandbox, self.cwd, self.cwd / cwd if cwd is not None else self.cwd)
        for name, given in (tools or {}).items():
            rebuildable(given.taught.schema, f"agent {key}: tool {name}'s input")
        directory = str(self.cwd / cwd) if cwd is not None else (box.cwd if box is not None else str(self.cwd))
        return AgentSpec(runtime, instructions, str(directory)), box

    def same_sandbox(self, existing: Any, given: Any, placed: Any) -> bool:
        return bool(existing == placed)

    async def open_agent(self, key: str, spec: AgentSpec, tools: dict[str, Tool], sandbox: Any, placed: Any) -> Opened:
        """Opened on no worker: each turn's opens it; in a continued run its turns resume its recorded session."""
        if sandbox is not None and not isinstance(sandbox, SharedSandbox):
            self._own_sandboxes[key] = sandbox
        session = self.durable.resumes(key, spec.runtime.harness) if self.durable is not None else None
        return self._opened(key, spec, placed, session, resumed=True)

    def _opened(
        self, key: str, spec: AgentSpec, box: SandboxSpec | None, session: str | None, *, resumed: bool = False
    ) -> Opened:
        self.board.register(key, "agent")
        driver = TemporalDriver(self)
        driver.session = session
        return Opened(driver, (spec.runtime.model, spec.runtime.effort), None, box, session if resumed else None)

    def fork_cwd(self, key: str, parent: Agent, cwd: str | Path | None) -> str:
        return str(self.cwd / cwd) if cwd is not None else parent.spec.cwd

    def check_fork(self, parent: Agent) -> None:
        harness = parent.spec.runtime.harness
        if parent.sandbox is not None and not forkable(harness):
            raise DefinitionError(
                f"agent {parent.key} can't be forked in its sandbox: where {harness} keeps a session in the "
                "sandbox's home isn't known here, so its copy can't be moved into the fork's (claude, codex and pi can)"
            )

    def fork_cwd_of(self, key: str) -> str:
        """The cwd the fork `key` was asked with (taken before its copy is made): a sandboxed fork's
        copy is placed in its home for it."""
        asked = self.agents._forks.get(key)
        return asked.cwd if asked is not None and asked.cwd is not None else ""

    async def open_fork(self, parent: Agent, key: str, spec: AgentSpec, tools: dict[str, Tool], session: str) -> Opened:
        """The fork's turns resume the copy, on whichever worker takes them; a sandboxed agent's fork is in
        its parent's sandbox as the parent was given it, as locally (sandboxes.md#forks): a sandbox of
        `wf.sandboxes` the same, a spec of the parent's own opened anew from the fork's cwd."""
        for name, given in tools.items():
            rebuildable(given.taught.schema, f"agent {key}: tool {name}'s input")
        box = parent.sandbox
        own = self._own_sandboxes.get(parent.key)
        if own is not None:
            self._own_sandboxes[key] = own
            box = sandbox_spec(key, own, self.cwd, Path(spec.cwd))
        return self._opened(key, spec, box, session)

    def stopper(self) -> Callable[[Agent, str], Awaitable[None]]:
        refused("wf.agents.stop", TemporalPort.name)

    async def close_agents(self, agents: dict[str, Agent]) -> None:
        """Later turns are refused (a worker keeps nothing of an agent between turns); its mail pump stops."""
        for key, agent in agents.items():
            self.board.stopped(key, "its agent was closed")
            pump = driver_of(agent).pump
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


class TemporalSandboxes(Sandboxes):
    """`wf.sandboxes` on Temporal: a sandbox is its spec, checked here as locally but against no file
    system (its paths are on the workers, and workflow code reads no file); each turn's worker opens it
    around the agent's CLI with bubblewrap, as it opens an agent's own spec. Agents in one share its
    spec, as they do locally (each has a home of its own there too)."""

    def __init__(self, cwd: Path, log: Callable[..., None]) -> None:
        super().__init__(cwd, log)
        self._given: dict[str, SharedSandbox] = {}

    async def open(
        self,
        key: str,
        *,
        cwd: str | Path | None = None,
        read: tuple[str | Path, ...] | list[str | Path] = (),
        write: tuple[str | Path, ...] | list[str | Path] = (),
        network: tuple[str, ...] | list[str] = (),
    ) -> Any:
        """A SharedSandbox, or the one open under `key` with the same spec; its cwd the run's unless given."""
        spec = given_spec(key, cwd, read, write, network)
        spec = msgspec.structs.replace(spec, cwd=str(self._cwd / spec.cwd) if spec.cwd is not None else str(self._cwd))
        existing = self._given.get(key)
        if existing is not None:
            if existing.spec != spec:
                raise DefinitionError(f"sandbox {key} is already open with a different spec")
            return existing
        self._given[key] = SharedSandbox(key, spec)
        self._log(f"sandbox {key} opened", sandbox=key, cwd=spec.cwd, read=", ".join(spec.read),
                  write=", ".join(spec.write), network=", ".join(spec.network))
        return self._given[key]


class TemporalPort:
    """The engine port of a run on Temporal: its WorkflowBoard, its log as workflow state, asyncio
    tasks (never anyio's, which deadlock around Temporal's operations, as measured). Temporal's history
    makes a stage durable within an attempt; its records, for a continue, are kept as a local run's
    (attempts.py). Worktrees it refuses."""

    name = "Temporal"

    def __init__(self, workflow_name: str, agents: TemporalRun) -> None:
        self.mail = TemporalMail(agents.board)
        self._durable = agents.durable
        self._workflow = workflow_name
        self._lines = agents.lines
        self._sandboxes = TemporalSandboxes(agents.cwd, lambda message, **fields: agents.log(message, **fields))

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
        if self._durable is None:
            return False, None
        return await self._durable.enter(name, result)

    async def stage_completed(self, name: str, value: Any) -> None:
        if self._durable is not None:
            await self._durable.completed(name, value)

    def stage_left(self) -> None:
        if self._durable is not None:
            self._durable.left()

    def sandboxes(self) -> Sandboxes:
        return self._sandboxes

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
            if self.state.durable is not None:  # the attempt's record, as it ended: its host writes it
                await self.state.durable.end(ending.outcome, ending.reason)
                self.state.lines.attempt = self.state.durable.returned()
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
    durable = WorkflowDurable.of(request.attempt, Path(request.run_dir)) if request.attempt is not None else None
    state = host.state = TemporalRun(
        workflow=definition.name, run_id=request.run_id, cwd=Path(request.cwd), turn_queue=request.turn_queue,
        run_deadline=now + request.timeout, durable=durable,
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
        failed = failure_ending(error, home)
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

