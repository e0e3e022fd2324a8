"""Mailbox tracing: what each actor enqueued, dequeued, handled, failed and dead-lettered.

Per actor system, never per process: a ``Tracer`` given to a ``Supervisor`` traces that
supervisor's actors alone while it is open (a run traces its own actors so: two runs in one
process trace apart), and ``capture_trace`` traces the supervisors started inside its block,
in its context (a task it starts included) and nowhere else. Nothing here is process-wide:
no library call turns tracing on for code it doesn't own.

Off by default, and then free: a mailbox with no tracer reads its ``tracer`` slot once per
event and does nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

TraceSink = Callable[[str, dict[str, Any]], None]


class Tracer:
    """One actor system's trace: every event of the actors spawned by the supervisors it is
    given to goes to its sink, while it is open (``with tracer:``)."""

    __slots__ = ("sink", "open")

    def __init__(self, sink: TraceSink) -> None:
        self.sink = sink
        self.open = False

    def __enter__(self) -> Tracer:
        self.open = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.open = False


class _Both(Tracer):
    """A supervisor's own tracer and the `capture_trace` block it was started in: each hears
    the events while it is open."""

    __slots__ = ("_tracers",)

    def __init__(self, *tracers: Tracer) -> None:
        super().__init__(self._emit)
        self._tracers = tracers

    @property  # type: ignore[override]
    def open(self) -> bool:
        return any(tracer.open for tracer in self._tracers)

    @open.setter
    def open(self, value: bool) -> None:
        """Opened and closed through its parts only."""

    def _emit(self, event: str, fields: dict[str, Any]) -> None:
        for tracer in self._tracers:
            if tracer.open:
                tracer.sink(event, fields)


_captured: ContextVar[Tracer | None] = ContextVar("agentswf_capture_trace", default=None)
"""The innermost `capture_trace` block's tracer, in the contexts it was entered in."""


def tracer_for(own: Tracer | None) -> Tracer | None:
    """What a supervisor started now traces to: its own tracer, the `capture_trace` block's
    around it, both, or none."""
    captured = _captured.get()
    if captured is None or captured is own:
        return own
    return captured if own is None else _Both(own, captured)


@contextmanager
def capture_trace() -> Iterator[list[dict[str, Any]]]:
    """Collect, as dicts with an ``event`` key, the events of the supervisors started inside
    the block (in this context: a task it starts inherits it), while the block lasts.

    Like ``structlog.testing.capture_logs``, but context-local: other tasks' actor systems,
    started elsewhere, are not traced by it.
    """
    events: list[dict[str, Any]] = []
    tracer = Tracer(lambda event, fields: events.append({"event": event, **fields}))
    token = _captured.set(tracer)
    try:
        with tracer:
            yield events
    finally:
        _captured.reset(token)
