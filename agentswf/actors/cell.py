"""One supervised child: its task, its instances one after another, its restarts and its stop.

The mailbox belongs to the cell, not to an instance, so a restart keeps the queue.
A handler that raises while answering an ask fails that ask (the asker gets
``ActorCrashed`` with the error as its cause) and the actor goes on with its next
message, as an Orleans grain or a Ray actor does: one bad request is the asker's
error, not the death of the actor every other asker needs. A handler that raises on a
tell, a background task that raises, or ``on_start`` raising is a crash.
The cell's task runs in the supervisor's task group; a crash that is not restarted
leaves that task as the original exception, which is how it escalates.
"""

from __future__ import annotations

import enum
import time
from collections import deque
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import anyio
import structlog

from ..errors import ActorCrashed, ActorStopped
from . import backend
from .mailbox import Envelope, Mailbox
from .ref import ActorRef
from .reply import INLINE_ASK, NO_REPLY, Reply

if TYPE_CHECKING:
    from .actor import Actor

_log = structlog.get_logger("agentswf.actors")


class Restart(enum.Enum):
    """When a supervised child is started again (Erlang's child restart types)."""

    PERMANENT = "permanent"
    """After any exit: a crash, or the actor stopping itself."""
    TRANSIENT = "transient"
    """Only after a crash."""
    TEMPORARY = "temporary"
    """Never: a crash is recorded (``ref.error``) and the actor stays stopped."""


class Cell:
    """The kernel side of one child; see the module docstring."""

    def __init__(
        self,
        factory: type[Actor],
        args: tuple[Any, ...],
        mailbox: Mailbox,
        *,
        restart: Restart | None,
        max_restarts: int,
        restart_period: float,
        stop_grace: float,
    ) -> None:
        self.name = mailbox.name
        self.mailbox = mailbox
        self.error: BaseException | None = None
        self._factory = factory
        self._args = args
        self._restart = restart
        self._max_restarts = max_restarts
        self._restart_period = restart_period
        self._restarted_at: deque[float] = deque()
        self._budget_spent = False
        self._stop_grace = stop_grace
        self._scope = backend.cancel_scope()
        self._done = backend.event()
        self._task: object | None = None  # the child's task, once it runs
        self._exit = False  # leave the loop after the current message
        self._current: Envelope | None = None
        self._instance: Actor | None = None  # the instance running now
        self._looping = False  # its `on_start` is over and it handles messages
        self._deferred: set[Reply] = set()
        self._tasks: backend.Tasks | None = None
        self._lent: set[Any] = set()  # the cancel scopes of its steps running in askers' tasks
        self.ref = ActorRef(self)

    # Running -------------------------------------------------------------------------

    async def run(self) -> None:
        """The child's task: run instances until stopped, restarting as the policy says.

        A crash escalates when the child has no restart policy or has spent its restart
        budget; a child with a policy that crashes while being stopped is only recorded.
        """
        self._task = backend.current_task()
        error: BaseException | None = None
        try:
            with self._scope:
                while not self.mailbox.closed:
                    error = await self._incarnate()
                    if not self._restarts_after(error):
                        break
                    error = None
        finally:
            self.error = error
            self.mailbox.close(error)
            self._done.set()
        if error is not None and (self._restart is None or self._budget_spent):
            raise error

    def _restarts_after(self, error: BaseException | None) -> bool:
        if self.mailbox.closed:  # stopped from outside
            return False
        restart = self._restart
        if restart is Restart.PERMANENT or (restart is Restart.TRANSIENT and error is not None):
            now = anyio.current_time()
            recent = self._restarted_at
            while recent and now - recent[0] > self._restart_period:
                recent.popleft()
            if len(recent) >= self._max_restarts:
                self._budget_spent = True
                return False
            recent.append(now)
            self.mailbox.restarts += 1
            self._exit = False
            return True
        return False

    async def _incarnate(self) -> BaseException | None:
        """Run one instance to its end; return the error that crashed it, if any.

        An error from the constructor or from ``on_stop`` is not a crash of a running
        instance: it leaves the child's task and escalates whatever the restart policy.
        """
        actor = self._factory(*self._args)
        actor._cell = self
        error: BaseException | None = None
        self._instance = actor
        try:
            async with backend.task_group() as tasks:
                self._tasks = tasks
                await actor.on_start()
                await self._loop(actor)
                tasks.cancel_scope.cancel()  # end the background tasks with the instance
        except Exception as exc:
            error = _only_error(exc)
        finally:
            self._tasks = None
            self._instance = None
            self._looping = False
            for scope in self._lent:  # its steps in askers' tasks end with it, as its tasks do
                scope.cancel()
            self._settle(error)
            with backend.move_on_after(self._stop_grace, shield=True):
                await actor.on_stop()
        return error

    async def _loop(self, actor: Actor) -> None:
        get = self.mailbox.get
        mailbox = self.mailbox
        handlers = actor._handlers
        self._looping = True
        while not self._exit:
            envelope = message = reply = result = None  # nothing of the last message is kept while it waits
            envelope = await get()
            if envelope is None:
                continue
            message, reply, _ = envelope
            fn, is_async, _ = handlers[type(message)]
            self._current = envelope
            tracer = mailbox.tracer
            tracing_on = tracer is not None and tracer.open
            if tracing_on:
                started = time.perf_counter()
            try:
                result = fn(actor, message)
                if is_async:
                    result = await result
            except Exception as exc:
                self._current = None
                mailbox.failed += 1
                if tracing_on:
                    self._trace("mailbox.failed", message, started)
                if reply is None:
                    raise  # a tell's error has no one to go to: it is the actor's crash
                self._fail(reply, message, exc)
                continue
            self._current = None
            mailbox.handled += 1
            if reply is not None and reply._owner is None:
                reply.set(result)
            if tracing_on:
                self._trace("mailbox.handled", message, started)

    # Inline steps: a message handled in its asker's task (`ActorRef.ask_inline`) -------

    def trace_inline(self, event: str, message: Any, started: float | None = None) -> float:
        """Trace one event of an inline step (tracing is on); the time, to time its handling by."""
        tracer = self.mailbox.tracer
        assert tracer is not None
        fields: dict[str, Any] = {"actor": self.name, "message_type": type(message).__name__, "inline": True}
        if event == "mailbox.enqueue":
            tracer.sink(event, {**fields, "depth": 1})
            tracer.sink("mailbox.dequeue", {**fields, "depth": 0, "queued_s": 0.0})
        else:
            tracer.sink(event, {**fields, "depth": 0, "handling_s": time.perf_counter() - (started or 0.0)})
        return time.perf_counter()

    async def step_in_askers_task(self, fn: Callable[..., Any], message: Any) -> Any:
        """An `in_askers_task` handler run in this (the asker's) task: under a scope the instance's
        end cancels, shielded from the asker's own cancellation (which takes effect once the step
        is over). Answered as an ask: the handler's value; `ActorCrashed` if it raised,
        `ActorStopped` if the actor ended during it."""
        mailbox = self.mailbox
        tracer = mailbox.tracer
        traced = tracer is not None and tracer.open
        started = self.trace_inline("mailbox.enqueue", message) if traced else 0.0
        scope = backend.cancel_scope(shield=True)  # shields from the asker; cancelled by the instance's end
        self._lent.add(scope)
        try:
            with scope:
                value = await fn(self._instance, message)
        except Exception as exc:
            mailbox.failed += 1
            if traced:
                self.trace_inline("mailbox.failed", message, started)
            raise _raised(self.name, message, exc) from exc
        finally:
            self._lent.discard(scope)
        if scope.cancelled_caught:
            mailbox.dead_letter(message, "interrupted when the actor stopped")
            raise _stopped(self.name, message)
        mailbox.handled += 1
        if traced:
            self.trace_inline("mailbox.handled", message, started)
        return value

    def inline_failed(self, message: Any, reply: Reply, exc: Exception) -> Reply:
        """An inline step's handler raised: its ask fails as the loop's would; raised here if
        no reply was made for it yet, else that reply failed and returned."""
        self.mailbox.failed += 1
        if reply is INLINE_ASK:
            raise _raised(self.name, message, exc) from exc
        self._fail(reply, message, exc)
        return reply

    def _fail(self, reply: Reply, message: Any, exc: Exception) -> None:
        """A handler raised answering an ask: the ask fails with it, and the actor goes on."""
        if not reply.pending:  # answered already, or its asker gave up: nobody else will see it
            _log.warning(
                "a handler raised answering an ask already answered or given up",
                actor=self.name,
                message_type=type(message).__name__,
                exc_info=exc,
            )
        reply.fail(_raised(self.name, message, exc))

    def _settle(self, error: BaseException | None) -> None:
        """An instance ended: fail the asks it still owed, dead-letter the message it was cut off in."""
        if self._current is not None:
            message, reply, _ = self._current
            self._current = None
            self.mailbox.dead_letter(message, "interrupted when the actor stopped")
            if reply is not None:
                reply.fail(_crashed(self.name, message, error) if error else _stopped(self.name, message))
        for reply in list(self._deferred):
            reply.fail(
                _crashed(self.name, None, error)
                if error
                else ActorStopped(f"actor {self.name!r} stopped before answering")
            )
        self._deferred.clear()

    def _trace(self, event: str, message: Any, started: float) -> None:
        tracer = self.mailbox.tracer
        if tracer is not None:
            tracer.sink(event, {**self.mailbox._fields(message), "handling_s": time.perf_counter() - started})

    # Called from inside the actor ----------------------------------------------------

    def defer(self) -> Reply:
        current = self._current
        if current is None or current[1] is None:
            return NO_REPLY
        reply = current[1]
        if reply is INLINE_ASK:  # an inline step's first deferral: its reply is made now
            reply = Reply()
            self._current = (current[0], reply, 0.0)
        if reply._open and reply._owner is None:
            reply._owner = self._deferred
            self._deferred.add(reply)
        return reply

    def idle(self, actor: Actor) -> bool:
        """`actor` is the running instance, waiting for its next message with none queued."""
        return self._instance is actor and not self._exit and self._current is None and self.mailbox.parked

    def start_soon(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        if self._tasks is None:
            raise RuntimeError(f"actor {self.name!r} is not running; start background tasks from its hooks or handlers")
        self._tasks.start_soon(fn, *args)

    def request_exit(self) -> None:
        self._exit = True
        self.mailbox.wake()

    # Stopping from outside -----------------------------------------------------------

    async def stop(self) -> None:
        """Refuse and drain queued messages now, let the current one finish within the grace, then cancel."""
        if self._task is not None and backend.current_task() is self._task:
            self.mailbox.close()
            self.request_exit()
            return
        self.mailbox.close()
        self.request_exit()
        with backend.move_on_after(self._stop_grace):
            await self._done.wait()
        if not self._done.is_set():
            self._scope.cancel()
            await self._done.wait()


def _only_error(exc: BaseException) -> BaseException:
    """The single error inside nested one-error groups, else ``exc`` itself."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _raised(name: str, message: Any, cause: Exception) -> ActorCrashed:
    error = ActorCrashed(f"actor {name!r} raised handling {type(message).__name__}: {cause!r}; it goes on")
    error.__cause__ = cause
    return error


def _crashed(name: str, message: Any, cause: BaseException | None) -> ActorCrashed:
    what = f" handling {type(message).__name__}" if message is not None else " before answering"
    error = ActorCrashed(f"actor {name!r} crashed{what}: {cause!r}")
    error.__cause__ = cause
    return error


def _stopped(name: str, message: Any) -> ActorStopped:
    return ActorStopped(f"actor {name!r} stopped before answering {type(message).__name__}")
