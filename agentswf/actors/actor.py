"""The ``Actor`` base class and the ``@handler`` decorator: private state, explicit dispatch.

Each subclass gets a table from message type to handler, built once when the class is
defined, so dispatch is one dict lookup on ``type(msg)`` and a message the actor cannot
handle is refused when it is sent, not when it is dequeued.
"""

from __future__ import annotations

import inspect
import types as types_
import typing
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, ClassVar

import msgspec

from .reply import INLINE_ASK, Reply

if TYPE_CHECKING:
    from .cell import Cell
    from .ref import ActorRef

Handler = tuple[Callable[..., Any], bool, str]
"""(function taking (actor, message), whether it is async, how `ActorRef.ask_inline` may run
it: "" only as an inline step of an idle actor, `WRITE_THROUGH` or `IN_ASKERS_TASK`)."""

WRITE_THROUGH = "write-through"
IN_ASKERS_TASK = "in the asker's task"
_HANDLES = "__agentswf_handles__"
_INLINE = "__agentswf_inline__"


def handler(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """Mark a method as the handler of the message type annotated on its one parameter (of each
    type, for a union of them)."""
    params = list(inspect.signature(fn).parameters)
    if len(params) != 2:
        raise TypeError(f"handler {fn.__qualname__} must take (self, message), got {params}")
    setattr(fn, _HANDLES, params[1])
    return fn


def write_through(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """Mark a synchronous handler that `ActorRef.ask_inline` may run in the asker's task even
    while another handler of the actor awaits, nothing being queued ahead of it.

    Only for a handler that touches nothing another handler holds across an await (the
    Recorder's line writes: its whole-file handlers await only their fsyncs). The message is
    still handled one at a time and in mailbox order, and traced as any other.
    """
    if inspect.iscoroutinefunction(fn):
        raise TypeError(f"write-through handler {fn.__qualname__} must be synchronous: it runs in its asker's task")
    setattr(fn, _INLINE, WRITE_THROUGH)
    return handler(fn)


def in_askers_task(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """Mark an async handler that `ActorRef.ask_inline` runs in the asker's task, beside the
    actor's other handlers, each such step under a cancel scope of the actor's: cancelled as the
    instance ends (as its background tasks are), and shielded from its asker's cancellation, so a
    step begun is done or ended by the actor, never cut off by the asker giving up.

    For an actor whose handler would only hand each message to a task of its own (the
    ToolBroker's calls): the step is the task, without the two wakeups of the handing over
    (issue 32: +13 % CPU on a tool call). The handler answers by returning; it keeps nothing
    of the actor's that another step holds across an await. Traced and counted as any other.
    """
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"handler {fn.__qualname__} run in its asker's task must be async")
    setattr(fn, _INLINE, IN_ASKERS_TASK)
    return handler(fn)


class Actor:
    """Handles one message at a time; subclass it and mark methods with ``@handler``.

    Only the kernel calls the handlers and hooks, from the actor's own task, so the
    instance's state needs no locks. Talk to an actor through its ``ActorRef``.
    """

    _handlers: ClassVar[dict[type, Handler]] = {}
    _cell: Cell

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        by_name: dict[str, Callable[..., Any]] = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                if callable(value) and hasattr(value, _HANDLES):
                    by_name[attr] = value
                elif attr in by_name:
                    del by_name[attr]  # overridden by something that is not a handler
        table: dict[type, Handler] = {}
        for fn in by_name.values():
            for message_type in _message_types(cls, fn):
                if message_type in table:
                    raise TypeError(f"{cls.__qualname__} has two handlers for {message_type.__name__}")
                table[message_type] = (fn, inspect.iscoroutinefunction(fn), getattr(fn, _INLINE, ""))
        cls._handlers = table

    @property
    def ref(self) -> ActorRef:
        """This actor's own reference, e.g. to tell itself a message from a background task."""
        return self._cell.ref

    @property
    def name(self) -> str:
        return self._cell.name

    def start_soon(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Run ``fn(*args)`` beside the handlers; cancelled when the actor stops, and its error crashes the actor."""
        self._cell.start_soon(fn, *args)

    def defer(self) -> Reply:
        """Take over answering the ask being handled: the handler's return value is then ignored.

        Call it from the handler. While handling a tell it returns a reply whose
        ``set``/``fail`` do nothing. If the actor stops or crashes before answering,
        the asker gets ``ActorStopped`` or ``ActorCrashed``.
        """
        return self._cell.defer()

    def asked_alone(self) -> bool:
        """The message being handled is an ask whose asker still waits, and no message is queued
        behind it: an actor that batches its answers (the Recorder) answers now, as nothing
        more would join the batch."""
        current = self._cell._current
        if current is None:
            return False
        reply = current[1]
        if reply is INLINE_ASK:  # an inline step's: asked, and `ask_inline` found nothing queued
            return True
        return reply is not None and reply._open and not self._cell.mailbox._queue

    def idle(self) -> bool:
        """This instance waits for its next message, none queued, none being handled: what a
        handler would do with the next message, done now by another task *without awaiting*,
        is what the actor would have done (nothing is queued ahead of it, no handler is
        mid-way, and it can't be interrupted). A way to skip a mailbox round trip where the
        answer is decided at once; anything that awaits goes through the mailbox. Not traced
        nor counted as a message: `ActorRef.ask_inline` is the traced way to do the same
        with a message and its handler."""
        return self._cell.idle(self)

    def stop(self) -> None:
        """Stop this actor after the current message (a normal exit: ``Restart.PERMANENT`` restarts it)."""
        self._cell.request_exit()

    async def on_start(self) -> None:
        """Runs in the actor's task before its first message (and after each restart)."""

    async def on_stop(self) -> None:
        """Runs in the actor's task when it stops, crashes or is cancelled, shielded, within the grace."""


def _message_types(cls: type, fn: Callable[..., Any]) -> tuple[type, ...]:
    """The message types a handler takes: its parameter's annotation, or each type of a union."""
    param = getattr(fn, _HANDLES)
    try:
        hints = typing.get_type_hints(fn, localns=dict(vars(cls)))
    except NameError as exc:
        raise TypeError(
            f"cannot resolve the message type of {cls.__qualname__}.{fn.__name__}: {exc}; "
            "define message types at module or class level"
        ) from None
    annotated = hints.get(param)
    types = typing.get_args(annotated) if isinstance(annotated, types_.UnionType) else (annotated,)
    for message_type in types:
        if not (isinstance(message_type, type) and issubclass(message_type, msgspec.Struct)):
            raise TypeError(
                f"{cls.__qualname__}.{fn.__name__} must annotate its message parameter "
                f"with a msgspec.Struct subclass (or a union of them), got {annotated!r}"
            )
    return types
