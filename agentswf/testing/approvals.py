"""Scripted approvals: a person deciding the tool calls that wait for approval, played in a test.

The approver asks the run's operator socket what waits (`awf pending`, waiting on the run for a
call it hasn't seen: no poll, so nothing for a virtual clock to jump to) and decides each call with
the same request `awf approve` and `awf reject` send, its `by` and reason recorded as a person's,
so a passing test says a person could have decided the same way. A call the test has no decision
for is rejected, so the run goes on, and fails the test naming the call that waited.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import anyio
import msgspec

from ..engine.operator_wire import MAX_INBOX_WAIT_SECONDS, Approve, Pending, Reject
from ..engine.record.layout import read_json
from ..engine.record.lines import ApprovalRequest
from ..errors import TestScriptError
from ..workflow.durations import Duration, to_seconds
from .participants import ask

PENDING_WAIT_MS = int(MAX_INBOX_WAIT_SECONDS * 1000)  # one wait for a call to decide; the approver asks again after
NO_DECISION = "the test decides nothing for this call"


@dataclass(frozen=True)
class Decision:
    """What the test's person decides of a call: `approve(...)` or `reject(...)`."""

    approved: bool
    reason: str = ""
    by: str = "tester"
    after: float = 0.0  # seconds after the call began to wait, on the run's clock


def approve(*, by: str = "tester", reason: str = "", after: Duration | None = None) -> Decision:
    """Approve the call, as `awf approve CALL --by BY --reason REASON` would, `after` ("1h", or
    seconds) once it waits: on a virtual clock, at once."""
    return Decision(True, reason, by, _seconds(after))


def reject(*, reason: str, by: str = "tester", after: Duration | None = None) -> Decision:
    """Reject the call, as `awf reject CALL --reason REASON` would, `after` once it waits."""
    return Decision(False, reason, by, _seconds(after))


def _seconds(after: Duration | None) -> float:
    return 0.0 if after is None else to_seconds(after, what="after")


Decide = Callable[[ApprovalRequest], "Decision | Awaitable[Decision | None] | None"]
Approvals = Mapping[str, Decision] | Decide
"""By tool name, a decision; or a function of the waiting call returning one (None: no decision)."""


def _by_tool(approvals: Mapping[str, Decision]) -> Decide:
    by_tool = dict(approvals)
    return lambda request: by_tool.get(request.tool)


async def play_approvals(approvals: Approvals, run_dir: Path, errors: list[Exception]) -> None:
    """Decide every call that waits for approval, until cancelled at the run's end."""
    decide = _by_tool(approvals) if isinstance(approvals, Mapping) else approvals
    control = str(read_json(run_dir / "run.json")["control"])
    seen: set[str] = set()
    async with anyio.create_task_group() as deciding:  # each call decided in its own time
        while True:
            response = await ask(control, Pending(PENDING_WAIT_MS, tuple(seen)))
            if not response.ok:
                raise TestScriptError(f"the run refused to list the calls waiting for approval: {response.message}")
            for request in msgspec.convert(response.value, list[ApprovalRequest]):
                if request.call_id not in seen:
                    seen.add(request.call_id)
                    deciding.start_soon(_decide, decide, request, control, errors)


async def _decide(decide: Decide, request: ApprovalRequest, control: str, errors: list[Exception]) -> None:
    """Decide one call, `after` its decision's time; an error in it is run_workflow's to raise."""
    try:
        decision = decide(request)
        if inspect.isawaitable(decision):
            decision = await decision
        if decision is None:
            errors.append(TestScriptError(
                f"tool call {request.call_id} ({request.tool}, by agent {request.agent}) waited for approval, "
                "and the test's approvals decide nothing for it: it was rejected"
            ))  # fmt: skip
            decision = reject(reason=NO_DECISION)
        if not isinstance(decision, Decision):
            raise TestScriptError(f"approvals answered {decision!r} for {request.tool}: use approve(...) or reject(...)")
        await anyio.sleep(decision.after)
        ask_for = Approve if decision.approved else Reject
        sent = await ask(control, ask_for(request.call_id, decision.reason, decision.by))
        if not sent.ok and "waiting" not in sent.message:  # gone since: decided elsewhere, or its time ran out
            raise TestScriptError(f"the test's decision on call {request.call_id} was refused: {sent.message}")
    except Exception as error:
        errors.append(error)
        raise
