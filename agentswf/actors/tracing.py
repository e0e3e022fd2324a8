"""Mailbox tracing: what each actor enqueued, dequeued, handled, failed and dead-lettered.

Two scopes. A ``Tracer`` given to a ``Supervisor`` traces that supervisor's actors alone
(a run traces its own actors so: two runs in one process trace apart). The process-wide
switch, ``enable_tracing``, traces every actor to structlog (logger ``agentswf.actors``,
level debug) and to every sink added with ``add_trace_sink``.

Off by default, and then free: the kernel reads the module's ``enabled`` once per event
and does nothing else when it is false. It is true while the process-wide switch is on
or any ``Tracer`` is open; an event is then built and goes to its mailbox's tracer, if
it has one, and to the process-wide sinks, if the switch is on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import structlog

TraceSink = Callable[[str, dict[str, Any]], None]

enabled = False
"""Read by the kernel on every event: the process-wide switch is on, or a ``Tracer`` is open."""

_process_wide = False
_open_tracers = 0
_sinks: list[TraceSink] = []
_logger = structlog.get_logger("agentswf.actors")


class Tracer:
    """One actor system's trace: every event of the actors spawned by the supervisors it is
    given to goes to its sink, while it is open (``with tracer:``)."""

    __slots__ = ("sink", "_open")

    def __init__(self, sink: TraceSink) -> None:
        self.sink = sink
        self._open = False

    def __enter__(self) -> Tracer:
        global _open_tracers
        if not self._open:
            self._open = True
            _open_tracers += 1
            _update()
        return self

    def __exit__(self, *exc: object) -> None:
        global _open_tracers
        if self._open:
            self._open = False
            _open_tracers -= 1
            _update()


def _update() -> None:
    global enabled
    enabled = _process_wide or _open_tracers > 0


def enable_tracing(on: bool = True) -> None:
    """Switch mailbox tracing on or off for every actor of the process."""
    global _process_wide
    _process_wide = on
    _update()


def add_trace_sink(sink: TraceSink) -> Callable[[], None]:
    """Call ``sink(event, fields)`` for every event while process-wide tracing is on; returns its remover."""
    _sinks.append(sink)

    def remove() -> None:
        if sink in _sinks:
            _sinks.remove(sink)

    return remove


def emit(event: str, fields: dict[str, Any], tracer: Tracer | None) -> None:
    """Send one event to the mailbox's tracer and, when the switch is on, to structlog and the
    process-wide sinks; the kernel calls it only when ``enabled``."""
    if tracer is not None and tracer._open:
        tracer.sink(event, fields)
    if _process_wide:
        _logger.debug(event, **fields)
        for sink in tuple(_sinks):
            sink(event, fields)


@contextmanager
def capture_trace() -> Iterator[list[dict[str, Any]]]:
    """Collect the events emitted inside the block as dicts with an ``event`` key.

    Like ``structlog.testing.capture_logs``: tracing is on for the block and restored after.
    """
    events: list[dict[str, Any]] = []
    was_enabled = _process_wide
    remove = add_trace_sink(lambda event, fields: events.append({"event": event, **fields}))
    enable_tracing(True)
    try:
        yield events
    finally:
        enable_tracing(was_enabled)
        remove()
