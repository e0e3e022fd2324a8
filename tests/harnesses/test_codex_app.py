"""codex's app-server protocol without I/O (`jsonrpc.Rpc`, unmarked), and the codex harness's fork and compaction
against stand-ins for `codex app-server` that fail: they fail the operation, saying why, and
leave nothing running. (The real app-server is driven in tests/agents/test_real_cli_operations.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentswf.harnesses import process
from agentswf.harnesses.base import Operation
from agentswf.harnesses.codex import CodexHarness, config_overrides
from agentswf.harnesses.codex_app import AppServer, AppServerError, read_tail, summary_in, usage_of
from agentswf.harnesses.jsonrpc import Answer, Failure, Notice, Request, Rpc

from .kit import alive


def test_requests_are_numbered_lines_without_a_jsonrpc_member():
    rpc = Rpc(marked=False)
    first, line = rpc.request("thread/fork", {"threadId": "t1"})
    second, _ = rpc.request("thread/fork", {"threadId": "t2"})
    assert (first, second) == (1, 2) and line.endswith(b"\n") and line.count(b"\n") == 1
    assert msgspec.json.decode(line) == {"id": 1, "method": "thread/fork", "params": {"threadId": "t1"}}
    assert msgspec.json.decode(rpc.notify("initialized")) == {"method": "initialized"}


READ = Rpc(marked=False).read


def test_what_the_server_writes_is_read_by_its_shape():
    assert READ(b'{"id":3,"result":{"thread":{"id":"x"}}}') == Answer(3, {"thread": {"id": "x"}})
    assert READ(b'{"id":3,"error":{"code":-1,"message":"no such thread"}}') == Failure(3, -1, "no such thread")
    assert READ(b'{"id":3,"error":"bare"}') == Failure(3, None, "an error with no message")
    assert READ(b'{"method":"turn/completed","params":{"threadId":"x"}}') == Notice("turn/completed", {"threadId": "x"})
    assert READ(b'{"id":"s1","method":"item/commandExecution/requestApproval"}') == Request(
        "s1", "item/commandExecution/requestApproval", {}
    )
    for junk in (b"not json", b"[1]", b'{"id":true,"result":{}}', b"{}", b"[" * 100_000):
        assert READ(junk) is None


def test_a_request_from_the_server_is_refused_by_its_id():
    server = AppServer(channel=None)  # type: ignore[arg-type]  # _serve is the pure part: no I/O
    refusal = server._serve(Request("s1", "item/fileChange/requestApproval", {}))
    assert refusal is not None and msgspec.json.decode(refusal) == {
        "id": "s1", "error": {"code": -32601, "message": "agentswf serves no item/fileChange/requestApproval"}}  # fmt: skip


@given(st.binary(max_size=300))
def test_no_line_makes_the_reader_raise(line):
    READ(line)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)))
def test_no_json_value_makes_the_reader_or_the_usage_raise(value):
    message = READ(msgspec.json.encode(value))
    if isinstance(message, Notice):
        usage_of(message)


def test_running_totals_take_only_counts():
    notice = Notice("thread/tokenUsage/updated", {"threadId": "t", "tokenUsage": {"total": {
        "inputTokens": 200, "outputTokens": -1, "cachedInputTokens": True, "cacheWriteInputTokens": 3}}})
    usage = usage_of(notice)
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (200, None, None, 3)


def test_the_runtimes_config_overrides_go_to_the_app_server_and_nothing_else():
    args = ("--full-auto", "-c", 'model_provider="x"', "--config=a.b=1", "--config", "c=2", "-c")
    assert config_overrides(args) == ["-c", 'model_provider="x"', "-c", "a.b=1", "-c", "c=2"]


def stand_in(tmp_path: Path, body: str) -> CodexHarness:
    script = tmp_path / "codex"
    script.write_text(f"#!/bin/sh\necho $$ >>{tmp_path}/pids\n{body}\n")
    script.chmod(0o755)
    return CodexHarness(str(script))


def operation(tmp_path: Path, kind: str) -> Operation:
    return Operation(agent="a", kind=kind, session="t-1", cwd=tmp_path, env=dict(os.environ), focus="FOCUS")  # type: ignore[arg-type]


INITIALIZED = 'read -r line; echo \'{"id":1,"result":{}}\'; read -r line\n'


@pytest.mark.anyio
@pytest.mark.parametrize(
    "body, said",
    [
        ('echo "no app-server here" >&2; exit 2', "ended before its answer to initialize: no app-server here"),
        (INITIALIZED + 'read -r line; echo \'{"id":2,"error":{"message":"no rollout found for t-1"}}\'; sleep 1000',
         "refused thread/fork: no rollout found for t-1"),
        (INITIALIZED + 'read -r line; echo \'{"id":2,"result":{"thread":{"id":"--model evil"}}}\'', "it named '--model evil'"),
        (INITIALIZED + 'read -r line; echo \'{"id":2,"result":{"thread":{"id":"t-1"}}}\'', "it named 't-1'"),
    ],
)
async def test_a_fork_the_app_server_fails_fails_saying_why(tmp_path, body, said):
    result = await stand_in(tmp_path, body).fork(operation(tmp_path, "fork"))
    assert result.ending.kind == "failed" and said in result.ending.reason and result.session is None
    assert [pid for pid in map(int, (tmp_path / "pids").read_text().split()) if alive(pid)] == []


@pytest.mark.anyio
async def test_a_server_that_closed_its_input_first_ends_saying_its_error_once_read_to_its_end(tmp_path):
    """Its input closed before the first request is written, its error written, its exit a while
    later: the request fails as a closed server's does, with the error read to its end first."""
    body = f'exec 0<&-; echo "no app-server here" >&2; touch {tmp_path}/closed; sleep 0.3; echo "gone" >&2'
    async with process.open_in_group(["sh", "-c", body], cwd=tmp_path, env=dict(os.environ)) as channel:
        while not (tmp_path / "closed").exists():
            await anyio.sleep(0.01)
        with pytest.raises(AppServerError, match="ended before its answer to initialize: no app-server here\ngone"):
            await AppServer(channel).start()


@pytest.mark.anyio
async def test_a_compaction_whose_turn_fails_fails_and_what_the_server_asks_is_refused(tmp_path):
    body = INITIALIZED + (
        'read -r line; echo \'{"id":2,"result":{"thread":{"id":"t-2"},"model":"m"}}\'\n'  # thread/fork: the copy
        'read -r line; echo \'{"id":3,"result":{}}\'\n'  # thread/inject_items
        'read -r line; echo \'{"id":"ask","method":"item/commandExecution/requestApproval","params":{}}\'\n'
        f'read -r answer; echo "$answer" >{tmp_path}/answer\n'
        'echo \'{"id":4,"result":{}}\'\n'  # thread/compact/start
        'echo \'{"method":"turn/completed","params":{"threadId":"t-1","turn":{"status":"completed"}}}\'\n'
        'echo \'{"method":"turn/completed","params":{"threadId":"t-2","turn":{"status":"failed","error":{"message":"HTTP 500"}}}}\'\n'
        "sleep 1000"
    )
    result = await stand_in(tmp_path, body).compact(operation(tmp_path, "compact"))
    assert result.ending.kind == "failed" and "ended 'failed': HTTP 500" in result.ending.reason
    assert result.session is None  # the agent's thread stays t-1, as it was
    assert msgspec.json.decode((tmp_path / "answer").read_text())["error"]["code"] == -32601
    assert [pid for pid in map(int, (tmp_path / "pids").read_text().split()) if alive(pid)] == []


def record(message: object) -> bytes:
    return msgspec.json.encode({"type": "compacted", "payload": {"message": message, "replacement_history": []}})


def test_the_summary_is_the_last_compactions_without_codexs_preamble():
    preamble = "Another language model started … use the information in this summary to assist with your own analysis:\n"
    tail = b"\n".join([
        b'cut off: the tail began mid-line "compacted"', record(preamble + "OLD"), record(preamble + "THE GIST"),
        msgspec.json.encode({"type": "event_msg", "payload": {"type": "compacted"}}), b"",
    ])
    assert summary_in(tail) == "THE GIST"
    assert summary_in(record("no preamble here")) == "no preamble here"
    assert summary_in(record(["not", "text"])) is None and summary_in(b"") is None


def test_the_rollout_is_read_only_as_a_regular_jsonl_file_and_never_blocks(tmp_path):
    rollout = tmp_path / "rollout.jsonl"
    rollout.write_bytes(b"x" * 10 + record("THE GIST"))
    assert read_tail(str(rollout)).endswith(record("THE GIST"))
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    assert read_tail(str(fifo)) == b""  # opened without blocking, and refused as no regular file
    assert read_tail("rollout.jsonl") == b"" and read_tail(str(tmp_path / "rollout.txt")) == b""
    assert read_tail(str(tmp_path / "missing.jsonl")) == b""
