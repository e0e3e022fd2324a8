"""`decode_request`: whatever bytes arrive, a Request or a refusal with a code, never a crash."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentswf.wire import (
    COMMON_CODES,
    MAX_REQUEST_BYTES,
    WIRE_VERSION,
    PeersRequest,
    ReplyRequest,
    Request,
    Response,
    ResultRequest,
    SendRequest,
    ToolRequest,
    WaitingRequest,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    refused,
)
from agentswf.wire.common import exit_code

REQUEST_TYPES = (ResultRequest, ToolRequest, WaitingRequest, PeersRequest, SendRequest, ReplyRequest)


def line(obj) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def assert_refusal(answer, code: str) -> Response:
    assert isinstance(answer, Response), answer
    assert answer.code == code, answer
    assert answer.exit in (1, 3, 4)
    assert answer.stderr.endswith("\n") and code in answer.stderr
    return answer


def check_answer(answer) -> None:
    """Every answer is a Request, or a Response with a common code and a nonzero exit."""
    if isinstance(answer, Response):
        assert answer.code in COMMON_CODES, answer
        assert answer.exit != 0
        assert answer.stderr.startswith("wfa: ")
        # the refusal itself always goes back over the wire
        assert decode_response(encode_response(answer)) == answer
    else:
        assert isinstance(answer, REQUEST_TYPES)
        assert answer.version == WIRE_VERSION


# Any bytes -----------------------------------------------------------------------------

json_leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
field_names = st.sampled_from(
    ["version", "command", "call_id", "args", "input", "name", "reason", "timeout_ms", "json", "peer",
     "message", "await_reply", "extra", "Version"]
)
commands = st.sampled_from(["result", "tool", "waiting", "peers", "send", "reply", "frob", "", "RESULT"])


@st.composite
def request_like(draw) -> bytes:
    """JSON objects shaped roughly like requests: right and wrong fields, types and versions."""
    obj = draw(st.dictionaries(field_names, json_value, max_size=6))
    if draw(st.booleans()):
        obj["command"] = draw(commands)
    if draw(st.booleans()):
        obj["version"] = draw(st.sampled_from([WIRE_VERSION, WIRE_VERSION + 1, 0, -1, "1", 1.0, True, None]))
    data = json.dumps(obj).encode()
    ending = draw(st.sampled_from([b"\n", b"", b"\n\n", b"\r\n", b"\n{}"]))
    return data + ending


@given(st.binary(max_size=300))
def test_any_bytes_get_an_answer(data):
    check_answer(decode_request(data))


@given(request_like())
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_request_shaped_json_gets_an_answer(data):
    check_answer(decode_request(data))


@given(st.binary(max_size=200), st.integers(min_value=0, max_value=200))
def test_truncated_frames_are_refused(tail, cut):
    data = encode_request(ResultRequest(version=WIRE_VERSION, call_id="c0ffee", args=["--n", "1"]))
    data = (data + tail)[: min(cut, len(data) - 1)]  # never the whole line with its newline
    answer = decode_request(data)
    check_answer(answer)
    if b"\n" not in data:
        assert_refusal(answer, "invalid-request")


# Valid requests --------------------------------------------------------------------------

names = st.text(min_size=1, max_size=40)


@st.composite
def requests(draw) -> Request:
    kind = draw(st.sampled_from(REQUEST_TYPES))
    timeout = st.none() | st.integers(min_value=1, max_value=10**12)
    if kind is ResultRequest:
        return ResultRequest(WIRE_VERSION, draw(names), draw(st.lists(st.text(max_size=20), max_size=5)),
                             draw(st.none() | st.text(max_size=50)))
    if kind is ToolRequest:
        return ToolRequest(WIRE_VERSION, draw(names), draw(st.lists(st.text(max_size=20), max_size=5)),
                           draw(st.none() | st.text(max_size=50)))
    if kind is WaitingRequest:
        return WaitingRequest(WIRE_VERSION, draw(names), draw(st.text(max_size=40)), draw(timeout))
    if kind is PeersRequest:
        return PeersRequest(WIRE_VERSION, draw(st.booleans()))
    return kind(WIRE_VERSION, draw(names), draw(st.text(max_size=50)), draw(st.booleans()), draw(timeout))


@given(requests())
def test_every_request_round_trips(request):
    assert decode_request(encode_request(request)) == request


def test_the_client_s_own_line_decodes():
    from agentswf.launcher import client

    fields = client.build_request(["result", "abc123", "--verdict", "ok"])
    assert decode_request(client.encode_request(fields)) == ResultRequest(
        WIRE_VERSION, "abc123", ["--verdict", "ok"], None
    )


# Each refusal ----------------------------------------------------------------------------


def test_oversize_is_request_too_large():
    data = line({"version": WIRE_VERSION, "command": "result", "call_id": "x", "input": "a" * MAX_REQUEST_BYTES})
    answer = assert_refusal(decode_request(data), "request-too-large")
    assert str(MAX_REQUEST_BYTES) in answer.stderr


def test_oversize_is_judged_before_anything_else():
    assert_refusal(decode_request(b"\xff" * (MAX_REQUEST_BYTES + 1)), "request-too-large")


def test_just_under_the_limit_is_read():
    base = line({"version": WIRE_VERSION, "command": "result", "call_id": "x", "input": ""})
    padding = MAX_REQUEST_BYTES - len(base)
    data = line({"version": WIRE_VERSION, "command": "result", "call_id": "x", "input": "a" * padding})
    assert len(data) == MAX_REQUEST_BYTES
    assert isinstance(decode_request(data), ResultRequest)


@pytest.mark.parametrize("version", [WIRE_VERSION + 1, 0, 99, "1", None])
def test_another_version_is_unsupported_naming_both(version):
    obj = {"command": "result", "call_id": "x"}
    if version is not None:
        obj["version"] = version
    answer = assert_refusal(decode_request(line(obj)), "unsupported-version")
    assert repr(version) in answer.stderr
    assert f"version {WIRE_VERSION}" in answer.stderr


def test_unsupported_version_for_tool_exits_as_a_tool_refusal():
    answer = assert_refusal(decode_request(line({"version": 7, "command": "tool", "name": "x"})), "unsupported-version")
    assert answer.exit == exit_code("tool", "unsupported-version") == 3


@pytest.mark.parametrize(
    "obj",
    [
        {"version": WIRE_VERSION, "command": "result", "call_id": "x", "surprise": 1},  # unknown field
        {"version": WIRE_VERSION, "command": "result", "call_id": 5},  # wrong type
        {"version": WIRE_VERSION, "command": "result", "call_id": ""},  # too short
        {"version": WIRE_VERSION, "command": "result", "call_id": "x", "args": "--n 1"},
        {"version": WIRE_VERSION, "command": "result"},  # missing field
        {"version": WIRE_VERSION, "command": "waiting", "call_id": "x", "reason": "r", "timeout_ms": 0},
        {"version": WIRE_VERSION, "command": "waiting", "call_id": "x", "reason": "r", "timeout_ms": "1s"},
        {"version": WIRE_VERSION, "command": "peers", "json": "yes"},
        {"version": WIRE_VERSION, "command": "frob"},  # unknown command
        {"version": WIRE_VERSION},  # no command
        {"version": True, "command": "result", "call_id": "x"},
        {"version": 1.0, "command": "result", "call_id": "x"},
    ],
)
def test_malformed_fields_are_invalid_request(obj):
    assert_refusal(decode_request(line(obj)), "invalid-request")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\n",
        b"{}",  # no newline
        b'{"version": 1, "command": "peers"}',  # no newline: not a whole line
        b'{"version": 1, "command": "peers"}\n{"version": 1, "command": "peers"}\n',  # two lines
        b'{"version": 1,\n "command": "peers"}\n',  # one object over two lines
        b"[]\n",
        b"null\n",
        b'"result"\n',
        b"{not json}\n",
        b'{"version": 1, "command": "peers"\n',  # truncated
        b"\xff\xfe\n",
        b"[" * 10000 + b"\n",
    ],
)
def test_not_exactly_one_line_of_a_json_object_is_invalid_request(data):
    assert_refusal(decode_request(data), "invalid-request")


def test_refusal_names_the_command_it_refuses():
    answer = decode_request(line({"version": WIRE_VERSION, "command": "waiting", "call_id": "x"}))
    assert_refusal(answer, "invalid-request")
    assert answer.stderr.startswith("wfa: waiting refused (invalid-request)")


def test_refused_formats_one_line_with_notice():
    answer = refused("result", "closed-operation", "done.\n", notice="wfa: you owe a reply.\n")
    assert answer.stderr == "wfa: you owe a reply.\nwfa: result refused (closed-operation): done.\n"
    assert answer.exit == 1 and not answer.ok


def test_decoder_rejects_a_response_that_is_not_one():
    with pytest.raises(msgspec.DecodeError):
        decode_response(b'{"version": 1}\n')
