"""A type rebuilt from a taught JSON Schema teaches the same schema: a worker without the
workflow's code teaches and checks exactly as the workflow's own types would."""

from __future__ import annotations

import itertools
import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal, Optional
from uuid import UUID

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentswf
from agentswf.temporal.schema_types import UnsupportedSchema, type_of
from agentswf.wire.teaching import Taught

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
_names = itertools.count()

leaves = st.sampled_from([str, int, float, bool, datetime, UUID]) | st.builds(
    lambda low, high: Annotated[str, msgspec.Meta(min_length=low, max_length=low + high)],
    st.integers(0, 5), st.integers(0, 5),
) | st.builds(
    lambda low, high: Annotated[int, msgspec.Meta(ge=low, le=low + high)], st.integers(-9, 9), st.integers(0, 9)
) | st.lists(st.text("abc", min_size=1, max_size=3), min_size=1, max_size=4, unique=True).map(
    lambda values: Literal[tuple(values)]
)


def _struct(fields: dict[str, Any], optional: bool) -> Any:
    spec = [(name, kind | None, None) if optional else (name, kind) for name, kind in fields.items()]
    return msgspec.defstruct(f"S{next(_names)}", spec, forbid_unknown_fields=True)


types = st.recursive(
    leaves,
    lambda inner: st.builds(lambda kind: list[kind], inner)  # type: ignore[valid-type]
    | st.builds(lambda kind: dict[str, kind], inner)  # type: ignore[valid-type]
    | st.builds(lambda kind: Optional[kind], inner)  # noqa: UP045 - built at run time
    | st.builds(_struct, st.dictionaries(st.text("xyz", min_size=1, max_size=3), inner, max_size=4), st.booleans()),
    max_leaves=8,
)


@given(types)
def test_a_rebuilt_type_teaches_the_same_schema(kind: Any) -> None:
    try:
        schema = Taught(kind).schema
    except TypeError:  # a union msgspec itself refuses
        return
    assert Taught(type_of(schema)).schema == schema


def test_the_examples_schemas_come_back_the_same() -> None:
    review_fix = agentswf.load_workflow(EXAMPLES / "review_fix" / "review_fix.py")
    triage = agentswf.load_workflow(EXAMPLES / "tools" / "triage.py")
    one, two = sys.modules[review_fix.fn.__module__], sys.modules[triage.fn.__module__]
    for kind in (one.Verdict, one.FixReport, two.Labels, two.Triage, str, list[one.Verdict]):
        schema = Taught(kind).schema
        assert Taught(type_of(schema)).schema == schema


def test_a_rebuilt_type_refuses_what_the_original_refuses() -> None:
    class Item(msgspec.Struct, forbid_unknown_fields=True):
        id: Annotated[str, msgspec.Meta(pattern="^b[0-9]$")]
        labels: Annotated[list[str], msgspec.Meta(min_length=1)]

    rebuilt = type_of(Taught(Item).schema)
    assert msgspec.convert({"id": "b1", "labels": ["x"]}, rebuilt).labels == ["x"]
    for bad in ({"id": "c1", "labels": ["x"]}, {"id": "b1", "labels": []}, {"id": "b1", "labels": ["x"], "more": 1}):
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(bad, Item)
        with pytest.raises(msgspec.ValidationError):
            msgspec.convert(bad, rebuilt)


@pytest.mark.parametrize("schema", [{"$ref": "#/$defs/X"}, {"type": "string", "format": "email"}, {"type": "tuple"}])
def test_a_schema_it_cant_rebuild_is_refused(schema: dict[str, Any]) -> None:
    with pytest.raises(UnsupportedSchema):
        type_of(schema)
