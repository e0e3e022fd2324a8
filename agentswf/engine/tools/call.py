"""`ToolCall`: what a tool's handler is given about the call it is handling; `tool_record`:
the one place a tool call's record is built and its input redacted."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from ..record.lines import ToolCalled
from .policy import REDACTED, redact_value
from .rules import OutcomeCode, ToolOutcomeKind

if TYPE_CHECKING:
    from ..record.lines import ApprovalDecision

class ToolCall:
    """The call a handler is given: who called, and whether its time is up.

    When the call's time is up (or its turn ends), `cancelled` turns true and
    `wait_cancelled()` returns, and an async handler is cancelled as anyio cancels any
    task: its `finally` blocks run. A sync handler (it runs in a worker thread: check
    `cancelled` there), or one that shields itself, gets 5 s more; then it is abandoned:
    the call ends `timed-out`, recorded `abandoned`, and the agent is told it may have run.
    A worker thread can't be killed: an abandoned sync handler runs on until it returns.
    """

    def __init__(self, id: str, agent: str, tool: str) -> None:
        self.id = id
        self.agent = agent
        self.tool = tool
        self._cancelled = False
        self._event: anyio.Event | None = None  # made only for a `wait_cancelled`: most calls never wait
        self._wakers: list[Callable[[], None]] = []

    def on_cancel(self, wake: Callable[[], None]) -> None:
        """Have `cancel` call `wake` too (at once if it was cancelled already): a waiter needs no task of its own."""
        if self.cancelled:
            wake()
        else:
            self._wakers.append(wake)

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    async def wait_cancelled(self) -> None:
        if self._cancelled:
            await anyio.lowlevel.checkpoint()
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()

    def cancel(self) -> None:
        self._cancelled = True
        if self._event is not None:
            self._event.set()
        wakers, self._wakers = self._wakers, []
        for wake in wakers:
            wake()

    def __repr__(self) -> str:
        return f"<ToolCall {self.tool} {self.id} by {self.agent}>"


CURRENT_TOOL_CALL: ContextVar[ToolCall | None] = ContextVar("agentswf_tool_call", default=None)
"""The call whose handler is running in this task, if any: what a handler may not do depends on it."""


def tool_record(
    *,
    call_id: str,
    turn_call_id: str,
    agent: str,
    tool: str,
    input: Any,
    redacted: frozenset[str] | None,
    read: bool = True,
    outcome: ToolOutcomeKind,
    result: Any = None,
    error: str = "",
    code: OutcomeCode = "",
    attempts: int = 0,
    approval: ApprovalDecision | None = None,
    started_at: float,
    ended_at: float,
    raised: tuple[str, ...] = (),
) -> ToolCalled:
    """The record of one tool call, redacted as the record must be.

    A read input (plain JSON) and the result have every field in `redacted` replaced at
    any depth. An input not read (`read=False`: the args or text as the agent gave them,
    refused before its schema read it) can't be told apart field by field, so it is kept
    only when the tool has no sensitive field. `redacted=None` keeps none of the input
    (the policies that would say which fields broke).
    """
    if redacted is None or (not read and redacted):
        kept = REDACTED
    else:
        kept = redact_value(input, redacted) if read else input
    return ToolCalled(
        call_id=call_id,
        turn_call_id=turn_call_id,
        agent=agent,
        tool=tool,
        input=kept,
        outcome=outcome,
        result=redact_value(result, redacted or frozenset()),
        error=error,
        code=code,
        attempts=attempts,
        approval=approval,
        started_at=started_at,
        raised=raised,
        ended_at=ended_at,
    )
