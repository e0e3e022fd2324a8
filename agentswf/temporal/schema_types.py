"""A msgspec type back from the JSON Schema agentswf taught: how a worker checks answers and
tool input of a workflow whose code (and so whose types) it doesn't have.

The workflow sends each schema as JSON; the worker rebuilds a type with the same schema
(`msgspec.json.schema(type_of(s))` is `s`, a tested property), so the agent is taught the
same text and refused the same way as on the local engine. The workflow converts the
builtins it gets back to its own types, so its own validators still have the last word.
A schema outside what is rebuilt raises UnsupportedSchema.
"""

from __future__ import annotations

import copy
import datetime
import uuid
from collections.abc import Callable
from typing import Annotated, Any, Literal, Union

import msgspec

_STRING_META = {"minLength": "min_length", "maxLength": "max_length", "pattern": "pattern"}
_NUMBER_META = {
    "minimum": "ge", "maximum": "le", "exclusiveMinimum": "gt", "exclusiveMaximum": "lt", "multipleOf": "multiple_of",
}
_ARRAY_META = {"minItems": "min_length", "maxItems": "max_length"}
_OBJECT_META = {"minProperties": "min_length", "maxProperties": "max_length"}
_DOC_META = {"title": "title", "description": "description", "examples": "examples"}
_FORMATS: dict[str, Any] = {
    "date-time": datetime.datetime, "date": datetime.date, "time": datetime.time, "uuid": uuid.UUID,
    "duration": datetime.timedelta,
}
_SCALARS: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "null": type(None)}


class UnsupportedSchema(ValueError):
    """A schema agentswf doesn't rebuild as a type (a `$ref`, a keyword it doesn't know)."""


def type_of(schema: Any) -> Any:
    """The msgspec type whose JSON Schema is `schema`; raises UnsupportedSchema."""
    if not isinstance(schema, dict):
        raise UnsupportedSchema(f"a schema is an object, not {schema!r}")
    if schema.get("type") == "object" and "properties" in schema:
        return _struct(schema)
    meta: dict[str, Any] = {}
    if "enum" in schema:
        base: Any = Literal[tuple(schema["enum"])]
        known = {"enum"}
    elif "anyOf" in schema:
        base = Union[tuple(type_of(option) for option in schema["anyOf"])]  # noqa: UP007 - built from a tuple
        known = {"anyOf"}
    elif "type" not in schema:
        known = set()
        base = Any
    elif schema["type"] == "string" and "format" in schema:
        if schema["format"] not in _FORMATS:
            raise UnsupportedSchema(f"no type for a string of format {schema['format']!r}")
        base, known = _FORMATS[schema["format"]], {"type", "format"}
    elif schema["type"] in ("string", "integer", "number"):
        base = _SCALARS[schema["type"]]
        known = {"type", *(_STRING_META if base is str else _NUMBER_META)}
        names = _STRING_META if base is str else _NUMBER_META
        meta.update({names[key]: schema[key] for key in names if key in schema})
    elif schema["type"] in ("boolean", "null"):
        base, known = _SCALARS[schema["type"]], {"type"}
    elif schema["type"] == "array":
        base = list[type_of(schema["items"])] if "items" in schema else list  # type: ignore[misc]
        known = {"type", "items", *_ARRAY_META}
        meta.update({_ARRAY_META[key]: schema[key] for key in _ARRAY_META if key in schema})
    elif schema["type"] == "object":
        values = schema.get("additionalProperties", True)
        base = dict[str, Any if values is True else type_of(values)]  # type: ignore[misc]
        known = {"type", "additionalProperties", *_OBJECT_META}
        meta.update({_OBJECT_META[key]: schema[key] for key in _OBJECT_META if key in schema})
    else:
        raise UnsupportedSchema(f"no type for JSON Schema type {schema['type']!r}")
    meta.update({_DOC_META[key]: schema[key] for key in _DOC_META if key in schema})
    unknown = set(schema) - known - set(_DOC_META) - {"default"}
    if unknown:
        raise UnsupportedSchema(f"the schema keyword(s) {', '.join(sorted(unknown))} are not rebuilt")
    return Annotated[base, msgspec.Meta(**meta)] if meta else base


def _copier(value: Any) -> Callable[[], Any]:
    return lambda: copy.deepcopy(value)


def _struct(schema: dict[str, Any]) -> Any:
    unknown = set(schema) - {"title", "description", "type", "properties", "required", "additionalProperties"}
    if unknown:
        raise UnsupportedSchema(f"the object keyword(s) {', '.join(sorted(unknown))} are not rebuilt")
    required = set(schema.get("required", ()))
    fields: list[Any] = []
    optional: list[Any] = []
    for name, field in schema["properties"].items():
        kind = type_of(field)
        if name in required:
            fields.append((name, kind))
        elif isinstance(field, dict) and "default" in field:
            default = field["default"]
            if isinstance(default, (list, dict)) and default:
                optional.append((name, kind, msgspec.field(default_factory=_copier(default))))
            else:
                optional.append((name, kind, default))
        else:
            raise UnsupportedSchema(f"field {name} is neither required nor has a default")
    namespace = {"__doc__": schema["description"]} if "description" in schema else {}
    return msgspec.defstruct(
        schema.get("title", "Object"),
        fields + optional,
        forbid_unknown_fields=schema.get("additionalProperties", True) is False,
        namespace=namespace,
    )
