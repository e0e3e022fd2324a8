"""`ToolCall`: what a tool's handler is given about the call it is handling."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

import anyio


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
        self._cancelled = anyio.Event()
        self._wakers: list[Callable[[], None]] = []

    def on_cancel(self, wake: Callable[[], None]) -> None:
        """Have `cancel` call `wake` too (at once if it was cancelled already): a waiter needs no task of its own."""
        if self.cancelled:
            wake()
        else:
            self._wakers.append(wake)

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    async def wait_cancelled(self) -> None:
        await self._cancelled.wait()

    def cancel(self) -> None:
        self._cancelled.set()
        wakers, self._wakers = self._wakers, []
        for wake in wakers:
            wake()

    def __repr__(self) -> str:
        return f"<ToolCall {self.tool} {self.id} by {self.agent}>"


CURRENT_TOOL_CALL: ContextVar[ToolCall | None] = ContextVar("agentswf_tool_call", default=None)
"""The call whose handler is running in this task, if any: what a handler may not do depends on it."""
