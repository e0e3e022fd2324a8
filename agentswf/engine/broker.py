"""The ToolBroker: every tool call goes through it, and nothing enters or leaves unchecked.

In order: the allowlist and the workflow's policies (deny wins); a person's approval
when required; the handler, under the call's time (its timeout, never past the turn's
deadline), retried when it is marked safe to retry; then the result must be JSON, at
most 64 KiB, and fit the tool's `output`. Each call is recorded, its input redacted,
before the agent is told how it ended; a call that can't be recorded is `internal-error`.
The agent's actor decides whether a call may start (tool-busy and the rest); the
broker only runs it, each call in a task of its own, and tells the agent how it ended.

Where a handler runs: an `async def` handler on the run's own loop (it may run another
agent); any other in a worker thread, SYNC_HANDLER_THREADS at most at once, so one that
blocks (`time.sleep`, a slow subprocess) freezes no other agent. A handler that raises
anything, `SystemExit` and `KeyboardInterrupt` included, fails its call, not the run.
When the call's time is up (or its turn ends) its signal fires and an async handler is
cancelled; one still running TOOL_SETTLE_GRACE_SECONDS later is abandoned: the call ends
`timed-out`, recorded with code `abandoned`. The run's end doesn't wait for a handler: a
call whose handler still runs is recorded abandoned too. A worker thread can't be
killed, so an abandoned sync handler runs on until it returns (`awf run` exits without
waiting for it). An async handler that shields itself from cancellation can't be
abandoned: it runs on the run's loop, inside the run's structured concurrency, and
nothing of the run may outlive the run, so the run's end waits for it. Put blocking work
in a sync handler.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import msgspec
import structlog

from ..actors import Actor, ActorRef, handler
from ..errors import AskTimeout
from ..progress import progress
from ..wire import Response, accepted, is_code, refused
from ..wire.prompts import usage_line
from ..wire.teaching import ReadError
from .approvals import ApprovalDecision, ApprovalRequest, RequestApproval, WithdrawRequest
from .policy import Policy, PolicyCall, Verdict, decide, redact_value
from .recorder import Logged
from .records import read_lines
from .toolcall import CURRENT_TOOL_CALL, ToolCall, tool_record

if TYPE_CHECKING:
    from ..workflow.tools import Tool

MAX_TOOL_RESULT_BYTES = 64 * 1024
MAX_TOOL_INPUT_BYTES = MAX_TOOL_RESULT_BYTES  # one call's input, as given: 64 KiB, as its result
TOOL_SETTLE_GRACE_SECONDS = 5.0  # after the call's time, for a handler to stop before it is abandoned
SYNC_HANDLER_THREADS = 16  # sync handlers of one run running at once, each in a worker thread
_encoder = msgspec.json.Encoder()
_log = structlog.get_logger("agentswf.tools")
UNRECORDED_CALL = (
    "the run couldn't record this call, so its answer isn't given. It may have run: check before calling again."
)


class ToolOutcome(msgspec.Struct, frozen=True):
    """How one call ended: `result` (with `value`), `failed`, `timed-out`, or `refused` (with `code`)."""

    kind: Literal["result", "failed", "timed-out", "refused"]
    value: Any = None
    error: str = ""
    code: str = ""


class RunTool(msgspec.Struct, frozen=True, kw_only=True):
    """Told by an agent's actor: run this call, whose input the broker reads and checks."""

    call: ToolCall
    tool: Tool
    args: list[str]  # the request's raw args
    input: str | None  # the request's raw input
    deadline: float  # the call's deadline on the loop's clock (turn deadline, tool timeout)
    turn_call_id: str
    agent_ref: ActorRef
    launcher: str  # the agent's launcher path, for the usage line of an invalid-input hint


class ToolDone(msgspec.Struct, frozen=True):
    """Told to the calling agent's actor: exactly what `wfa tool` prints and exits with."""

    call_id: str
    response: Response


class CancelTool(msgspec.Struct, frozen=True):
    """The call's turn ended: its handler's signal fires."""

    call_id: str


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


def tool_response(outcome: ToolOutcome) -> Response:
    """What `wfa tool` prints and exits with for `outcome`."""
    if outcome.kind == "result":
        value = outcome.value
        if value is None:
            text = ""
        elif isinstance(value, str):
            text = value
        else:
            text = _encoder.encode(value).decode() + "\n"
        return accepted("tool", stdout=text, value=value)
    code = outcome.code if outcome.kind == "refused" else outcome.kind
    return refused("tool", code if is_code(code) else "internal-error", outcome.error)


def _not_json(value: Any) -> str | None:
    """What in `value` isn't a JSON value (None if all of it is).

    msgspec would encode a set, a datetime, bytes or a UUID in some form, but the agent
    should read what the handler returned, not a guess at it: only None, bool, int, a
    finite float, str, list/tuple, dict with str keys, and Structs or dataclasses of
    these are JSON.
    """
    if value is None or isinstance(value, (bool, int, str)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"the number {value!r}"
    if isinstance(value, (list, tuple)):
        items: Any = value
    elif isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                return f"a dict key {key!r} ({type(key).__name__}, not str)"
        items = value.values()
    elif isinstance(value, msgspec.Struct):
        items = [getattr(value, name) for name in value.__struct_fields__]
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [getattr(value, item.name) for item in dataclasses.fields(value)]
    else:
        return f"a value of type {type(value).__name__}"
    for item in items:
        found = _not_json(item)
        if found is not None:
            return found
    return None


def check_result(value: Any, output: Any) -> ToolOutcome:
    """The handler's return value as the agent will read it, or why it can't be."""
    try:
        found = _not_json(value)
    except RecursionError:
        found = "a value nested too deeply"
    if found is not None:
        return ToolOutcome("failed", error=f"the tool returned what isn't JSON: {found}")
    if output is not None:
        try:
            value = msgspec.convert(value, output, from_attributes=True)
        except msgspec.ValidationError as error:
            return ToolOutcome("failed", error=f"the tool's result doesn't fit its output schema: {error}")
    try:
        encoded = _encoder.encode(value)
    except (TypeError, msgspec.EncodeError) as error:
        return ToolOutcome("failed", error=f"the tool returned what isn't JSON: {error}")
    if len(encoded) > MAX_TOOL_RESULT_BYTES:
        return ToolOutcome(
            "failed",
            error=f"the tool's result is {len(encoded)} bytes as JSON, over the limit of {MAX_TOOL_RESULT_BYTES}; "
            "return a summary or a path instead",
        )
    return ToolOutcome("result", value=msgspec.json.decode(encoded))


def read_input(msg: RunTool) -> tuple[Any, str | None]:
    """The call's input read by the tool's schema, or why it can't be (the invalid-input hint)."""
    size = len((msg.input or "").encode()) + sum(len(arg.encode()) for arg in msg.args)
    if size > MAX_TOOL_INPUT_BYTES:
        return None, f"the input is {size} bytes, over the limit of {MAX_TOOL_INPUT_BYTES}; pass a path instead"
    try:
        return msg.tool.taught.read(msg.args, msg.input), None
    except ReadError as error:
        usage = usage_line(f"{msg.launcher} tool {msg.call.tool}", msg.tool.taught)
        return None, f"the input doesn't fit: {error}\nThe tool did not run. Fix the input and call it again.\n{usage}"


def call_over(msg: RunTool) -> bool:
    """The call was cancelled (its turn ended) or its time is up."""
    return msg.call.cancelled or anyio.current_time() >= msg.deadline


class ToolBroker(Actor):
    def __init__(self, recorder: ActorRef, desk: ActorRef, policies: Sequence[Policy], replay: Replay | None) -> None:
        super().__init__()
        self.recorder = recorder
        self.desk = desk
        self.policies = list(policies)
        self.replay = replay
        self.running: dict[str, ToolCall] = {}
        self.handling: dict[str, tuple[RunTool, Any, float]] = {}  # calls whose handler runs: its input, since when
        self.threads = anyio.CapacityLimiter(SYNC_HANDLER_THREADS)

    @handler
    def run_tool(self, msg: RunTool) -> None:
        self.running[msg.call.id] = msg.call
        self.start_soon(self._call, msg)

    @handler
    def cancel_tool(self, msg: CancelTool) -> None:
        call = self.running.get(msg.call_id)
        if call is not None:
            call.cancel()  # its handler, if running, is stopped as when its time runs out

    async def on_stop(self) -> None:
        """The run is ending: a call whose handler still ran is recorded abandoned."""
        now = time.time()
        for msg, value, started in self.handling.values():
            call = msg.call
            plain = msgspec.to_builtins(value)
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
                    error="the run ended while the handler ran, and it was abandoned. It may have run.",
                    code="abandoned",
                    started_at=started,
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

    async def _call(self, msg: RunTool) -> None:
        call = msg.call
        started = time.time()
        value, invalid = read_input(msg)
        if invalid is not None:
            await self._refuse_input(msg, invalid, started)
            return
        plain = msgspec.to_builtins(value)
        verdict = None
        attempts = 0
        approval: ApprovalDecision | None = None
        try:
            verdict = decide(
                PolicyCall(call.tool, call.agent, plain),
                self.policies,
                allowed_agents=msg.tool.allowed_agents,
                requires_approval=msg.tool.requires_approval,
                sensitive_fields=msg.tool.sensitive_fields,
            )
            if verdict.allowed and verdict.logged:
                await self._log(msg, plain, verdict)
            if not verdict.allowed:
                outcome = ToolOutcome("refused", error=verdict.reason, code="denied")
            elif verdict.needs_approval and (approval := await self._approval(msg, plain, verdict)) is None:
                why = "its turn ended" if call.cancelled else "its time ran out"
                outcome = ToolOutcome(
                    "timed-out", error=f"no decision on the call's approval before {why}; the tool did not run"
                )
            elif approval is not None and not approval.approved:
                why = f": {approval.reason}" if approval.reason else ""
                outcome = ToolOutcome("refused", error=f"a person rejected this call{why}", code="rejected")
            elif self.replay is not None:
                outcome = self.replay.take(call.agent, call.tool, redact_value(plain, verdict.redacted))
            else:
                outcome, attempts = await self._attempts(msg, value)
        except Exception as error:  # a broken policy fails the call, never the run
            outcome = ToolOutcome("failed", error=f"the call could not be run: {type(error).__name__}: {error}")
        finally:
            self.running.pop(call.id, None)
        redacted = verdict.redacted if verdict is not None else msg.tool.sensitive_fields
        recorded = await self.recorder.ask(
            tool_record(
                call_id=call.id,
                turn_call_id=msg.turn_call_id,
                agent=call.agent,
                tool=call.tool,
                input=plain,
                redacted=redacted,
                outcome=outcome.kind,
                result=outcome.value,
                error=outcome.error,
                code=outcome.code,
                attempts=attempts,
                approval=approval,
                started_at=started,
                ended_at=time.time(),
            )
        )
        if not recorded:  # the agent is told only what is on the record
            outcome = ToolOutcome("refused", error=UNRECORDED_CALL, code="internal-error")
        await msg.agent_ref.tell(ToolDone(call.id, tool_response(outcome)))

    async def _refuse_input(self, msg: RunTool, hint: str, now: float) -> None:
        """An input that doesn't fit is refused, recorded first with its raw input (the handler
        never ran). A refusal that can't be recorded is answered all the same (nothing ran);
        the run ends failed for the gap."""
        call = msg.call
        self.running.pop(call.id, None)
        await self.recorder.ask(
            tool_record(
                call_id=call.id,
                turn_call_id=msg.turn_call_id,
                agent=call.agent,
                tool=call.tool,
                input=msg.args or msg.input,
                redacted=msg.tool.sensitive_fields,
                read=False,
                outcome="refused",
                error=hint,
                code="invalid-input",
                started_at=now,
                ended_at=now,
            )
        )
        await msg.agent_ref.tell(ToolDone(call.id, refused("tool", "invalid-input", hint)))

    async def _log(self, msg: RunTool, plain: Any, verdict: Verdict) -> None:
        """A policy's `log()`: a line in the run's log (log.jsonl and the progress), input redacted."""
        call: ToolCall = msg.call
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
        await self.recorder.tell(Logged(time.time(), message, fields))

    async def _approval(self, msg: RunTool, plain: Any, verdict: Verdict) -> ApprovalDecision | None:
        """A person's decision, or None when the call's time ran out or its turn ended first."""
        call: ToolCall = msg.call
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

    async def _attempts(self, msg: RunTool, value: Any) -> tuple[ToolOutcome, int]:
        """Run the handler, retrying a raise when the tool allows; the call's time bounds all of it."""
        attempt = 0
        while True:
            attempt += 1
            outcome = await self._run_handler(msg, value)
            if outcome.kind != "failed" or outcome.code != "raised" or attempt >= msg.tool.max_attempts:
                return (msgspec.structs.replace(outcome, code="") if outcome.code == "raised" else outcome), attempt
            pause = msg.tool.backoff * (2 ** (attempt - 1))
            if call_over(msg) or anyio.current_time() + pause >= msg.deadline:
                return msgspec.structs.replace(outcome, code=""), attempt
            with anyio.move_on_after(pause):
                await msg.call.wait_cancelled()
            if call_over(msg):  # its turn ended during the pause: no more attempts
                return msgspec.structs.replace(outcome, code=""), attempt

    async def _run_handler(self, msg: RunTool, value: Any) -> ToolOutcome:
        """One run of the handler, until it returns, raises, or is abandoned after its grace."""
        call: ToolCall = msg.call
        done = anyio.Event()
        wake = anyio.Event()  # done, or the call's signal
        box: dict[str, Any] = {}
        scope = anyio.CancelScope()
        in_thread = not msg.tool.is_async

        async def work() -> None:
            try:
                with scope:
                    CURRENT_TOOL_CALL.set(call)  # a worker thread runs in a copy of this context
                    if in_thread:
                        got = await anyio.to_thread.run_sync(
                            _invoke, msg.tool, value, call, abandon_on_cancel=True, limiter=self.threads
                        )
                    else:
                        got = _invoke(msg.tool, value, call)
                    if inspect.isawaitable(got.get("value")):
                        got = await _awaited(got["value"])
                    box.update(got)
            finally:
                done.set()
                wake.set()

        self.handling[call.id] = (msg, value, time.time())
        self.start_soon(work)
        await _until_either(wake, call, msg.deadline)
        if not done.is_set():  # its time is up, or its turn ended: the signal, then the grace
            why = "its turn ended" if anyio.current_time() < msg.deadline else "the call's time ran out"
            call.cancel()
            if not in_thread:
                scope.cancel()
            with anyio.move_on_after(TOOL_SETTLE_GRACE_SECONDS):
                await done.wait()
            if not done.is_set():
                scope.cancel()  # a worker thread is left to run on; a shielded task is not waited for here
                del self.handling[call.id]
                _log.warning(
                    "a tool handler ignored its signal and was abandoned",
                    tool=call.tool,
                    agent=call.agent,
                    call_id=call.id,
                    runs_on="its worker thread, until it returns" if in_thread
                    else "the run's loop: the run's end waits for it, as it shields itself from cancellation",
                )
                return ToolOutcome(
                    "timed-out",
                    error=f"{why}, and the handler ignored its signal for {TOOL_SETTLE_GRACE_SECONDS:g}s more, "
                    "so it was abandoned. It may have run: check before calling again.",
                    code="abandoned",
                )
        del self.handling[call.id]
        if "error" in box:
            error = box["error"]
            if not isinstance(error, Exception):
                return ToolOutcome("failed", error=f"the handler raised {error!r}", code="raised")
            return ToolOutcome("failed", error=str(error) or type(error).__name__, code="raised")
        if "value" not in box:  # cancelled by its turn ending
            return ToolOutcome("timed-out", error="the call was cancelled when its turn ended. It may have run.")
        if anyio.current_time() >= msg.deadline:
            return ToolOutcome("timed-out", error="the call finished after its time ran out. It may have run.")
        return check_result(box["value"], msg.tool.output)


def _invoke(tool: Tool, value: Any, call: ToolCall) -> dict[str, Any]:
    """Call the handler: `{"value": …}` what it returned, or `{"error": …}` whatever it raised.

    Raised is handed back as a value, so no exception (SystemExit, KeyboardInterrupt…)
    ever leaves a handler, from a worker thread or from the loop: the call fails, not the run.
    """
    try:
        return {"value": tool.invoke(value, call)}
    except BaseException as error:
        return {"error": error}


async def _awaited(returned: Any) -> dict[str, Any]:
    """What awaiting an async handler gave, as `_invoke` says. A cancellation goes on as one
    only if something really cancelled this task; a handler's own `raise CancelledError()`
    is an error like any other."""
    try:
        return {"value": await returned}
    except anyio.get_cancelled_exc_class() as error:
        if anyio.current_effective_deadline() == -math.inf:  # a scope around us was cancelled
            raise
        return {"error": error}
    except BaseException as error:
        return {"error": error}


async def _until_either(wake: anyio.Event, call: ToolCall, deadline: float) -> None:
    """Wait until `wake` is set (the handler is done), the call's signal fires (its turn
    ended) or its deadline passes: no task of its own, and a cancel scope only for a deadline."""
    call.on_cancel(wake.set)
    if math.isinf(deadline):
        await wake.wait()
        return
    with anyio.move_on_at(deadline):
        await wake.wait()
