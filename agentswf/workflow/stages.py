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
import msgspec.inspect as mi

from ..engine.record.attempts import StageRecord

_STAGE_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
MAX_STAGE_NAME_CHARS = 64


def is_stage_name(name: object) -> bool:
    """Lowercase letters, digits and '-', starting with a letter: a stage's name is a file's name in the record."""
    return (
        isinstance(name, str)
        and 0 < len(name) <= MAX_STAGE_NAME_CHARS
        and set(name) <= _STAGE_CHARACTERS
        and name[0].isalpha()
    )


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


def stand_in(result: Any) -> Any:
    """The smallest JSON value `result` (a msgspec type, or None for any) allows: a look-ahead's
    stand-in for a stage's value or a turn's answer.

    The first branch of a union, the lower bounds of numbers, lengths and counts, only the
    required fields. A type it can't satisfy (a pattern) gives a value `decode_value` refuses.
    """
    return _stand_in(msgspec.inspect.type_info(result)) if result is not None else None


_TEMPORAL = {
    mi.DateTimeType: "1970-01-01T00:00:00Z",
    mi.DateType: "1970-01-01",
    mi.TimeType: "00:00:00",
    mi.TimeDeltaType: "P0D",
    mi.UUIDType: "00000000-0000-0000-0000-000000000000",
    mi.DecimalType: "0",
}


def _stand_in(info: mi.Type) -> Any:
    if isinstance(info, mi.Metadata):
        return _stand_in(info.type)
    if type(info) in _TEMPORAL:
        return _TEMPORAL[type(info)]
    if isinstance(info, mi.UnionType):
        return _stand_in(info.types[0])
    if isinstance(info, mi.LiteralType):
        return info.values[0]
    if isinstance(info, mi.EnumType):
        return next(iter(info.cls)).value
    if isinstance(info, mi.BoolType):
        return False
    if isinstance(info, (mi.IntType, mi.FloatType)):
        return _number(info, integer=isinstance(info, mi.IntType))
    if isinstance(info, mi.StrType):
        return "x" * (info.min_length or 0)
    if isinstance(info, (mi.BytesType, mi.ByteArrayType)):
        return "A" * 4 * -(-(info.min_length or 0) // 3)  # base64 of that many bytes
    if isinstance(info, mi.TupleType):
        return [_stand_in(item) for item in info.item_types]
    if isinstance(info, (mi.SetType, mi.FrozenSetType)) and (info.min_length or 0) > 1:
        return None  # distinct stand-ins aren't ours to make: the check refuses this
    if isinstance(info, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
        return [_stand_in(info.item_type) for _ in range(info.min_length or 0)]
    if isinstance(info, (mi.DictType, mi.FrozenDictType)):
        return {} if not info.min_length else None
    if isinstance(info, (mi.StructType, mi.TypedDictType, mi.DataclassType)):
        fields = {field.encode_name: _stand_in(field.type) for field in info.fields if field.required}
        if isinstance(info, mi.StructType) and info.tag_field is not None:
            fields[info.tag_field] = info.tag
        return fields
    if isinstance(info, mi.NamedTupleType):
        return [_stand_in(field.type) for field in info.fields]
    return None


def _number(info: mi.IntType | mi.FloatType, *, integer: bool) -> int | float:
    low: float | None = info.ge
    if info.gt is not None:
        low = math.floor(info.gt) + 1 if integer else info.gt + 1
    high: float | None = info.le
    if info.lt is not None:
        high = math.ceil(info.lt) - 1 if integer else info.lt - 1
    value: float = low if low is not None else (min(0, high) if high is not None else 0)
    if info.multiple_of:
        value = math.ceil(value / info.multiple_of) * info.multiple_of
    return int(value) if integer else float(value)
