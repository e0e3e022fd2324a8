"""Progress lines (`wf.log`, tool calls a policy logs): shown by `awf run`, quiet when embedded.

A library should not print into the program that embeds it: the lines always go to the
run's record (log.jsonl), and to structlog only once `show_progress()` is called, as
`awf run` does.
"""

from __future__ import annotations

from typing import Any

import structlog

_shown = False


def show_progress(on: bool = True) -> None:
    """Send progress lines to structlog (as configured) as well as to the run's record."""
    global _shown
    _shown = on


def progress(source: str, message: str, **fields: Any) -> None:
    if _shown:
        structlog.get_logger(source).info(message, **fields)
