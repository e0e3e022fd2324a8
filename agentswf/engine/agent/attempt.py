"""What `agent/ops.py` runs for a turn: one attempt or operation of the CLI, its timers, and the socket `wfa` reaches it by.

An attempt admits what runs under its keeper to the agent's socket (the run's `LiveAttempts`)
for exactly as long as it runs. The socket listens only during a turn, so an agent that
isn't in one holds no file descriptor.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

from ...actors import backend
from ...harnesses.base import Attempt, AttemptEnding, AttemptResult, Harness, Operation, OperationResult
from ...launcher.identity import LiveAttempts
from ...launcher.listener import Admit, ConnectionBudget, Handler, bind, serve
from ...launcher.place import make_agent_dir
from ..clock import virtual


async def run_attempt(
    harness: Harness,
    attempts: LiveAttempts,
    attempt: Attempt,
    report: Callable[[AttemptResult], Awaitable[None]],
    done: anyio.Event,
) -> None:
    """Run `attempt` to its end and `report` how it ended; `done` is set once nothing of it is left."""
    keepers: list[int] = []

    def started(pid: int) -> None:  # from now on the socket admits what runs under `pid`
        keepers.append(pid)
        attempts.add(pid, attempt.agent)

    def holds(pid: int) -> Callable[[], None]:  # a pane's keeper: the agent's between its attempts too
        attempts.hold(pid, attempt.agent)
        return lambda: attempts.release(pid)

    if harness.spawns:  # until `started`: a connection waits for the keeper's pid
        attempts.begin(attempt.agent)
    try:
        try:
            result = await harness.run(replace(attempt, started=started, holds=holds))
        except Exception as error:  # a harness that breaks fails the turn, not the run
            result = AttemptResult(AttemptEnding("failed", reason=f"the agent could not be run: {error}", retryable=False))
        await report(result)
    finally:
        if not keepers and harness.spawns:  # it never started
            attempts.end(attempt.agent)
        for pid in keepers:  # the harness is done: nothing under them is left
            attempts.remove(pid)
        done.set()


async def run_operation(
    harness: Harness,
    attempts: LiveAttempts,
    operation: Operation,
    report: Callable[[OperationResult], Awaitable[None]],
    done: anyio.Event,
) -> None:
    """Run a compaction or a fork's copy to its end and `report` it; `done` once nothing of it is left.

    Its keeper is registered as the agent's while it runs, so the operator socket never takes
    its processes (a CLI's hook, say) for a person; the agent's socket listens only in a turn,
    and an operation takes no `wfa`.
    """
    keepers: list[int] = []

    def started(pid: int) -> None:
        keepers.append(pid)
        attempts.add(pid, operation.agent)

    run = harness.fork if operation.kind == "fork" else harness.compact
    try:
        try:
            result = await run(replace(operation, started=started))
        except Exception as error:  # a harness that breaks fails the operation, not the run
            ending = AttemptEnding("failed", reason=f"the agent's {operation.kind} could not be run: {error}")
            result = OperationResult(ending)
        await report(result)
    finally:
        for pid in keepers:
            attempts.remove(pid)
        done.set()


class AgentSocket:
    """The agent's socket, listening only while it is in a turn (its directory made at the first)."""

    def __init__(self, socket_path: Path, launcher: Path) -> None:
        self.socket_path, self.launcher = socket_path, launcher
        self.dir_made = False
        self.accepting: Any = None  # the listener's cancel scope while it listens (backend.cancel_scope)

    def listen(
        self, handle: Handler, budget: ConnectionBudget, admit: Admit | None, start_soon: Callable[..., None]
    ) -> None:
        """Bound now, so a connection queues even before the task serving it runs; OSError if it can't be."""
        if self.accepting is not None:
            return
        if not self.dir_made:
            make_agent_dir(self.socket_path, self.launcher)
            self.dir_made = True
        sock = bind(self.socket_path)
        self.accepting = backend.cancel_scope()
        start_soon(serve, sock, handle, budget, admit, self.accepting)

    def close(self) -> None:
        """The turn is over: the socket gives its descriptor back (requests already taken are answered)."""
        if self.accepting is not None:
            self.accepting.cancel()
            self.accepting = None


Tell = Callable[[], Awaitable[None]]


class RunTimers:
    """Every turn's timers of a run, on one task (the RunActor's: `run`), so an agent's turn
    starts no task of its own for them: a timer is a heap entry, and the task sleeps until the
    first one is due. The tells due at once go off in one task for each agent that armed them,
    in the order it armed them: one agent's full mailbox holds up no other agent's timer.

    A turn that stops drops its timers by its generation (`TurnTasks.stop`); what it dropped
    leaves the heap once due, or when the dropped entries outnumber the live ones (and on a
    virtual clock once first in it as a turn stops).
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, TurnTasks, int, Tell]] = []  # (due, order, owner, its generation, tell)
        self._armed = 0  # timers armed so far: same-time ones go off in the order armed
        self._dropped = 0  # entries of stopped turns still in the heap (about)
        self._sleep: anyio.CancelScope | None = None  # the task's sleep, its deadline the first due

    def add(self, due: float, owner: TurnTasks, generation: int, tell: Tell) -> None:
        heapq.heappush(self._heap, (due, self._armed, owner, generation, tell))
        self._armed += 1
        if self._sleep is not None and due < self._sleep.deadline:
            self._sleep.deadline = due

    def dropped(self, count: int) -> None:
        """A turn stopped with `count` timers still armed: the heap is rebuilt once most of it is
        dropped. On a virtual clock the task then sleeps until the first timer still armed: its
        wake for a dropped one would be a jump of the clock, for nothing (in real time it costs a
        wake, less than moving the sleep's deadline at every turn's end)."""
        self._dropped += count
        if self._dropped > len(self._heap) // 2:
            self._heap = [entry for entry in self._heap if entry[3] == entry[2].generation]
            heapq.heapify(self._heap)
            self._dropped = 0
        if not virtual():
            return
        heap = self._heap
        while heap and heap[0][3] != heap[0][2].generation:
            heapq.heappop(heap)
            self._dropped = max(0, self._dropped - 1)
        if self._sleep is not None:
            self._sleep.deadline = heap[0][0] if heap else math.inf

    async def run(self, start_soon: Callable[..., None]) -> None:
        """Go off as timers come due, for as long as the run lives; each agent's due tells in a task of `start_soon`'s."""
        while True:
            heap = self._heap
            self._sleep = sleep = anyio.CancelScope(deadline=heap[0][0] if heap else math.inf)
            with sleep:
                await anyio.sleep_forever()
            now, due = anyio.current_time(), dict[TurnTasks, list[Tell]]()
            heap = self._heap  # rebuilt meanwhile, maybe
            while heap and heap[0][0] <= now:
                _, _, owner, generation, tell = heapq.heappop(heap)
                if generation == owner.generation:
                    due.setdefault(owner, []).append(tell)
                else:
                    self._dropped = max(0, self._dropped - 1)
            for tells in due.values():
                start_soon(_tell_each, tells)


async def _tell_each(tells: list[Tell]) -> None:
    for tell in tells:
        await tell()


RUN_TIMERS: ContextVar[RunTimers | None] = ContextVar("agentswf_run_timers", default=None)
"""The run's timers, set by `run_actors` for the actors it starts (their tasks inherit it)."""


class TurnTasks:
    """The tasks of the turn in progress (its attempt or operation) and its timers, beside the
    actor's handlers: all stopped at once when the turn stops.

    The timers are the run's (`RunTimers`, where `run_actors` started the actor), or else share
    one task of the agent's, started at its first timer and sleeping until the next one is due:
    a timer is a heap entry, not a task with a cancel scope of its own to start and to cancel
    (two a turn: the deadline, the release grace; with no tool call, about 8 % of an agent's
    instructions, and the agent's own task still 3 %). A timer's `tell` already under way when
    the turn stops still arrives, late: the turn takes a late timer for nothing (`turn._current`).
    """

    def __init__(self, start_soon: Callable[..., None]) -> None:
        self.start_soon = start_soon
        self.scopes: list[Any] = []  # backend.cancel_scope()s
        self.generation = 0  # the turn's, in the run's timers: a stopped turn's never go off
        self._run_timers = RUN_TIMERS.get()
        self._in_run = 0  # timers armed in the run's since the turn began
        self._timers: list[tuple[float, int, Tell]] = []  # without the run's, a heap: (due, order, tell)
        self._armed = 0  # timers armed so far: same-time ones go off in the order armed
        self._sleep: anyio.CancelScope | None = None  # the timers' task's sleep, its deadline the first due

    def spawn(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        """`fn(*args)` in a task of its own, cancelled by `stop` unless it has ended by then (the
        usual turn: its attempt reported and ended first, and a cancel of a scope already left
        costs asyncio's anyio a repr of the cancelling task, for nothing)."""
        scope = backend.cancel_scope()
        self.scopes.append(scope)

        async def in_scope() -> None:
            try:
                with scope:
                    await fn(*args)
            finally:
                if scope in self.scopes:
                    self.scopes.remove(scope)

        self.start_soon(in_scope)

    def at(self, due: float, tell: Tell) -> None:
        """`tell` at `due` on the loop's clock, unless the turn stops first."""
        if self._run_timers is not None:
            self._run_timers.add(due, self, self.generation, tell)
            self._in_run += 1
            return
        heapq.heappush(self._timers, (due, self._armed, tell))
        self._armed += 1
        if self._sleep is None:
            self._sleep = sleep = anyio.CancelScope(deadline=due)
            self.start_soon(self._go_off, sleep)
        elif due < self._sleep.deadline:
            self._sleep.deadline = due

    async def _go_off(self, sleep: anyio.CancelScope) -> None:
        timers = self._timers
        while True:
            with sleep:
                await anyio.sleep_forever()
            now = anyio.current_time()
            while timers and timers[0][0] <= now:
                await heapq.heappop(timers)[2]()
            sleep = self._sleep = anyio.CancelScope(deadline=timers[0][0] if timers else math.inf)

    def stop(self) -> None:
        scopes, self.scopes = self.scopes, []
        for scope in scopes:
            scope.cancel()
        self.generation += 1
        if self._run_timers is not None and self._in_run:
            self._run_timers.dropped(self._in_run)
            self._in_run = 0
        self._timers.clear()
        if self._sleep is not None:
            self._sleep.deadline = math.inf


async def fire_at(at: float, tell: Callable[[], Awaitable[None]]) -> None:
    """`tell` at `at` on the loop's clock."""
    await anyio.sleep_until(at)
    await tell()
