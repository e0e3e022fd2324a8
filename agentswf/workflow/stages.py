"""What an attempt does with each stage it enters: the stage plan, as pure functions.

Until the attempt's start point, a stage entered is reused from its record (its work is not
called); from the start point on, every stage runs. The start point is the stage given to
`--rerun` (on a continue) or `--from-stage` (on a new run), or else the first stage entered
with no record. Before a `--from-stage` start, a stage takes its value from `--values`; with
no values at all the attempt only looks ahead (`Need`). Reaching the start point moves every
record this attempt didn't reuse out of the way (`replaced/`): what comes after it runs again.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import msgspec

from ..engine.attempts import StageRecord

_STAGE_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")


def is_stage_name(name: object) -> bool:
    """Lowercase letters, digits and '-', starting with a letter: a stage's name is a file's name in the record."""
    return isinstance(name, str) and bool(name) and set(name) <= _STAGE_CHARACTERS and name[0].isalpha()


class Reuse(NamedTuple):
    record: StageRecord


class Provide(NamedTuple):
    value: Any


class Run(NamedTuple):
    start: bool  # this is the start point: the records not reused move to replaced/


class Need(NamedTuple):
    """A look-ahead (--from-stage without --values) meets a stage before the start: its value is needed."""


class Missing(NamedTuple):
    """--values has no value for a stage before the start point."""


Decision = Reuse | Provide | Run | Need | Missing


def enter(
    name: str,
    *,
    recorded: StageRecord | None,
    started: bool,
    from_stage: str | None,
    rerun: str | None,
    values: dict[str, Any] | None,
) -> Decision:
    """What entering stage `name` does: reuse its record, take a provided value, run, or need a value."""
    if started:
        return Run(start=False)
    if name in (from_stage, rerun):
        return Run(start=True)
    if recorded is not None:
        return Reuse(recorded)
    if from_stage is not None:
        if values is None:
            return Need()
        return Provide(values[name]) if name in values else Missing()
    return Run(start=True)


def decode_value(value: Any, result: Any) -> Any:
    """A recorded (JSON) value as the stage gives it back: as `result` decodes it, or as it is.

    Raises msgspec.ValidationError when the value no longer fits `result`.
    """
    if result is None:
        return value
    return msgspec.json.decode(msgspec.json.encode(value), type=result)


def schema_of(result: Any) -> dict[str, Any]:
    """The JSON Schema a stage's value must fit (any JSON value without a `result`)."""
    return {} if result is None else msgspec.json.schema(result)


_FORMATS = {
    "date-time": "1970-01-01T00:00:00Z",
    "date": "1970-01-01",
    "time": "00:00:00Z",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "duration": "P0D",
    "email": "a@example.com",
    "uri": "https://example.com",
}


def stand_in(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """The smallest value `schema` allows: a look-ahead's stand-in for a stage's value.

    The first branch of a union, the lower bounds of numbers, lengths and counts, only the
    required fields. A schema it can't satisfy (a pattern) gives a value the caller's check
    refuses.
    """
    defs = schema.get("$defs", defs or {})
    if "$ref" in schema:
        return stand_in(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return stand_in(schema[union][0], defs)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0]
    if kind in ("integer", "number"):
        return _number(schema, integer=kind == "integer")
    if kind == "string":
        if schema.get("format") in _FORMATS:
            return _FORMATS[schema["format"]]
        return "x" * int(schema.get("minLength", 0))
    if kind == "boolean":
        return False
    if kind == "array":
        prefix = [stand_in(item, defs) for item in schema.get("prefixItems", [])]
        items = schema.get("items")
        more = max(0, int(schema.get("minItems", 0)) - len(prefix))
        return prefix + [stand_in(items if isinstance(items, dict) else {}, defs) for _ in range(more)]
    if kind == "object":
        properties = schema.get("properties", {})
        return {field: stand_in(properties.get(field, {}), defs) for field in schema.get("required", [])}
    return None


def _number(schema: dict[str, Any], *, integer: bool) -> int | float:
    low: float | None = schema.get("minimum")
    if "exclusiveMinimum" in schema:
        bound = schema["exclusiveMinimum"]
        low = math.floor(bound) + 1 if integer else bound + 1
    high: float | None = schema.get("maximum")
    if "exclusiveMaximum" in schema:
        bound = schema["exclusiveMaximum"]
        high = math.ceil(bound) - 1 if integer else bound - 1
    value = low if low is not None else (min(0, high) if high is not None else 0)
    step = schema.get("multipleOf")
    if step:
        value = math.ceil(value / step) * step
    return int(value) if integer else float(value)
