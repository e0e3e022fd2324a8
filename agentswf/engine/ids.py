"""The ids a run gives out: turns' and operations' calls, tool calls, messages.

They key the record (a turn's `calls/<id>/`), approvals and questions across the whole run,
so two must never be the same. They are random (an agent can't guess another's), and long
enough for that: at 4 bytes a run of 10,000 turns gave two turns one id about once in 90
runs (one's answer was then refused, its record overwritten); at 8 bytes, a run of a million
ids does so about once in 37 million.
"""

from __future__ import annotations

import os

ID_BYTES = 8
"""Random bytes in an id (written as twice as many hex digits)."""


def new_id() -> str:
    """A fresh random id, as hex (os.urandom directly: the one syscall, none of secrets' layers)."""
    return os.urandom(ID_BYTES).hex()
