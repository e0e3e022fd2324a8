"""What every dialect's reply shares: the usage it reports, fresh ids, SSE framing."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Usage:
    """Token counts every reply reports, so a harness's usage accounting can be checked."""

    input_tokens: int = 100
    output_tokens: int = 20


def new_id(prefix: str) -> str:
    """A fresh id: random, because a resumed session may meet a new server's ids."""
    return f"{prefix}{uuid.uuid4().hex[:24]}"


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def named_events(events: Iterable[dict[str, Any]]) -> bytes:
    """SSE with an `event:` line naming each event by its "type" (Anthropic, Responses)."""
    return "".join(f"event: {event['type']}\ndata: {dumps(event)}\n\n" for event in events).encode()


def data_events(events: Iterable[Any]) -> bytes:
    """SSE of bare `data:` lines, strings as they are (Chat Completions' `[DONE]`)."""
    return "".join(f"data: {e if isinstance(e, str) else dumps(e)}\n\n" for e in events).encode()
