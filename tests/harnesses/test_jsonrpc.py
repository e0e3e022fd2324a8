"""JSON-RPC a line at a time without I/O, as ACP and codex's app-server share it: any bytes are a
well-formed message or skipped, with the `jsonrpc` member (ACP's) or without it (codex's)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from agentswf.harnesses.jsonrpc import METHOD_NOT_FOUND, Answer, Failure, Notice, Request, Rpc

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
keys = st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error"]) | st.text(max_size=6)
marked, bare = Rpc(), Rpc(marked=False)


@given(st.binary(max_size=300))
def test_any_bytes_are_a_message_or_skipped(line):
    for rpc in (marked, bare):
        assert rpc.read(line) is None or isinstance(rpc.read(line), Request | Notice | Answer | Failure)


@given(st.dictionaries(keys, json_values, max_size=6))
def test_any_json_object_is_a_well_formed_message_or_skipped(message):
    for rpc in (marked, bare):
        found = rpc.read(json.dumps(message).encode())
        if found is None:
            continue
        assert rpc is bare or message.get("jsonrpc") == "2.0"
        if isinstance(found, Request | Notice):
            assert isinstance(message["method"], str) and isinstance(found.params, dict)
            assert "result" not in message and message.get("error") is None
        else:
            assert isinstance(message["id"], int) and not isinstance(message["id"], bool)
            assert ("result" in message) != (message.get("error") is not None)


def test_the_four_messages_and_what_is_skipped():
    read = marked.read
    assert read(b'{"jsonrpc":"2.0","id":3,"method":"session/request_permission","params":{"a":1}}') == Request(
        3, "session/request_permission", {"a": 1}
    )
    assert read(b'{"jsonrpc":"2.0","method":"session/update","params":{}}') == Notice("session/update", {})
    assert read(b'{"jsonrpc":"2.0","id":1,"result":null}') == Answer(1, None)
    assert read(b'{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"no"}}') == Failure(1, -32603, "no")
    skipped = [
        b"not json", b"[1,2]", b'{"id":1,"result":{}}', b'{"jsonrpc":"2.0","id":true,"result":{}}',
        b'{"jsonrpc":"2.0","id":"x","result":{}}', b'{"jsonrpc":"2.0","id":1}',
        b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":""}}',
        b'{"jsonrpc":"2.0","method":"m","params":[1]}', b'{"jsonrpc":"1.0","id":1,"result":{}}',
        b'{"jsonrpc":"2.0","method":"m","params":' + b"[" * 5000 + b"]" * 5000 + b"}",
    ]  # fmt: skip
    assert [read(line) for line in skipped] == [None] * len(skipped)
    assert read(b'{"jsonrpc":"2.0","id":1,"error":"boom"}') == Failure(1, None, "an error with no message")  # still failed
    assert bare.read(b'{"id":1,"result":{}}') == Answer(1, {})  # codex's app-server writes no `jsonrpc`
    assert bare.read(b'{"jsonrpc":"1.0","id":1,"result":{}}') is None  # one that says another version is no message


def test_our_lines_are_json_rpc_and_requests_are_numbered():
    rpc = Rpc()
    first, line = rpc.request("initialize", {"protocolVersion": 1})
    second, _ = rpc.request("session/new", {})
    assert (first, second) == (1, 2) and line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}
    refusal = json.loads(rpc.refuse(Request("k", "terminal/create", {})))
    assert refusal["id"] == "k" and refusal["error"]["code"] == METHOD_NOT_FOUND
    assert json.loads(rpc.answer(Request(7, "m", {}), {"a": 1})) == {"jsonrpc": "2.0", "id": 7, "result": {"a": 1}}
    assert json.loads(bare.notify("initialized")) == {"method": "initialized"}
