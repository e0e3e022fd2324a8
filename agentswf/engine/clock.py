"""The event loop's clock, as people read time: this moment as an `Instant` (engine/instant.py).

Apart from `Instant` because reading the loop's clock asks the running backend (the actor
kernel's), which the pure rules that take an `Instant` never import.
"""

from __future__ import annotations

import time

from ..actors.backend import current_time
from .instant import Instant


def now() -> Instant:
    """This moment, on both clocks."""
    return Instant(current_time(), time.time())


def wall_ms(loop_time: float) -> int | None:
    """A time on the event loop's clock as Unix milliseconds (None for no time at all)."""
    return now().ms(loop_time)
