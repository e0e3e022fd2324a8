"""`Workflow`, the `wf` a workflow function is given: its agents, parallel work, stop, log."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import anyio
import structlog

from ..actors import ActorRef
from ..errors import DefinitionError, MailboxFull, StopRequested
from ..engine.approvals import ApprovalDecision, ApprovalRequest, Decide, ListPending
from ..engine.recorder import Logged
from .agents import Agents

T = TypeVar("T")
R = TypeVar("R")
_log = structlog.get_logger("agentswf.workflow")


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


class Approvals:
    """Tool calls waiting for a person's decision, decided from code (`wf.approvals`)."""

    def __init__(self, desk: ActorRef) -> None:
        self._desk = desk

    async def pending(self) -> list[ApprovalRequest]:
        return await self._desk.ask(ListPending())

    async def approve(self, call_id: str, *, reason: str = "", by: str = "workflow") -> bool:
        """Let the call run; False if no call by that id is waiting."""
        return await self._desk.ask(Decide(call_id, ApprovalDecision(True, reason, by)))

    async def reject(self, call_id: str, *, reason: str, by: str = "workflow") -> bool:
        """Refuse the call; the agent is told `reason`. False if no call by that id is waiting."""
        return await self._desk.ask(Decide(call_id, ApprovalDecision(False, reason, by)))


class Workflow:
    """What a workflow works with. Created by the run; don't construct one yourself."""

    def __init__(
        self,
        *,
        name: str,
        run_id: str,
        run_dir: Path,
        cwd: Path,
        agents: Agents,
        recorder: ActorRef,
        approvals: Approvals,
    ) -> None:
        self.name = name
        self.approvals = approvals
        self.run_id = run_id
        self.run_dir = run_dir
        self.cwd = cwd
        self.agents = agents
        self._recorder = recorder
        self.stop_reason: str | None = None

    async def parallel(
        self,
        items: Iterable[T],
        fn: Callable[[T], Awaitable[R]],
        *,
        concurrency: int | None = None,
        label: str | None = None,
    ) -> list[R]:
        """`fn(item)` for every item at once (at most `concurrency` at a time), results in item order.

        Fail-fast: the first error cancels the other items (their turns end
        `cancelled`) and is raised here, as itself, not in an exception group.
        """
        work = list(items)
        if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1):
            raise DefinitionError(f"parallel's concurrency must be a whole number of at least 1, not {concurrency!r}")
        results: list[Any] = [None] * len(work)
        limiter = anyio.CapacityLimiter(concurrency or max(1, len(work)))
        first: list[BaseException] = []

        async def one(index: int, item: T) -> None:
            async with limiter:
                try:
                    results[index] = await fn(item)
                except Exception as error:
                    first.append(error)
                    raise

        try:
            async with anyio.create_task_group() as group:
                for index, item in enumerate(work):
                    group.start_soon(one, index, item)
        except BaseExceptionGroup as group:
            errors = [leaf for leaf in _leaves(group) if isinstance(leaf, Exception)]
            if errors:
                raise (first[0] if first else errors[0]) from None
            raise
        if label:
            self.log(f"{label}: {len(work)} done")
        return results

    def stop(self, reason: str) -> NoReturn:
        """End the run `stopped` with `reason` (awf run exits 3)."""
        self.stop_reason = reason
        raise StopRequested(reason)

    def log(self, message: str, **fields: Any) -> None:
        """A line in the run's record (log.jsonl) and in `awf run`'s progress."""
        _log.info(message, workflow=self.name, **fields)
        try:
            self._recorder.tell_nowait(Logged(time.time(), str(message), {k: repr(v) if not isinstance(v, (str, int, float, bool, type(None))) else v for k, v in fields.items()}))
        except MailboxFull:
            _log.warning("the run's record is behind; a log line was not recorded", message=message)
