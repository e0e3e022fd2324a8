"""The local engine's side of the engine port (port.py): the run's actors, asked on anyio."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import anyio
import anyio.from_thread

from ..actors import ActorRef, backend
from ..engine.approvals import Decide, ListPending
from ..engine.lines import ApprovalDecision, ApprovalRequest, Logged
from ..engine.recorder import LogLines
from ..engine.rules import Refusal
from ..engine.switchboard import (
    CloseRouteRequest,
    Inbox,
    Mail,
    OpenRouteRequest,
    Post,
    Posted,
    Receive,
    Register,
)
from ..errors import leaf_errors
from ..progress import progress
from .durable import Durable
from .port import plain
from .sandboxes import Sandboxes
from .worktrees import RunWorktrees

T = TypeVar("T")


class LocalMail:
    """The mail port over the run's Switchboard actor."""

    def __init__(self, board: ActorRef) -> None:
        self._board = board

    async def register(self, key: str) -> None:
        await self._board.ask(Register(key=key, kind="participant", can_await=False))

    async def open_route(
        self, sender: str, receiver: str, purpose: str, both_ways: bool, max_messages: int
    ) -> str | Refusal:
        return await self._board.ask(
            OpenRouteRequest(sender=sender, receiver=receiver, purpose=purpose, both_ways=both_ways, max_messages=max_messages)
        )

    async def close_route(self, route_id: str) -> None:
        await self._board.ask(CloseRouteRequest(route_id))

    async def post(self, sender: str, peer: str, text: str, *, reply: bool) -> Posted | Refusal:
        return await self._board.ask(
            Post(sender=sender, peer=peer, text=text, reply=reply, question=False, until=math.inf, in_turn=True)
        )

    async def inbox(self, key: str) -> list[Mail]:
        return await self._board.ask(Inbox(key))

    async def receive(self, key: str) -> Mail:
        return await self._board.ask(Receive(key))


class LocalDesk:
    """The approvals port over the run's approval desk actor."""

    def __init__(self, desk: ActorRef) -> None:
        self._desk = desk

    async def pending(self) -> list[ApprovalRequest]:
        return await self._desk.ask(ListPending())

    async def decide(self, call_id: str, decision: ApprovalDecision) -> bool:
        return await self._desk.ask(Decide(call_id, decision))


class LocalEngine:
    """The engine port of a local run: its Switchboard, its record's log lines, anyio's task groups
    and cancel scopes, its durable stages, sandboxes and worktrees."""

    name = "local"

    def __init__(
        self, *, workflow: str, board: ActorRef, log_lines: LogLines, worktrees: RunWorktrees,
        sandboxes: Sandboxes, durable: Durable | None,
    ) -> None:
        self.mail = LocalMail(board)
        self._workflow = workflow
        self._log_lines = log_lines
        self._worktrees = worktrees
        self._sandboxes = sandboxes
        self._durable = durable  # this attempt's stage plan and records
        self._loop_thread = threading.get_ident()  # a sync tool handler logs from a worker thread

    def log(self, message: str, fields: Mapping[str, Any]) -> None:
        progress("agentswf.workflow", message, workflow=self._workflow, **fields)
        line = Logged(time.time(), message, plain(fields))
        if threading.get_ident() == self._loop_thread:
            self._log_lines.put(line)  # never waits, never overflows
        else:  # from a sync handler's worker thread: the lines belong to the run's loop
            anyio.from_thread.run_sync(self._log_lines.put, line)

    async def parallel(self, work: list[Callable[[], Awaitable[T]]], concurrency: int | None) -> list[T]:
        results: list[Any] = [None] * len(work)
        # a limiter only where it limits: one with a token for every item costs each a schedule point for nothing
        limiter = anyio.CapacityLimiter(concurrency) if concurrency is not None and concurrency < len(work) else None
        first: list[BaseException] = []

        async def run(index: int, call: Callable[[], Awaitable[T]]) -> None:
            try:
                results[index] = await call()
            except Exception as error:
                first.append(error)
                raise

        async def one(index: int, call: Callable[[], Awaitable[T]]) -> None:
            if limiter is None:
                await run(index, call)
                return
            async with limiter:
                await run(index, call)

        try:
            async with backend.task_group() as group:
                for index, call in enumerate(work):
                    group.start_soon(one, index, call)
        except BaseExceptionGroup as group:
            errors = [leaf for leaf in leaf_errors(group) if isinstance(leaf, Exception)]
            if errors:
                raise (first[0] if first else errors[0]) from None
            raise
        return results

    async def first(self, awaitables: dict[Any, Awaitable[Any]]) -> tuple[Any, Any]:
        winner: list[tuple[Any, Any]] = []

        async def one(name: Any, awaitable: Awaitable[Any], group: anyio.abc.TaskGroup) -> None:
            value = await awaitable
            if not winner:
                winner.append((name, value))
                group.cancel_scope.cancel()

        try:
            async with anyio.create_task_group() as group:
                for name, awaitable in awaitables.items():
                    group.start_soon(one, name, awaitable, group)
        except BaseExceptionGroup as group_error:  # the first error, as itself, as wf.parallel raises it
            errors = [leaf for leaf in leaf_errors(group_error) if isinstance(leaf, Exception)]
            if errors:
                raise errors[0] from None
            raise
        return winner[0]

    async def shielded(self, work: Callable[[], Awaitable[None]]) -> None:
        with anyio.CancelScope(shield=True):
            await work()

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
        return self._worktrees
