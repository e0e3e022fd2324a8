"""JSON nested past MAX_NESTING_DEPTH never reaches a decoder: the scan, and each reader that uses it."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentswf.wire import (
    MAX_NESTING_DEPTH,
    WIRE_VERSION,
    Response,
    ResultRequest,
    decode_request,
)
from agentswf.wire.nesting import nesting_depth, too_deep
from agentswf.wire.teaching import ReadError, Taught


def depth_of(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth_of(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(item) for item in value.values()), default=0)
    return 0


def nested(depth: int, opener: str = "[", closer: str = "]") -> str:
    return opener * depth + closer * depth


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\n,:'),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(alphabet='[]{}"\\ab'), inner, max_size=4),
    max_leaves=40,
)


@given(json_values)
def test_the_depth_of_any_json_value_is_its_nesting(value):
    assert nesting_depth(json.dumps(value)) == depth_of(value)
    assert nesting_depth(json.dumps(value).encode()) == depth_of(value)


@given(st.text(alphabet='[]{}"\\ ,:1'), st.integers(min_value=0, max_value=3000))
def test_what_is_let_through_never_makes_the_decoder_recurse_too_far(soup, depth):
    text = nested(depth)[: depth] + soup + nested(depth)[depth:]  # brackets around a malformed middle
    if too_deep(text) is None:
        try:
            msgspec.json.decode(text)
        except msgspec.DecodeError:
            pass  # refused as malformed; a RecursionError would fail the test


def test_the_limit_is_inclusive_and_the_refusal_names_it():
    assert too_deep(nested(MAX_NESTING_DEPTH)) is None
    message = too_deep(nested(MAX_NESTING_DEPTH + 1))
    assert message is not None and "MAX_NESTING_DEPTH" in message and str(MAX_NESTING_DEPTH) in message
    assert too_deep(json.dumps({"text": "[" * 10_000})) is None  # brackets inside a string don't nest
    assert too_deep("[" * 10_000) is not None  # never closed: a decoder would still recurse into it


def line(obj: Any) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def deep_line(command: str, field: str, depth: int = 1000) -> bytes:
    head = json.dumps({"version": WIRE_VERSION, "command": command})[:-1]
    return f'{head}, "{field}": {nested(depth)}}}\n'.encode()


@pytest.mark.parametrize(
    "command, field",
    [("result", "args"), ("tool", "args"), ("waiting", "reason"), ("peers", "json"), ("send", "message"),
     ("reply", "peer"), ("result", "version")],
)
def test_a_deep_request_line_is_refused_naming_the_limit(command, field):
    answer = decode_request(deep_line(command, field))
    assert isinstance(answer, Response) and answer.code == "invalid-request"
    assert "MAX_NESTING_DEPTH" in answer.stderr and answer.stderr.startswith(f"wfa: {command} refused")


def test_deep_json_inside_the_input_string_is_left_to_the_reader():
    request = decode_request(line({"version": WIRE_VERSION, "command": "result", "call_id": "c", "input": nested(5000)}))
    assert isinstance(request, ResultRequest) and request.input == nested(5000)


class Point(msgspec.Struct):
    x: int


@pytest.mark.parametrize("schema", [list[Any], Any, dict[str, Any], Point, list[int]])
def test_a_deep_answer_is_refused_whatever_its_schema(schema):
    with pytest.raises(ReadError, match="MAX_NESTING_DEPTH"):
        Taught(schema).read([], nested(1000))
    with pytest.raises(ReadError, match="MAX_NESTING_DEPTH"):
        Taught(schema).read([], nested(1000, '{"a":', "}"))


def test_a_deep_answer_to_a_tool_without_input_is_refused():
    class NoInput(msgspec.Struct, forbid_unknown_fields=True):
        pass

    with pytest.raises(ReadError, match="MAX_NESTING_DEPTH"):
        Taught(NoInput).read([], nested(1000))


def test_a_deep_text_answer_is_taken_as_the_text_it_is():
    assert Taught(str).read([], nested(1000) + "\n") == nested(1000)


def test_just_under_the_limit_is_read():
    assert depth_of(Taught(list[Any]).read([], nested(MAX_NESTING_DEPTH))) == MAX_NESTING_DEPTH


@pytest.mark.parametrize("reader", ["claude", "codex", "cursor", "pi"])
def test_a_deep_line_of_a_cli_s_output_is_not_an_event(reader):
    import importlib

    module = importlib.import_module(f"agentswf.harnesses.{reader}")
    kinds = [value for name, value in vars(module).items() if name.endswith("Reader") and name != "OutputReader"]
    assert kinds
    for kind in kinds:  # a turn's reader, and an operation's
        output = kind()
        output.feed(b'{"type": "result", "x": ' + nested(5000).encode() + b"}")  # never decoded
        assert output.error is None and not output.finished
