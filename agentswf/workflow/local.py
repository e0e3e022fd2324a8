"""The local engine's side of the engine port (port.py): the run's actors, asked on anyio."""

from __future__ import annotations

import math
import threading
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.from_thread

from ..actors import ActorRef, backend
from ..engine.agent.messages import CancelTurn, SetTools, StartOp, StartTurn
from ..engine.clock import wall
from ..engine.ids import new_id
from ..engine.mail.switchboard import (
    CloseRouteRequest,
    Inbox,
    Mail,
    OpenRouteRequest,
    PeersOf,
    Post,
    Posted,
    Receive,
    Register,
)
from ..engine.outcomes import Turn
from ..engine.record.lines import ApprovalDecision, ApprovalRequest, Logged
from ..engine.record.recorder import LogLines
from ..engine.rules import Refusal
from ..engine.tools.approvals import Decide, ListPending
from ..errors import ActorStopped, AgentClosed, DefinitionError, StopRequested, leaf_errors
from ..harnesses.base import Harness
from ..progress import progress
from ..wire.prompts import nudge_prompt, peers_block, turn_prompt
from ..wire.teaching import Taught
from .durable import Durable
from .durations import Duration, to_seconds
from .port import plain
from .sandboxes import Sandboxes
from .worktrees import RunWorktrees

if TYPE_CHECKING:
    from ..engine.run import OpenedAgent
    from .agents import Agent
    from .tools import Tool

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
        plained = plain(fields)
        if threading.get_ident() == self._loop_thread:
            self._put_log(message, plained)
        else:  # from a sync handler's worker thread: the lines (and the clock) belong to the run's loop
            anyio.from_thread.run_sync(self._put_log, message, plained)

    def _put_log(self, message: str, fields: dict[str, Any]) -> None:
        self._log_lines.put(Logged(wall(), message, fields))  # never waits, never overflows

    async def parallel(self, work: list[Callable[[], Awaitable[T]]], concurrency: int | None) -> list[T]:
        results: list[Any] = [None] * len(work)
        # a limiter only where it limits: one with a token for every item costs each a schedule point for nothing
        limiter = anyio.CapacityLimiter(concurrency) if concurrency is not None and concurrency < len(work) else None
        first: list[BaseException] = []

        async def run(index: int, call: Callable[[], Awaitable[T]]) -> None:
            try:
                results[index] = await call()
            except (Exception, StopRequested) as error:
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
            errors = [leaf for leaf in leaf_errors(group) if isinstance(leaf, (Exception, StopRequested))]
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
            errors = [leaf for leaf in leaf_errors(group_error) if isinstance(leaf, (Exception, StopRequested))]
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


class _InOrder:
    """`LocalDriver._in_order`'s block: it waits for the one asked before (no schedule point when that
    one is queued already), and says its own is queued as it ends."""

    __slots__ = ("before", "mine")

    def __init__(self, before: anyio.Event, mine: anyio.Event) -> None:
        self.before, self.mine = before, mine

    async def __aenter__(self) -> None:
        if not self.before.is_set():
            try:
                await self.before.wait()
            except BaseException:
                self.mine.set()
                raise

    async def __aexit__(self, *exc: object) -> None:
        self.mine.set()  # the caller sends at once, before anything else runs


class LocalDriver:
    """An agent's driver on the local engine (port.AgentDriver): its actor, asked for each turn and
    operation in the order they were asked for; a turn the workflow gives up on is cancelled there."""

    def __init__(
        self, opened: OpenedAgent, harness: Harness, board: ActorRef, cancelled_because: Callable[[str], str]
    ) -> None:
        self.ref = opened.ref
        self.harness = harness
        self._standing = opened.standing
        self._board = board
        self._cancelled_because = cancelled_because  # the run's: who gave up on a turn, and why
        self._last_queued = anyio.Event()  # set once the latest turn or operation asked for is in the agent's queue
        self._last_queued.set()

    def clock(self) -> float:
        return anyio.current_time()

    def wall(self) -> float:
        return wall()

    def new_id(self) -> str:
        return new_id()

    def deadline(self, timeout: Duration | None, deadline: object) -> float:
        """The loop's clock: the caller's cancel scope bounds it too."""
        now = anyio.current_time()
        limit = anyio.current_effective_deadline()
        if timeout is not None:
            limit = min(limit, now + to_seconds(timeout, what="timeout"))
        if deadline is not None:
            unix = deadline.timestamp() if isinstance(deadline, datetime) else float(deadline)  # type: ignore[arg-type]
            if not math.isfinite(unix):
                raise DefinitionError(f"deadline must be a datetime or Unix seconds, not {deadline!r}")
            limit = min(limit, now + (unix - wall()))
        return limit

    def check_schema(self, key: str, taught: Taught) -> None:
        pass  # the agent's actor checks the answer against the Taught itself

    async def turn(self, agent: Agent, n: int, prompt: str, taught: Taught, deadline: float, nudge: bool) -> Turn[Any]:
        """The turn, once it settled; `agent.model` and `.effort` then as it ran with them, unless a `set`
        came back meanwhile (they differ from `set`'s only in a fork, which switches at the fork's turn)."""
        asked_with = (agent.model, agent.effort)
        async with self._in_order():
            start = await self._start_turn(agent, new_id(), n, prompt, taught, deadline, nudge)
        try:
            turn: Turn[Any] = await self.ref.ask(start)
        except anyio.get_cancelled_exc_class():
            # Cancelled from outside: at the deadline the turn timed out; otherwise the
            # workflow (a parallel branch, a stage, the run) gave up on it.
            await self._cancel(start.call_id, "turn", deadline)
            raise
        except ActorStopped:
            raise AgentClosed(f"agent {agent.key} was closed while its turn {start.n} ran") from None
        if (agent.model, agent.effort) == asked_with:
            agent.model, agent.effort = turn.model, turn.effort
        return turn

    def ended(self, turn: Turn[Any], n: int) -> None:
        pass  # the agent's actor recorded it as it settled

    async def _start_turn(
        self, agent: Agent, call_id: str, n: int, prompt: str, taught: Taught, turn_deadline: float, nudge: bool
    ) -> StartTurn:
        # no route of the agent's was ever open: no peers to ask the switchboard for (`StandingSlot.routed`)
        rows = (await self._board.ask(PeersOf(agent.key)))["peers"] if self._standing.routed else []
        launcher = agent.launcher
        assert launcher is not None  # every local agent has one
        peers = peers_block(launcher, rows, can_await=self.harness.can_await)
        return StartTurn(
            call_id=call_id,
            n=n,
            prompt=turn_prompt(
                prompt,
                launcher=launcher,
                call_id=call_id,
                taught=taught,
                instructions=agent.spec.instructions if n == 1 else None,
                tools=agent.tools,
                peers=peers,
            ),
            nudge_prompt=nudge_prompt(
                launcher=launcher,
                call_id=call_id,
                taught=taught,
                tools=agent.tools,
                peers=peers,
                waiting=self.harness.supports_waiting,
            ),
            taught=taught,
            deadline=turn_deadline,
            nudge=nudge,
        )

    def _in_order(self) -> _InOrder:
        """Turns and operations reach the agent's queue in the order they were asked for, though
        a turn asks for its peers first: each waits until the one asked before it is queued."""
        before, self._last_queued = self._last_queued, anyio.Event()
        return _InOrder(before, self._last_queued)

    async def _cancel(self, call_id: str, what: str, deadline: float) -> None:
        timed_out = anyio.current_time() >= deadline
        reason = "the deadline passed" if timed_out else self._cancelled_because(what)
        with anyio.CancelScope(shield=True):
            try:
                await self.ref.ask(CancelTurn(call_id=call_id, reason=reason, timed_out=timed_out))
            except ActorStopped:
                pass

    async def operate(self, agent: Agent, op: StartOp) -> Turn[Any]:
        """Queue the operation with the agent's turns and wait for its record, as a turn is waited for."""
        async with self._in_order():
            pass
        try:
            record: Turn[Any] = await self.ref.ask(op)
        except anyio.get_cancelled_exc_class():
            await self._cancel(op.call_id, op.kind, op.deadline)
            raise
        except ActorStopped:
            raise AgentClosed(f"agent {agent.key} was closed while its {op.kind} {op.n} was queued or ran") from None
        return record

    async def compact(self, agent: Agent, n: int, focus: str, deadline: float, refusal: str | None) -> Turn[str]:
        op = StartOp(call_id=new_id(), n=n, kind="compaction", deadline=deadline, focus=focus, refusal=refusal)
        return await self.operate(agent, op)

    async def set(self, agent: Agent, n: int, model: str | None, effort: str | None) -> Turn[None]:
        return await self.operate(
            agent, StartOp(call_id=new_id(), n=n, kind="set", deadline=math.inf, model=model, effort=effort)
        )

    async def fork(self, agent: Agent, n: int, key: str) -> Turn[Any]:
        return await self.operate(agent, StartOp(call_id=new_id(), n=n, kind="fork", deadline=math.inf, fork=key))

    async def set_tools(self, tools: dict[str, Tool]) -> None:
        await self.ref.tell(SetTools(tools))
