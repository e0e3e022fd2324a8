"""`CheckIns`: a workflow's own quiet interval and response window for a pane that confirms delivery.

A claude pane is checked in on after its TUI goes idle without an answer (engine/turn.py):
a quiet interval (default 30 s), one check-in, and a response window from its confirmed
receipt (default 2 minutes). A workflow may set both, within bounds, per runtime. The
bounds of a `wfa waiting` grant (at least 30 s, default 2 minutes, never past the deadline)
are not settable: they are what the agent is taught, the same everywhere.
"""

from __future__ import annotations

import math

import msgspec

from ..errors import DefinitionError
from ..wire.common import parse_duration

MIN_QUIET_SECONDS = 1.0
MIN_RESPONSE_SECONDS = 5.0  # for the model to read the check-in and run a command
MAX_CHECK_IN_SECONDS = 3600.0  # either interval: a longer one is a deadline's job

Seconds = str | int | float  # seconds, or a decimal and a unit: "90s", "1.5m", "10m"


class CheckIns(msgspec.Struct, frozen=True, kw_only=True):
    """How a pane agent whose TUI confirms delivery (claude) is checked in on; None keeps the default.

    `quiet`: how long its TUI sits idle without an answer before the check-in (default 30 s).
    `response`: from the check-in's confirmed receipt, how long it has for `wfa result` or
    `wfa waiting` (default 2 minutes)."""

    quiet: Seconds | None = None
    response: Seconds | None = None


def _seconds(value: Seconds, what: str, least: float) -> float:
    if isinstance(value, bool):
        seconds = None
    elif isinstance(value, (int, float)):
        seconds = float(value) if math.isfinite(value) else None
    elif isinstance(value, str):
        seconds = parse_duration(value.strip())
    else:
        seconds = None
    if seconds is None or not least <= seconds <= MAX_CHECK_IN_SECONDS:
        raise DefinitionError(
            f"check_ins {what} must be from {least:g} s to {MAX_CHECK_IN_SECONDS:g} s, as seconds or a decimal "
            f"and a unit like '90s' or '2m'; got {value!r}"
        )
    return seconds


def check_in_seconds(check_ins: CheckIns | None) -> dict[str, float]:
    """The liveness numbers `check_ins` sets (by turn.Liveness's field names), validated; DefinitionError if not."""
    if check_ins is None:
        return {}
    if not isinstance(check_ins, CheckIns):
        raise DefinitionError(f"check_ins must be a CheckIns(quiet=…, response=…), not {type(check_ins).__name__}")
    chosen = {}
    if check_ins.quiet is not None:
        chosen["quiet"] = _seconds(check_ins.quiet, "quiet", MIN_QUIET_SECONDS)
    if check_ins.response is not None:
        chosen["response"] = _seconds(check_ins.response, "response", MIN_RESPONSE_SECONDS)
    return chosen
