"""How a time is told to an agent: the Unix milliseconds the `wfa` reference prints, read out.

A bare `1764581460000` is a sum an agent would have to do to know how long it has; every
wait's end and deadline it is told says the UTC time and the seconds left beside it.
"""

from __future__ import annotations

from datetime import UTC, datetime


def utc_text(ms: int) -> str:
    """Unix milliseconds as an ISO 8601 UTC time to the second: `2026-12-01T14:05:00+00:00`."""
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


def told(ms: int | None, now_ms: int) -> str:
    """`1764581460000 Unix ms (2025-12-01T09:31:00+00:00, in 600 s)`; a time gone by is `now`, none `never`."""
    if ms is None:
        return "never"
    left = round((ms - now_ms) / 1000)
    return f"{ms} Unix ms ({utc_text(ms)}, {f'in {left} s' if left > 0 else 'now'})"
