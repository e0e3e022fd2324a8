"""`Instant`: the moment an event happened, as the pure rules read time (engine/clock.py reads it)."""

from __future__ import annotations

import math

import msgspec


class Instant(msgspec.Struct, frozen=True):
    """A moment read on both clocks at once: the loop's (`loop`) and Unix seconds (`wall`).

    Events carry one, so the pure rules that read time never read a clock themselves.
    """

    loop: float
    wall: float

    def wall_of(self, loop_time: float) -> float:
        """A time on the loop's clock as Unix seconds."""
        return self.wall + loop_time - self.loop

    def ms(self, loop_time: float) -> int | None:
        """A time on the loop's clock as Unix milliseconds (None for no time at all)."""
        if math.isinf(loop_time):
            return None
        return int(self.wall_of(loop_time) * 1000)
