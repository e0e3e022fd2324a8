"""The event loop's clock, as people read time."""

from __future__ import annotations

import math
import time

import anyio


def wall_ms(loop_time: float) -> int | None:
    """A time on the event loop's clock as Unix milliseconds (None for no time at all)."""
    if math.isinf(loop_time):
        return None
    return int((time.time() + loop_time - anyio.current_time()) * 1000)
