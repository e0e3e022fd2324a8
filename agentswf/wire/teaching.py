"""How a schema is taught to an agent, and how its answer is read back by that schema.

An object of 1 to 6 simple fields (string, number, integer, boolean or enum, each
with a lowercase name) is taught as flags, `--name '<value>'`, because agents get
flags right more often than JSON; any other schema is taught as its JSON Schema in
full, answered as JSON in a quoted heredoc; an object with no fields takes nothing.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import msgspec

from .nesting import too_deep

MAX_FLAG_FIELDS = 6
MAX_FLAG_DESCRIPTION_CHARS = 160  # a field's description, taught on one line beside its flag
_SIMPLE_TYPES = ("string", "integer", "number", "boolean")
_LOWERCASE_START = "abcdefghijklmnopqrstuvwxyz"
_NAME_CHARACTERS = set(_LOWERCASE_START + "0123456789_-")


ACCEPTED_SCHEMAS = (
    "a schema is a msgspec.Struct, a dataclass or a TypedDict, or a type such as str, int, bool, "
    "list[str], dict[str, int], a Literal or an Enum"
)


class ReadError(Exception):
    """The answer does not fit its schema; the message says what is wrong."""


class Flag(msgspec.Struct, frozen=True):
    """One field taught as `--name <hint>`."""

    name: str
    kind: Literal["string", "integer", "number", "boolean", "enum"]
    hint: str
    required: bool
    choices: tuple[Any, ...] = ()
    description: str = ""

    def usage(self) -> str:
        text = f"--{self.name} <{self.hint}>"
        return text if self.required else f"[{text}]"

    def note(self) -> str | None:
        """`--name: what it is`, one short line, when the field has a description."""
        return f"--{self.name}: {self.description}" if self.description else None


def _one_line(text: Any) -> str:
    """A description as one short line: whitespace collapsed, cut with `…` past the limit."""
    line = " ".join(str(text).split()) if isinstance(text, str) else ""
    return line if len(line) <= MAX_FLAG_DESCRIPTION_CHARS else line[: MAX_FLAG_DESCRIPTION_CHARS - 1] + "…"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _number_text(value: Any) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _hint(kind: str, field: dict[str, Any]) -> str:
    parts: list[str] = []
    if kind == "enum":
        return "one of: " + ", ".join(str(choice) for choice in field["enum"])
    if kind == "boolean":
        return "true or false"
    if kind == "string":
        parts.append("text")
        if "minLength" in field:
            parts.append(f"at least {_plural(field['minLength'], 'character')}")
        if "maxLength" in field:
            parts.append(f"at most {_plural(field['maxLength'], 'character')}")
        if "pattern" in field:
            parts.append(f"matching {field['pattern']}")
        if "format" in field:
            parts.append(f"as {field['format']}")
        return ", ".join(parts)
    parts.append(kind)
    bounds = (
        ("minimum", "at least"),
        ("exclusiveMinimum", "more than"),
        ("maximum", "at most"),
        ("exclusiveMaximum", "less than"),
    )
    parts.extend(f"{words} {_number_text(field[key])}" for key, words in bounds if key in field)
    if "multipleOf" in field:
        parts.append(f"a multiple of {_number_text(field['multipleOf'])}")
    return ", ".join(parts)


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """`node` with a top-level `$ref` into `$defs` followed."""
    seen = 0
    while "$ref" in node and seen < 32:
        name = node["$ref"].rsplit("/", 1)[-1]
        node = schema.get("$defs", {}).get(name, {})
        seen += 1
    return node


def _simple_kind(field: dict[str, Any]) -> str | None:
    if "enum" in field and set(field) <= {"enum", "title", "description", "default"}:
        if all(isinstance(choice, str) for choice in field["enum"]):
            return "enum"
        return None
    kind = field.get("type")
    return kind if kind in _SIMPLE_TYPES else None


def flags_of(schema: dict[str, Any]) -> list[Flag] | None:
    """The flags `schema` is taught as, or None when it is taught as JSON.

    An empty list means an object with no fields, answered with nothing.
    """
    root = _resolve(schema, schema)
    if root.get("type") != "object" or "properties" not in root:
        return None
    if root.get("additionalProperties", False) is not False:
        return None
    if any(key in root for key in ("patternProperties", "anyOf", "oneOf", "allOf")):
        return None
    properties: dict[str, Any] = root.get("properties", {})
    if len(properties) > MAX_FLAG_FIELDS:
        return None
    required = set(root.get("required", ()))
    flags: list[Flag] = []
    for name, raw in properties.items():
        field = _resolve(schema, raw)
        kind = _simple_kind(field)
        if kind is None or not name or name[0] not in _LOWERCASE_START:
            return None
        if not set(name) <= _NAME_CHARACTERS:
            return None
        choices = tuple(field["enum"]) if kind == "enum" else ()
        description = _one_line(raw.get("description") or field.get("description"))
        flags.append(Flag(name, kind, _hint(kind, field), name in required, choices, description))  # type: ignore[arg-type]
    return flags


def _convert(flag: Flag, text: str) -> Any:
    if flag.kind in ("string", "enum"):
        return text
    if flag.kind == "boolean":
        lowered = text.strip().lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        raise ReadError(f"--{flag.name} takes true or false, not {text!r}.")
    if flag.kind == "integer":
        try:
            return int(text.strip())
        except ValueError:
            raise ReadError(f"--{flag.name} takes an integer, not {text!r}.") from None
    try:
        number = float(text.strip())
    except ValueError:
        raise ReadError(f"--{flag.name} takes a number, not {text!r}.") from None
    if not math.isfinite(number):
        raise ReadError(f"--{flag.name} takes a finite number, not {text!r}.")
    return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number


def read_flags(flags: list[Flag], args: list[str]) -> dict[str, Any]:
    """The fields `args` give, converted by type; raises ReadError on any misfit."""
    by_name = {flag.name: flag for flag in flags}
    values: dict[str, Any] = {}
    position = 0
    while position < len(args):
        arg = args[position]
        position += 1
        if not arg.startswith("--") or arg == "--":
            raise ReadError(f"unexpected argument {arg!r}: every value follows its --flag.")
        name, equals, value = arg[2:].partition("=")
        flag = by_name.get(name)
        if flag is None:
            known = ", ".join(f"--{known}" for known in by_name) or "none"
            raise ReadError(f"unknown flag --{name}; the flags are {known}.")
        if name in values:
            raise ReadError(f"--{name} is given twice.")
        if not equals:
            if position >= len(args):
                raise ReadError(f"--{name} needs a value.")
            value = args[position]
            position += 1
        values[name] = _convert(flag, value)
    missing = [flag.name for flag in flags if flag.required and flag.name not in values]
    if missing:
        raise ReadError("missing " + ", ".join(f"--{name}" for name in missing) + ".")
    return values


def _inline(schema: dict[str, Any], node: Any, depth: int) -> Any:
    if isinstance(node, dict):
        if "$ref" in node and depth < 16:
            target = _resolve(schema, node)
            siblings = {key: value for key, value in node.items() if key != "$ref"}  # a field's description
            return _inline(schema, {**target, **siblings}, depth + 1)
        return {key: _inline(schema, value, depth) for key, value in node.items() if key != "$defs"}
    if isinstance(node, list):
        return [_inline(schema, item, depth) for item in node]
    return node


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with `$ref`s replaced by what they name, so an agent reads it in one piece.

    A recursive schema keeps its `$defs` and the references past a fixed depth.
    """
    inlined = _inline(schema, schema, 0)
    if "$ref" in msgspec.json.encode(inlined).decode() and "$defs" in schema:
        return schema
    return inlined


class Taught:
    """One schema as the prompt teaches it, and the reader of the answers it teaches.

    `type_` is anything msgspec can validate: a Struct, `str`, `list[int]`, ...
    """

    def __init__(self, type_: Any) -> None:
        self.type = type_
        try:
            schema = msgspec.json.schema(type_)
        except TypeError:  # msgspec's own text is about schema_hook, which no workflow can pass
            raise TypeError(f"not a type agentswf can teach or check; {ACCEPTED_SCHEMAS}") from None
        self.schema: dict[str, Any] = inline_refs(schema)
        self.flags = flags_of(self.schema)
        self._decoder = msgspec.json.Decoder(type_)

    @property
    def is_text(self) -> bool:
        """A plain string: answered as text in a heredoc (or as words), not as JSON."""
        return self.schema == {"type": "string"}

    @property
    def form(self) -> Literal["flags", "json", "none"]:
        if self.flags is None:
            return "json"
        return "flags" if self.flags else "none"

    def flags_usage(self) -> str:
        return " ".join(flag.usage() for flag in self.flags or ())

    def flag_notes(self) -> list[str]:
        """One line per flag whose field has a description: `--name: what it is`."""
        return [note for flag in self.flags or () if (note := flag.note())]

    def read(self, args: list[str], input: str | None) -> Any:
        """The value answered by flags (`args`) or by JSON (`input`); raises ReadError.

        A text answer is taken as it comes: words after the call id, or standard input
        (a JSON string is read as the string it holds; a heredoc's final newline is dropped).
        Any other JSON nested past MAX_NESTING_DEPTH is refused before it is decoded.
        """
        if self.is_text:
            return self._read_text(args, input)
        if args:
            if not self.flags:
                raise ReadError("this takes JSON on standard input, in a quoted heredoc, not flags.")
            fields = read_flags(self.flags, args)
            return self._convert(fields)
        text = input or ""
        deep = too_deep(text)
        if deep is not None:
            raise ReadError(f"{deep}.")
        if self.form == "none":
            # Taught as the command alone. Standard input may hold what the agent's shell
            # left there (its own prompt): only a JSON object in it is read, and checked.
            try:
                given = msgspec.json.decode(text) if text.strip() else {}
            except msgspec.DecodeError:
                given = {}  # not JSON at all: text the shell left on stdin, not an answer
            if not isinstance(given, dict):
                raise ReadError("this takes nothing: run the command alone, with no JSON.")
            return self._convert(given)
        if not text.strip():
            raise ReadError("nothing was given; give the value as taught.")
        try:
            return self._decoder.decode(text)
        except msgspec.ValidationError as error:
            raise ReadError(f"{error}.") from None
        except msgspec.DecodeError as error:
            raise ReadError(f"that is not valid JSON: {error}.") from None

    def _read_text(self, args: list[str], input: str | None) -> str:
        if args:
            if any(arg.startswith("--") for arg in args):
                raise ReadError("this answer is plain text, in a heredoc or after the call id, not --flags.")
            return " ".join(args)
        text = input or ""
        try:
            decoded = None if too_deep(text) else msgspec.json.decode(text)  # nested: text, not a JSON string
        except msgspec.DecodeError:
            decoded = None
        if isinstance(decoded, str):
            return decoded
        text = text[:-1] if text.endswith("\n") else text
        if not text.strip():
            raise ReadError("nothing was given; give the answer as taught.")
        return text

    def _convert(self, fields: dict[str, Any]) -> Any:
        try:
            return msgspec.convert(fields, self.type)
        except msgspec.ValidationError as error:
            raise ReadError(f"{error}.") from None
