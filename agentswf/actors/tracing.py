"""Mailbox tracing: what each actor enqueued, dequeued, handled, failed and dead-lettered.

Off by default. The kernel reads ``tracing.enabled`` once per event and does nothing
else when it is false, so tracing costs next to nothing until it is switched on. When
on, each event goes to structlog (logger ``agentswf.actors``, level debug) and to every
sink added with ``add_trace_sink``, so a recorder can observe the kernel without
configuring logging.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import structlog

TraceSink = Callable[[str, dict[str, Any]], None]

enabled = False
"""Read by the kernel on every event; change it with ``enable_tracing``."""

_sinks: list[TraceSink] = []
_logger = structlog.get_logger("agentswf.actors")


def enable_tracing(on: bool = True) -> None:
    """Switch mailbox tracing on or off for the whole process."""
    global enabled
    enabled = on


def add_trace_sink(sink: TraceSink) -> Callable[[], None]:
    """Call ``sink(event, fields)`` for every event while tracing is on; returns its remover."""
    _sinks.append(sink)

    def remove() -> None:
        if sink in _sinks:
            _sinks.remove(sink)

    return remove


def emit(event: str, fields: dict[str, Any]) -> None:
    """Send one event to structlog and the sinks; the kernel calls it only when tracing is on."""
    _logger.debug(event, **fields)
    for sink in tuple(_sinks):
        sink(event, fields)


@contextmanager
def capture_trace() -> Iterator[list[dict[str, Any]]]:
    """Collect the events emitted inside the block as dicts with an ``event`` key.

    Like ``structlog.testing.capture_logs``: tracing is on for the block and restored after.
    """
    events: list[dict[str, Any]] = []
    was_enabled = enabled
    remove = add_trace_sink(lambda event, fields: events.append({"event": event, **fields}))
    enable_tracing(True)
    try:
        yield events
    finally:
        enable_tracing(was_enabled)
        remove()
