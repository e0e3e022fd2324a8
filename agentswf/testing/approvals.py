"""Scripted approvals: a person deciding the tool calls that wait for approval, played in a test.

The approver asks the run's operator socket what waits (`awf pending`) and decides each call with
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

from ..engine.operator import Approve, Pending, Reject
from ..engine.record.layout import read_json
from ..engine.record.lines import ApprovalRequest
from ..errors import TestScriptError
from .participants import NOT_OPEN_RETRY_SECONDS, _ask

PENDING_POLL_SECONDS = 0.02  # between two looks at what waits for approval
NO_DECISION = "the test decides nothing for this call"


@dataclass(frozen=True)
class Decision:
    """What the test's person decides of a call: `approve(...)` or `reject(...)`."""

    approved: bool
    reason: str = ""
    by: str = "tester"


def approve(*, by: str = "tester", reason: str = "") -> Decision:
    """Approve the call, as `awf approve CALL --by BY --reason REASON` would."""
    return Decision(True, reason, by)


def reject(*, reason: str, by: str = "tester") -> Decision:
    """Reject the call, as `awf reject CALL --reason REASON` would."""
    return Decision(False, reason, by)


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
    while True:
        response = await _ask(run_dir, control, Pending())
        if response is None or not response.ok:  # not reachable yet
            await anyio.sleep(NOT_OPEN_RETRY_SECONDS)
            continue
        for request in msgspec.convert(response.value, list[ApprovalRequest]):
            if request.call_id in seen:
                continue
            seen.add(request.call_id)
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
            ask = Approve if decision.approved else Reject
            sent = await _ask(run_dir, control, ask(request.call_id, decision.reason, decision.by))
            if sent is not None and not sent.ok and "waiting" not in sent.message:  # gone since: decided elsewhere
                raise TestScriptError(f"the test's decision on call {request.call_id} was refused: {sent.message}")
        await anyio.sleep(PENDING_POLL_SECONDS)
