"""``Supervisor``: the task group actors live in, and the place their dead letters are kept.

Structured concurrency decides the defaults: a child's crash cancels its siblings and
reaches the code around ``async with Supervisor(...)``, unless the child opted into a
restart policy. Leaving the block normally stops the children in reverse start order.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import msgspec

from . import backend
from .actor import Actor
from .cell import Cell, Restart
from .mailbox import DeadLetter, Mailbox, Overflow
from .ref import ActorRef
from .tracing import Tracer, tracer_for

DEAD_LETTERS_KEPT = 1000
"""Most recent dead letters a supervisor keeps (messages); older ones are only counted."""

DEFAULT_STOP_GRACE_S = 5.0
DEFAULT_MAX_RESTARTS = 3
DEFAULT_RESTART_PERIOD_S = 5.0


class SupervisorStatistics(msgspec.Struct, frozen=True):
    """Children still running and dead letters recorded since the supervisor started."""

    children: int
    dead_letters: int


class Supervisor:
    """Owns a task group of actors; use as ``async with Supervisor("name") as sup``."""

    def __init__(self, name: str, stop_grace: float = DEFAULT_STOP_GRACE_S, tracer: Tracer | None = None) -> None:
        self.name = name
        self.stop_grace = stop_grace
        self.tracer = tracer_for(tracer)  # its children's mailbox events go to it (see `tracing`)
        self._children: dict[Cell, None] = {}  # in start order
        self._dead_letters: deque[DeadLetter] = deque(maxlen=DEAD_LETTERS_KEPT)
        self._dead_letter_count = 0
        self._group: Any = None  # the task group's context manager, while in `async with`
        self._tasks: backend.Tasks | None = None  # and the task group

    async def __aenter__(self) -> Supervisor:
        self._group = backend.task_group()
        self._tasks = await self._group.__aenter__()
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool | None:
        group = self._group
        assert group is not None
        if exc is None:
            try:
                await self.stop()
            except BaseException as stop_error:  # e.g. cancelled by a child crashing meanwhile
                exc_type, exc, tb = type(stop_error), stop_error, stop_error.__traceback__
        try:
            return await group.__aexit__(exc_type, exc, tb)  # type: ignore[no-any-return]
        except BaseExceptionGroup as group:
            error = _only_error(group)
            if error is None:
                raise
        finally:
            self._group = self._tasks = None
        # Re-raise the one real error as itself, outside the except block so the group
        # does not become its context.
        context = error.__context__
        try:
            raise error
        finally:
            error.__context__ = context
            del error

    def spawn(
        self,
        factory: type[Actor],
        *args: Any,
        name: str | None = None,
        capacity: int,
        overflow: Overflow = Overflow.BLOCK,
        restart: Restart | None = None,
        max_restarts: int = DEFAULT_MAX_RESTARTS,
        restart_period: float = DEFAULT_RESTART_PERIOD_S,
    ) -> ActorRef:
        """Start ``factory(*args)`` as a child and return its reference at once.

        Messages sent before the actor's task runs wait in its mailbox. ``restart=None``
        means a crash escalates; a policy restarts it up to ``max_restarts`` times in any
        ``restart_period`` seconds, after which the crash escalates.
        """
        if self._tasks is None:
            raise RuntimeError(f"supervisor {self.name!r} is not running; spawn inside `async with`")
        if not (isinstance(factory, type) and issubclass(factory, Actor)):
            raise TypeError(f"spawn takes an Actor subclass, got {factory!r}")
        mailbox = Mailbox(name or factory.__name__, capacity, overflow, self._record_dead_letter, self.tracer)
        cell = Cell(
            factory,
            args,
            mailbox,
            restart=restart,
            max_restarts=max_restarts,
            restart_period=restart_period,
            stop_grace=self.stop_grace,
        )
        self._children[cell] = None
        self._tasks.start_soon(self._run, cell, name=f"actor {mailbox.name}")
        return cell.ref

    async def _run(self, cell: Cell) -> None:
        try:
            await cell.run()
        finally:
            self._children.pop(cell, None)

    async def stop(self) -> None:
        """Stop every child in reverse start order, each with the grace."""
        for cell in reversed(list(self._children)):
            await cell.stop()

    @property
    def dead_letters(self) -> list[DeadLetter]:
        """The most recent dead letters (up to ``DEAD_LETTERS_KEPT``), oldest first."""
        return list(self._dead_letters)

    def statistics(self) -> SupervisorStatistics:
        return SupervisorStatistics(children=len(self._children), dead_letters=self._dead_letter_count)

    def _record_dead_letter(self, letter: DeadLetter) -> None:
        self._dead_letter_count += 1
        self._dead_letters.append(letter)


def _only_error(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one error in a group (through nested one-error groups), or None if there are more."""
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup):
        if len(error.exceptions) != 1:
            return None
        error = error.exceptions[0]
    return error
