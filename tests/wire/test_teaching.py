"""Teaching a schema: flags, JSON or nothing; and reading an answer back by it."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentswf.wire.teaching import ReadError, Taught, read_flags


class One(msgspec.Struct, forbid_unknown_fields=True):
    verdict: str


class Six(msgspec.Struct):
    a: str
    b: int
    c: float
    d: bool
    e: Literal["approve", "reject"]
    f: Annotated[int, msgspec.Meta(ge=1, le=5)]


class Seven(msgspec.Struct):
    a: str
    b: str
    c: str
    d: str
    e: str
    f: str
    g: str


class WithList(msgspec.Struct):
    files: list[str]


class Inner(msgspec.Struct):
    x: int


class Nested(msgspec.Struct):
    inner: Inner


class Upper(msgspec.Struct):
    Verdict: str


class Empty(msgspec.Struct, forbid_unknown_fields=True):
    pass


class Bounded(msgspec.Struct, forbid_unknown_fields=True):
    count: Annotated[int, msgspec.Meta(ge=1, le=10)]
    ratio: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)] = 0.5
    ok: bool = False
    note: str = ""


@pytest.mark.parametrize("type_", [One, Six, Bounded])
def test_one_to_six_simple_lowercase_fields_are_flags(type_):
    taught = Taught(type_)
    assert taught.form == "flags"
    assert [flag.name for flag in taught.flags] == list(type_.__struct_fields__)


def test_six_fields_teach_each_kind():
    flags = {flag.name: flag for flag in Taught(Six).flags}
    assert [flags[n].kind for n in "abcdef"] == ["string", "integer", "number", "boolean", "enum", "integer"]
    assert flags["e"].choices == ("approve", "reject")
    assert "at least 1" in flags["f"].hint and "at most 5" in flags["f"].hint


def test_optional_fields_are_taught_optional():
    usage = Taught(Bounded).flags_usage()
    assert usage.startswith("--count <integer, at least 1, at most 10>")
    assert "[--ratio <number" in usage and "[--ok <true or false>]" in usage


@pytest.mark.parametrize("type_", [Seven, WithList, Nested, Upper, list[int], dict[str, int], int, str])
def test_anything_else_is_json(type_):
    taught = Taught(type_)
    assert taught.form == "json"
    assert taught.flags is None
    assert "$ref" not in msgspec.json.encode(taught.schema).decode()


def test_an_empty_struct_takes_nothing():
    taught = Taught(Empty)
    assert taught.form == "none"
    assert taught.read([], None) == Empty()
    assert taught.read([], "   \n") == Empty()


def test_json_answers_are_validated():
    taught = Taught(Nested)
    assert taught.read([], '{"inner": {"x": 3}}') == Nested(Inner(3))
    with pytest.raises(ReadError, match="Expected `int`"):
        taught.read([], '{"inner": {"x": "3"}}')
    with pytest.raises(ReadError, match="not valid JSON"):
        taught.read([], '{"inner": ')
    with pytest.raises(ReadError, match="nothing was given"):
        taught.read([], "")
    with pytest.raises(ReadError, match="not flags"):
        taught.read(["--inner", "1"], None)


# Reading flags --------------------------------------------------------------------------


def test_name_space_value_and_name_equals_value():
    taught = Taught(Bounded)
    assert taught.read(["--count", "3", "--note=a=b c"], None) == Bounded(3, note="a=b c")
    assert taught.read(["--count=3", "--note", "--not-a-flag"], None) == Bounded(3, note="--not-a-flag")


def test_numbers_and_booleans_are_converted_by_type():
    taught = Taught(Six)
    value = taught.read(["--a", "12", "--b", "-4", "--c", "2", "--d", "TRUE", "--e", "reject", "--f", "5"], None)
    assert value == Six("12", -4, 2.0, True, "reject", 5)
    assert isinstance(value.a, str) and isinstance(value.c, float)
    assert taught.read(["--a=x", "--b=0", "--c=1e-3", "--d=false", "--e=approve", "--f=1"], None).c == 0.001


@pytest.mark.parametrize(
    "args, message",
    [
        (["--count", "3", "--colour", "red"], "unknown flag --colour"),
        (["--count", "3", "--count", "4"], "given twice"),
        (["--count=3", "--count=3"], "given twice"),
        (["--count", "11"], "<= 10"),
        (["--count", "0"], ">= 1"),
        (["--count", "3", "--ratio", "1.5"], "<= 1.0"),
        (["--count", "three"], "takes an integer"),
        (["--count", "3.0"], "takes an integer"),
        (["--count", "3", "--ratio", "nan"], "finite"),
        (["--count", "3", "--ratio", "inf"], "finite"),
        (["--count", "3", "--ok", "yes"], "true or false"),
        (["--count"], "needs a value"),
        (["3"], "unexpected argument"),
        (["--", "3"], "unexpected argument"),
        (["--ok", "true"], "missing --count"),
    ],
)
def test_misfits_are_refused(args, message):
    with pytest.raises(ReadError, match=message):
        Taught(Bounded).read(args, None)


def test_an_enum_outside_its_choices_is_refused():
    with pytest.raises(ReadError):
        Taught(Six).read(["--a", "x", "--b", "1", "--c", "1", "--d", "true", "--e", "maybe", "--f", "1"], None)


def test_read_flags_without_flags_lists_none():
    with pytest.raises(ReadError, match="the flags are none"):
        read_flags([], ["--x", "1"])


# Round trip -------------------------------------------------------------------------------


class Answer(msgspec.Struct, forbid_unknown_fields=True):
    title: str
    count: Annotated[int, msgspec.Meta(ge=-(2**53), le=2**53)]
    score: float
    done: bool
    level: Literal["low", "mid", "high"]
    note: str = ""


def render(value: Answer, equals: list[bool]) -> list[list[str]]:
    """Each field as a flag: `--name value` or `--name=value`."""
    fields = {
        "title": value.title,
        "count": str(value.count),
        "score": repr(value.score),
        "done": "true" if value.done else "false",
        "level": value.level,
        "note": value.note,
    }
    return [
        [f"--{name}={text}"] if use_equals else [f"--{name}", text]
        for (name, text), use_equals in zip(fields.items(), equals)
    ]


answers = st.builds(
    Answer,
    title=st.text(),
    count=st.integers(min_value=-(2**53), max_value=2**53),
    score=st.floats(allow_nan=False, allow_infinity=False),
    done=st.booleans(),
    level=st.sampled_from(["low", "mid", "high"]),
    note=st.text(),
)


@given(answers, st.lists(st.booleans(), min_size=6, max_size=6), st.permutations(range(6)))
def test_flags_round_trip(value, equals, order):
    taught = Taught(Answer)
    assert taught.form == "flags"
    flags = render(value, equals)
    args = [arg for index in order for arg in flags[index]]
    assert taught.read(args, None) == value
