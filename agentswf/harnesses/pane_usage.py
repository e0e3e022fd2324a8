"""What a pane's turn spent, read from the session file its TUI writes as it works.

A TUI prints nothing a pane can parse, but each CLI writes a row per model response into
the session file it keeps: claude an `assistant` row carrying `message.usage` (one row per
content block, the same message id on each), codex a `token_usage_record` with the
response's `usage`, pi a `message` row of role `assistant` with its `usage` and `cost`. A
turn's usage is the sum over the responses written since the turn began (the file's size
then), each response counted once. claude and pi name the model on the row; codex names it
on the `turn_context` row it writes as each of its turns begins (`payload.model`, its
`turn_id` on the turn's records), so a codex pane's turn is priced by the model that ran it
even when the runtime names none. The file is the agent's: it is read bounded, line by line,
and only fields of the right type count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import msgspec

from ..wire.nesting import too_deep
from .regular import read_regular
from .usage import Usage, add_usage

USAGE_READ_BYTES = 16 * 1024 * 1024  # at most this much of a session file is read for one turn
MAX_USAGE_LINE_BYTES = 1024 * 1024  # a longer line is skipped, never decoded


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _cost(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < math.inf:
        return float(value)
    return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def turn_model(row: object) -> tuple[str, str] | None:
    """A codex `turn_context` row's turn id and the model its turn runs on, if it is one."""
    if not isinstance(row, dict) or row.get("type") != "turn_context" or not isinstance(payload := row.get("payload"), dict):
        return None
    turn, model = _text(payload.get("turn_id")), _text(payload.get("model"))
    return (turn, model) if turn is not None and model is not None else None


def row_usage(row: object, turn_models: Mapping[str, str] | None = None) -> tuple[str, Usage] | None:
    """One session-file row's usage and the response it belongs to (to count it once), if it has one.

    claude's `assistant`, codex's `token_usage_record` (its model from `turn_models`, by turn id,
    as the turn's `turn_context` row said) and pi's assistant `message` rows."""
    turn_models = turn_models or {}
    if not isinstance(row, dict):
        return None
    kind = row.get("type")
    if kind == "assistant" and isinstance(message := row.get("message"), dict):  # claude
        usage, key = message.get("usage"), message.get("id") or row.get("uuid")
        if isinstance(usage, dict) and isinstance(key, str):
            return key, Usage(
                input_tokens=_count(usage.get("input_tokens")),
                output_tokens=_count(usage.get("output_tokens")),
                cache_read_tokens=_count(usage.get("cache_read_input_tokens")),
                cache_write_tokens=_count(usage.get("cache_creation_input_tokens")),
                model=_text(message.get("model")),
            )
    if kind == "token_usage_record" and isinstance(payload := row.get("payload"), dict):  # codex
        usage, key, turn = payload.get("usage"), payload.get("response_id"), payload.get("turn_id")
        if isinstance(usage, dict) and isinstance(key, str):
            return key, Usage(
                input_tokens=_count(usage.get("input_tokens")),
                output_tokens=_count(usage.get("output_tokens")),
                cache_read_tokens=_count(usage.get("cached_input_tokens")),
                cache_write_tokens=_count(usage.get("cache_write_input_tokens")),
                model=turn_models.get(turn) if isinstance(turn, str) else None,
            )
    if kind == "message" and isinstance(message := row.get("message"), dict) and message.get("role") == "assistant":
        usage, key = message.get("usage"), row.get("id")  # pi
        if isinstance(usage, dict) and isinstance(key, str):
            cost = usage.get("cost")
            return key, Usage(
                input_tokens=_count(usage.get("input")),
                output_tokens=_count(usage.get("output")),
                cache_read_tokens=_count(usage.get("cacheRead")),
                cache_write_tokens=_count(usage.get("cacheWrite")),
                cost_usd=_cost(cost.get("total")) if isinstance(cost, dict) else None,
                model=_text(message.get("model")),
            )
    return None


def lines_usage(data: bytes) -> Usage | None:
    """The usage of the complete lines in `data`, each response once; None if none carries any."""
    seen: set[str] = set()
    total: Usage | None = None
    turn_models: dict[str, str] = {}  # codex: each turn's model, by turn id
    for line in data.split(b"\n")[:-1]:  # the last piece is a line still being written, or nothing
        if not line or len(line) > MAX_USAGE_LINE_BYTES or too_deep(line):
            continue
        try:
            row = msgspec.json.decode(line)
        except msgspec.DecodeError:
            continue
        if (context := turn_model(row)) is not None:
            turn_models[context[0]] = context[1]
            continue
        found = row_usage(row, turn_models)
        if found is not None and found[0] not in seen:
            seen.add(found[0])
            total = add_usage(total, found[1])
    return total


def file_size(path: Path | None) -> int:
    """Where a turn's rows begin in the session file: its size now (0 if it isn't written yet)."""
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0


def usage_since(path: Path | None, offset: int) -> Usage | None:
    """The usage written to the session file at `path` since `offset`."""
    data = read_regular(path, USAGE_READ_BYTES, offset=offset) if path is not None else None  # a FIFO blocks nothing
    return lines_usage(data) if data is not None else None

