"""What `agent_ops.py` runs for a turn: one attempt or operation of the CLI, its timers, and the socket `wfa` reaches it by.

An attempt admits what runs under its keeper to the agent's socket (the run's `LiveAttempts`)
for exactly as long as it runs. The socket listens only during a turn, so an agent that
isn't in one holds no file descriptor.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import anyio

from ..harnesses.base import Attempt, AttemptEnding, AttemptResult, Harness, Operation, OperationResult
from ..launcher.identity import LiveAttempts
from ..launcher.listener import Admit, ConnectionBudget, Handler, bind, serve
from ..launcher.place import make_agent_dir


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

    if harness.spawns:  # until `started`: a connection waits for the keeper's pid
        attempts.begin(attempt.agent)
    try:
        try:
            result = await harness.run(replace(attempt, started=started))
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
        self.accepting: anyio.CancelScope | None = None

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
        self.accepting = anyio.CancelScope()
        start_soon(serve, sock, handle, budget, admit, self.accepting)

    def close(self) -> None:
        """The turn is over: the socket gives its descriptor back (requests already taken are answered)."""
        if self.accepting is not None:
            self.accepting.cancel()
            self.accepting = None


class TurnTasks:
    """The tasks of the turn in progress (its attempt or operation) and its timers, beside the
    actor's handlers: all stopped at once when the turn stops.

    The timers share one task of the agent's, started at its first timer and sleeping until the
    next one is due: a timer is a heap entry, not a task with a cancel scope of its own to start
    and to cancel (two a turn: the deadline, the release grace; with no tool call, about 8 % of
    an agent's instructions). A timer's `tell` already under way when the turn stops still arrives, late:
    the turn takes a late timer for nothing (`turn._current`).
    """

    def __init__(self, start_soon: Callable[..., None]) -> None:
        self.start_soon = start_soon
        self.scopes: list[anyio.CancelScope] = []
        self._timers: list[tuple[float, int, Callable[[], Awaitable[None]]]] = []  # a heap: (due, order, tell)
        self._armed = 0  # timers armed so far: same-time ones go off in the order armed
        self._sleep: anyio.CancelScope | None = None  # the timers' task's sleep, its deadline the first due

    def spawn(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        scope = anyio.CancelScope()
        self.scopes.append(scope)

        async def in_scope() -> None:
            with scope:
                await fn(*args)

        self.start_soon(in_scope)

    def at(self, due: float, tell: Callable[[], Awaitable[None]]) -> None:
        """`tell` at `due` on the loop's clock, unless the turn stops first."""
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
        self._timers.clear()
        if self._sleep is not None:
            self._sleep.deadline = math.inf


async def fire_at(at: float, tell: Callable[[], Awaitable[None]]) -> None:
    """`tell` at `at` on the loop's clock."""
    await anyio.sleep_until(at)
    await tell()
