"""The ToolBroker: every tool call goes through it, and nothing enters or leaves unchecked.

In order: the input, read by the tool's schema (at most 64 KiB as given); the allowlist
and the workflow's policies (deny wins); a person's approval when required; the handler,
under the call's time (its timeout, never past the turn's deadline), retried when it is
marked safe to retry; then the result must be JSON, at most 64 KiB, and fit the tool's
`output`. Each call is recorded, its input redacted, before the agent is told how it
ended, with exactly what `wfa tool` prints and exits with; a call that can't be recorded
is `internal-error`. Every decision on the way is a pure rule of tools/rules.py; `ToolCalls`
carries them out. The agent's actor decides whether a call may start (tool-busy and the
rest) and cancels it when the turn ends; its connection then asks the `ToolBroker` actor
(`ToolCalls.call`, a `RunTool` message), whose handler runs in the asking connection's task
(`in_askers_task`: a mailbox event in the run's trace, with no hand-over to a task of the
broker's, which cost two wakeups, +13 % CPU on a tool call, issue 32), under a scope of the
broker's and shielded from the asker's cancellation: a call begun is recorded. The handler
runs under a cancel scope without a deadline, and its answer is the ask's. One watchdog task
keeps every running call's time. The broker's stop ends its calls and its watchdog, and
records what still runs.

Where a handler runs: an `async def` handler on the run's own loop (it may run another
agent); any other in a worker thread, SYNC_HANDLER_THREADS at most at once, so one that
blocks (`time.sleep`, a slow subprocess) freezes no other agent. A handler that raises
anything, `SystemExit` and `KeyboardInterrupt` included, fails its call, not the run.
When the call's time is up (or its turn ends) its signal fires and an async handler is
cancelled; one still running TOOL_SETTLE_GRACE_SECONDS later is abandoned: the call ends
`timed-out`, recorded with code `abandoned`, and the agent's actor is told (`ToolDone`: its
turn may call again); the connection that asked for an async handler that shields itself is
answered when its handler gives the call's task back. The run's end doesn't wait for a handler: a
call whose handler still runs is recorded abandoned too. A worker thread can't be
killed, so an abandoned sync handler runs on until it returns (`awf run` exits without
waiting for it). An async handler that shields itself from cancellation can't be
abandoned: it runs on the run's loop, inside the run's structured concurrency, and
nothing of the run may outlive the run, so the run's end waits for it (but `awf run`
after Ctrl-C: once its grace is over and the ending recorded, it exits without it). Put
blocking work in a sync handler.
"""

from __future__ import annotations

import heapq
import inspect
import math
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
import structlog

from ...actors import Actor, ActorRef, in_askers_task
from ...actors.wakeup import cancel_scope
from ...errors import AskTimeout
from ...progress import progress
from ...wire import Response
from ..clock import virtual, wall
from ..record.layout import read_lines
from ..record.lines import ApprovalDecision, ApprovalRequest, Logged
from ..record.recorder import Appends
from .approvals import RequestApproval, WithdrawRequest
from .call import CURRENT_TOOL_CALL, ToolCall, tool_record
from .policy import Policy, PolicyCall, Verdict, decide, redact_value
from .rules import (
    ABANDONED_AT_RUN_END,
    HandlerEnding,
    Next,
    Raised,
    Read,
    Returned,
    Stopped,
    ToolOutcome,
    abandoned,
    after_approval,
    after_attempt,
    after_policy,
    broken,
    final,
    handler_ended,
    read_input,
    settle,
)

if TYPE_CHECKING:
    from .tool import Tool

TOOL_SETTLE_GRACE_SECONDS = 5.0  # after the call's time, for a handler to stop before it is abandoned
SYNC_HANDLER_THREADS = 16  # sync handlers of one run running at once, each in a worker thread
WATCHDOG_SLACK = 64  # entries of finished calls the watchdog's heap may hold beyond twice the running ones
OWN_FRAMES = (__file__, str(Path(__file__).with_name("tool.py")))  # what calls a handler: not where it raised
_encoder = msgspec.json.Encoder()
_log = structlog.get_logger("agentswf.tools")


class RunTool(msgspec.Struct, frozen=True, kw_only=True):
    """What an agent's actor hands its connection to ask the ToolBroker to run (`ToolCalls.call`):
    the call, whose input the broker reads and checks."""

    call: ToolCall
    tool: Tool
    args: list[str]  # the request's raw args
    input: str | None  # the request's raw input
    deadline: float  # the call's deadline on the loop's clock (turn deadline, tool timeout)
    turn_call_id: str
    agent_ref: ActorRef
    launcher: str  # the agent's launcher path, for the usage line of an invalid-input hint


class ToolDone(msgspec.Struct, frozen=True):
    """Told to (or asked of) the calling agent's actor: the call ended with exactly what
    `wfa tool` prints and exits with."""

    call_id: str
    response: Response


class ReplayedCall(msgspec.Struct, frozen=True):
    agent: str
    tool: str
    input: Any
    outcome: ToolOutcome


def _key(agent: str, tool: str, value: Any) -> bytes:
    return _encoder.encode([agent, tool, value])


class Replay:
    """Recorded tool outcomes, served in order per (agent, tool, input), so no handler runs.

    Inputs are matched as recorded, that is redacted; a redacted result is served redacted.
    """

    def __init__(self, calls: Sequence[ReplayedCall]) -> None:
        self._queues: dict[bytes, list[ToolOutcome]] = {}
        for call in calls:
            self._queues.setdefault(_key(call.agent, call.tool, call.input), []).append(call.outcome)

    @classmethod
    def from_record(cls, run_dir: Path) -> Replay:
        """The tool calls recorded in `run_dir`'s tools.jsonl."""
        calls = [
            ReplayedCall(
                line["agent"],
                line["tool"],
                line.get("input"),
                ToolOutcome(line["outcome"], line.get("result"), line.get("error", ""), line.get("code", "")),
            )
            for line in read_lines(run_dir / "tools.jsonl")
        ]
        return cls(calls)

    def take(self, agent: str, tool: str, value: Any) -> ToolOutcome:
        queue = self._queues.get(_key(agent, tool, value))
        if not queue:
            return ToolOutcome(
                "failed", error=f"replay: the record has no further call of {tool} by {agent} with this input"
            )
        return queue.pop(0)


def call_over(msg: RunTool, now: float | None = None) -> bool:
    """The call was cancelled (its turn ended) or its time is up (at `now` on the loop's clock, else now)."""
    return msg.call.cancelled or (anyio.current_time() if now is None else now) >= msg.deadline


class _Handling:
    """A call through its phases: its input, what was decided, and, while its handler runs,
    how its time is kept."""

    def __init__(self, msg: RunTool, plain: Any) -> None:
        self.msg = msg
        self.plain = plain
        self.value: Any = None  # the input as its schema read it
        self.started = wall()
        self.verdict: Verdict | None = None
        self.approval: ApprovalDecision | None = None
        self.attempts = 0
        self.ended = 0.0  # when its handler's last run ended, on the loop's clock
        self.in_thread = not msg.tool.is_async
        self.scope: Any  # each run of its handler's (`cancel_scope`): no deadline, the broker's watchdog keeps the time
        self.signalled = False  # its time is up or its turn ended: the grace runs
        self.turn_ended = False
        self.abandoned = False
        self.concluded: anyio.Event | None = None  # set by the watchdog once it has answered an abandoned async handler
        self.answer: Response | None = None


class _Concluded(Exception):
    """An async handler returned after the watchdog had abandoned it and answered its call."""


class ToolCalls:
    """A run's tool calls through their phases (tools/rules.py): `call` asks the ToolBroker, whose
    handler `run`s each in its asker's task; `start_soon` (the ToolBroker's) runs the watchdog
    and the conclusion of an abandoned call."""

    def __init__(
        self, recorder: ActorRef, appends: Appends, desk: ActorRef, policies: Sequence[Policy], replay: Replay | None
    ) -> None:
        self.start_soon: Callable[..., None] = _not_started
        self._broker: ActorRef | None = None  # the ToolBroker's, once it has started
        self._opened = anyio.Event()
        self.recorder = recorder
        self.appends = appends  # a call's line, asked without a mailbox message (record/recorder.py)
        self.desk = desk
        self.policies = list(policies)
        self.replay = replay
        self.handling: dict[str, _Handling] = {}
        self.threads = anyio.CapacityLimiter(SYNC_HANDLER_THREADS)
        # The watchdog's heap: (when, order, grace over?, call id). Ids, not the calls: an entry
        # outlives its call until it comes due, and must hold nothing of it.
        self._due: list[tuple[float, int, bool, str]] = []
        self._order = 0
        self._watching = math.inf  # when the watchdog wakes next
        self._woken: anyio.Event | None = None  # None: the watchdog isn't started yet

    async def abandon_all(self) -> None:
        """The run is ending: a call whose handler still ran is recorded abandoned."""
        now = wall()
        for running in self.handling.values():
            msg, call = running.msg, running.msg.call
            plain = running.plain
            redacted: frozenset[str] | None
            try:  # redacted as when the call started: the policies decide again
                redacted = self._verdict(msg, plain).redacted
            except Exception:  # a broken policy: keep none of the input
                redacted = None
            await self.recorder.tell(
                tool_record(
                    call_id=call.id,
                    turn_call_id=msg.turn_call_id,
                    agent=call.agent,
                    tool=call.tool,
                    input=plain,
                    redacted=redacted,
                    outcome="timed-out",
                    error=ABANDONED_AT_RUN_END,
                    code="abandoned",
                    started_at=running.started,
                    ended_at=now,
                )
            )
        self.handling.clear()

    def _verdict(self, msg: RunTool, plain: Any) -> Verdict:
        call = msg.call
        return decide(
            PolicyCall(call.tool, call.agent, plain),
            self.policies,
            allowed_agents=msg.tool.allowed_agents,
            requires_approval=msg.tool.requires_approval,
            sensitive_fields=msg.tool.sensitive_fields,
        )

    def call(self, msg: RunTool) -> Awaitable[Response]:
        """Ask the ToolBroker to run the call: what `wfa tool` is answered, once recorded (to
        await). Cancel the call with `msg.call.cancel()` (its turn ended)."""
        broker = self._broker
        if broker is None:
            return self._call_once_opened(msg)
        return broker.ask_inline(msg)  # type: ignore[no-any-return]

    async def _call_once_opened(self, msg: RunTool) -> Response:
        await self._opened.wait()  # the ToolBroker hasn't started yet
        assert self._broker is not None
        return await self._broker.ask_inline(msg)  # type: ignore[no-any-return]

    def open(self, broker: ActorRef) -> None:
        """The ToolBroker has started: calls are asked of `broker`."""
        self._broker = broker
        self._opened.set()

    async def run(self, msg: RunTool) -> Response:
        """One call through its phases (read, policy, approval, run), recorded, as the
        ToolBroker's step in its asker's task: what its asker is answered."""
        call = msg.call
        started = wall()
        read = read_input(msg.tool.taught, call.tool, msg.args, msg.input, msg.launcher)
        if not isinstance(read, Read):
            return await self._refuse_input(msg, read, started)
        state = _Handling(msg, msgspec.to_builtins(read.value))
        state.value, state.started = read.value, started
        try:
            state.verdict = verdict = self._verdict(msg, state.plain)
            if verdict.allowed and verdict.logged:
                await self._log(msg, state.plain, verdict)
            step = after_policy(verdict)
            if step is Next.APPROVAL:
                state.approval = await self._approval(msg, state.plain, verdict)
                step = after_approval(state.approval, turn_ended=call.cancelled)
            if isinstance(step, ToolOutcome):
                outcome = step
            elif self.replay is not None:
                outcome = self.replay.take(call.agent, call.tool, redact_value(state.plain, verdict.redacted))
            else:
                outcome = await self._attempts(state)
        except _Concluded:  # abandoned, and answered by the watchdog: the same answer
            if state.concluded is not None:
                await state.concluded.wait()
            assert state.answer is not None
            return state.answer
        except Exception as error:  # a broken policy fails the call, never the run
            outcome = broken(error)
        return await self._finish(state, outcome)

    async def _finish(self, state: _Handling, outcome: ToolOutcome) -> Response:
        """The call recorded, then its agent told."""
        msg, call, verdict = state.msg, state.msg.call, state.verdict
        recorded = await self.appends.ask(
            tool_record(
                call_id=call.id,
                turn_call_id=msg.turn_call_id,
                agent=call.agent,
                tool=call.tool,
                input=state.plain,
                redacted=verdict.redacted if verdict is not None else msg.tool.sensitive_fields,
                outcome=outcome.kind,
                result=outcome.value,
                error=outcome.error,
                code=outcome.code,
                attempts=state.attempts,
                approval=state.approval,
                started_at=state.started,
                ended_at=wall(),
                raised=outcome.raised,
            )
        )
        return settle(outcome, recorded=bool(recorded))

    async def _refuse_input(self, msg: RunTool, refusal: ToolOutcome, now: float) -> Response:
        """An input that doesn't fit is refused, recorded first with its raw input (the handler
        never ran). A refusal that can't be recorded is answered all the same (nothing ran);
        the run ends failed for the gap."""
        call = msg.call
        await self.appends.ask(
            tool_record(
                call_id=call.id,
                turn_call_id=msg.turn_call_id,
                agent=call.agent,
                tool=call.tool,
                input=msg.args or msg.input,
                redacted=msg.tool.sensitive_fields,
                read=False,
                outcome=refusal.kind,
                error=refusal.error,
                code=refusal.code,
                started_at=now,
                ended_at=now,
            )
        )
        return settle(refusal, recorded=True)

    async def _log(self, msg: RunTool, plain: Any, verdict: Verdict) -> None:
        """A policy's `log()`: a line in the run's log (log.jsonl and the progress), input redacted."""
        call = msg.call
        fields = {
            "tool": call.tool,
            "agent": call.agent,
            "call_id": call.id,
            "input": redact_value(plain, verdict.redacted),
        }
        if verdict.log_reason:
            fields["reason"] = verdict.log_reason
        message = f"tool call: {call.tool} by {call.agent}"
        progress("agentswf.tools", message, **fields)
        await self.recorder.tell(Logged(wall(), message, fields))

    async def _approval(self, msg: RunTool, plain: Any, verdict: Verdict) -> ApprovalDecision | None:
        """A person's decision, or None when the call's time ran out or its turn ended first."""
        call = msg.call
        request = ApprovalRequest(
            call.id, call.tool, call.agent, redact_value(plain, verdict.redacted), verdict.approval_reason
        )
        got: list[ApprovalDecision | None] = []
        try:
            async with anyio.create_task_group() as group:

                async def ask() -> None:
                    try:
                        got.append(
                            await self.desk.ask(
                                RequestApproval(request), timeout=max(0.0, msg.deadline - anyio.current_time())
                            )
                        )
                    except AskTimeout:
                        pass
                    group.cancel_scope.cancel()

                async def watch() -> None:  # the turn ended: stop waiting for a decision
                    await call.wait_cancelled()
                    group.cancel_scope.cancel()

                group.start_soon(ask)
                group.start_soon(watch)
        finally:
            if not got:
                with anyio.CancelScope(shield=True):
                    await self.desk.tell(WithdrawRequest(call.id))
        return got[0] if got else None

    async def _attempts(self, state: _Handling) -> ToolOutcome:
        """Run the handler, again after a backoff while `after_attempt` says so."""
        msg = state.msg
        while True:
            state.attempts += 1
            outcome = await self._run_handler(state)
            step = after_attempt(
                outcome,
                state.attempts,
                max_attempts=msg.tool.max_attempts,
                backoff=msg.tool.backoff,
                now=state.ended,
                deadline=msg.deadline,
                over=call_over(msg, state.ended),
            )
            if isinstance(step, ToolOutcome):
                return step
            with anyio.move_on_after(step.pause):
                await msg.call.wait_cancelled()
            if call_over(msg):  # its turn ended during the pause: no more attempts
                return final(outcome)

    async def _run_handler(self, running: _Handling) -> ToolOutcome:
        """One run of the handler, in the call's task, until it returns, raises, or is
        abandoned after its grace. No task and no deadline of its own: the watchdog fires the
        call's signal at its deadline (its turn's end fires it too) and abandons it after the
        grace; an async handler that outlasts that is answered by the watchdog (`_Concluded`)."""
        msg, value, in_thread = running.msg, running.value, running.in_thread
        call = msg.call
        running.scope, running.signalled = cancel_scope(), False  # each attempt afresh
        self.handling[call.id] = running
        call.on_cancel(partial(self._signal_call, call.id))  # its id, not itself: no cycle through the call
        if not math.isinf(msg.deadline):
            self._arm(msg.deadline, call.id, grace_over=False)
        ending: HandlerEnding | None = None
        # The call's, in its task while its handler runs (a worker thread runs in a copy of this
        # context); reset after, so the task's next call starts without it.
        token = CURRENT_TOOL_CALL.set(call)
        try:
            with running.scope:
                if in_thread:
                    got = await anyio.to_thread.run_sync(
                        _invoke, msg.tool, value, call, abandon_on_cancel=True, limiter=self.threads
                    )
                else:
                    got = _invoke(msg.tool, value, call)
                if isinstance(got, Returned) and inspect.isawaitable(got.value):
                    got = await _awaited(got.value)
                ending = got
        finally:
            CURRENT_TOOL_CALL.reset(token)
        running.ended = anyio.current_time()  # read once: the attempt's ending and what follows it
        if running.abandoned:
            if not in_thread:
                raise _Concluded
            return abandoned(turn_ended=running.turn_ended, grace=TOOL_SETTLE_GRACE_SECONDS)
        del self.handling[call.id]
        if self._due and self._due[0][3] == call.id and self._woken is not None and virtual():
            self._woken.set()  # its time no longer wakes the watchdog: on a virtual clock that wake would be a jump
        return handler_ended(ending or Stopped(), now=running.ended, deadline=msg.deadline, output=msg.tool.output, own=OWN_FRAMES)

    # The watchdog: one task keeps the time of every call whose handler runs --------------

    def _arm(self, when: float, call_id: str, *, grace_over: bool) -> None:
        self._order += 1
        heapq.heappush(self._due, (when, self._order, grace_over, call_id))
        if len(self._due) > 2 * len(self.handling) + WATCHDOG_SLACK:  # the entries of calls done since
            self._due = [due for due in self._due if due[3] in self.handling]
            heapq.heapify(self._due)
        if self._woken is not None and when < self._watching:  # None: not started yet, it reads the heap as it starts
            self._woken.set()

    async def watch(self) -> None:
        """The watchdog, run by the ToolBroker for as long as it runs. Cancelled as the broker
        stops, it records the calls still running as abandoned then, before their steps are
        cancelled (one whose handler shields itself runs on in its asker's task, which the
        run's end waits for)."""
        try:
            await self._watch()
        finally:
            with cancel_scope(shield=True):
                await self.abandon_all()

    async def _watch(self) -> None:
        while True:
            now = anyio.current_time()
            while self._due and (self._due[0][0] <= now or self._due[0][3] not in self.handling):  # due, or done
                _, _, grace_over, call_id = heapq.heappop(self._due)
                running = self.handling.get(call_id)
                if running is None:  # its handler is done
                    continue
                if grace_over:
                    self._abandon(running)
                else:
                    self._signal(running)
            self._watching = self._due[0][0] if self._due else math.inf
            self._woken = woken = anyio.Event()
            with anyio.move_on_at(self._watching):
                await woken.wait()

    def _signal_call(self, call_id: str) -> None:
        running = self.handling.get(call_id)
        if running is not None:
            self._signal(running)

    def _signal(self, running: _Handling) -> None:
        """The call's time is up, or its turn ended: its signal, an async handler cancelled, the grace."""
        if running.signalled:
            return
        running.signalled = True
        running.turn_ended = anyio.current_time() < running.msg.deadline
        running.msg.call.cancel()
        if not running.in_thread:
            running.scope.cancel()
        self._arm(anyio.current_time() + TOOL_SETTLE_GRACE_SECONDS, running.msg.call.id, grace_over=True)

    def _abandon(self, running: _Handling) -> None:
        """The handler ignored its signal for the grace: the call ends without it."""
        call = running.msg.call
        running.abandoned = True
        running.scope.cancel()  # a worker thread is left to run on; a shielded task is not waited for here
        del self.handling[call.id]
        _log.warning(
            "a tool handler ignored its signal and was abandoned",
            tool=call.tool,
            agent=call.agent,
            call_id=call.id,
            runs_on="its worker thread, until it returns" if running.in_thread
            else "the run's loop: the run's end waits for it, as it shields itself from cancellation",
        )
        if not running.in_thread:  # its call's task is stuck in it: the call is recorded and its agent told from here
            running.concluded = anyio.Event()
            self.start_soon(self._conclude, running)

    async def _conclude(self, running: _Handling) -> None:
        answer = await self._finish(running, abandoned(turn_ended=running.turn_ended, grace=TOOL_SETTLE_GRACE_SECONDS))
        running.answer = answer
        assert running.concluded is not None
        running.concluded.set()
        await running.msg.agent_ref.tell(ToolDone(running.msg.call.id, answer))


class ToolBroker(Actor):
    """Runs the run's tool calls (`ToolCalls`): each a `RunTool` ask, run in its asker's task
    (the connection's) as a step of this actor's, under its scope; its watchdog runs beside
    them in this actor's cell, and records a call still running when the run ends abandoned as
    the broker stops."""

    def __init__(self, calls: ToolCalls) -> None:
        super().__init__()
        self.calls = calls
        calls.start_soon = self.start_soon

    async def on_start(self) -> None:
        self.start_soon(self.calls.watch)
        self.calls.open(self.ref)

    @in_askers_task
    async def run_tool(self, msg: RunTool) -> Response:
        """Answered, once the call is recorded, with what `wfa tool` prints and exits with."""
        return await self.calls.run(msg)


def _not_started(fn: Callable[..., Any], *args: Any) -> None:
    raise RuntimeError("the ToolBroker holding these calls isn't started")


def _invoke(tool: Tool, value: Any, call: ToolCall) -> HandlerEnding:
    """Call the handler: what it returned, or whatever it raised.

    Raised is handed back as a value, so no exception (SystemExit, KeyboardInterrupt…)
    ever leaves a handler, from a worker thread or from the loop: the call fails, not the run.
    """
    try:
        return Returned(tool.invoke(value, call))
    except BaseException as error:
        return Raised(error)


async def _awaited(returned: Any) -> HandlerEnding:
    """What awaiting an async handler gave, as `_invoke` says. A cancellation goes on as one
    only if something really cancelled this task; a handler's own `raise CancelledError()`
    is an error like any other."""
    try:
        return Returned(await returned)
    except anyio.get_cancelled_exc_class() as error:
        if anyio.current_effective_deadline() == -math.inf:  # a scope around us was cancelled
            raise
        return Raised(error)
    except BaseException as error:
        return Raised(error)
