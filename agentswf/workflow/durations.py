"""Durations as a workflow writes them: `"90s"`, `"1.5m"`, `"10m"`, `"2h"`, `"1d"`, or seconds (`90`, `"90"`)."""

from __future__ import annotations

import math

from ..errors import DefinitionError
from ..wire.common import parse_duration

Duration = str | int | float


def to_seconds(value: Duration, *, what: str = "a duration") -> float:
    """Seconds in `value`; raises DefinitionError saying how to write one."""
    if isinstance(value, bool):
        seconds = None
    elif isinstance(value, (int, float)):
        seconds = float(value) if value > 0 and math.isfinite(value) else None
    elif isinstance(value, str):
        seconds = parse_duration(value.strip()) or _plain_seconds(value.strip())
    else:
        seconds = None
    if seconds is None:
        raise DefinitionError(
            f"{what} must be a positive number of seconds or a decimal and a unit, "
            f"like '90', '90s', '1.5m', '10m', '2h' or '1d'; got {value!r}"
        )
    return seconds


def _plain_seconds(text: str) -> float | None:
    """`"90"` (as `--timeout 90` gives it) as 90 seconds, as the number 90 is: a positive decimal,
    no sign, exponent or unit."""
    return parse_duration(text + "s") if text[:1].isdigit() else None
