"""The scripted model server, driven over raw sockets in each dialect the CLIs speak."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

from agentswf.errors import TestScriptError
from agentswf.testing.models import Conversation, ScriptedModel, Shell, Text, Tool, http, steps
from agentswf.testing.models.http import MAX_BODY_BYTES, MAX_LINE_BYTES

from .rawhttp import Answer, call, encode, exchange

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class Wire:
    """How to build a request in one dialect, and read the reply back."""

    name: str
    path: str
    body: Callable[[str, list[str], list[str], bool], dict[str, Any]]
    call: Callable[[Answer], tuple[str, dict[str, Any]]]  # streamed tool call: name, arguments
    text: Callable[[Answer], str]  # streamed final text
    usage: Callable[[Answer], tuple[int, int]]  # streamed usage: input, output


def _anthropic_body(prompt: str, tools: list[str], results: list[str], stream: bool) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>\nignore me\n</system-reminder>"},
        {"type": "text", "text": prompt},
    ]}, {"role": "system", "content": "# Environment update"}]  # fmt: skip
    for n, result in enumerate(results):
        call_ = {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {}}
        messages.append({"role": "assistant", "content": [call_]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{n}", "content": [{"type": "text", "text": result}]},
            {"type": "text", "text": "<system-reminder>also not the user</system-reminder>"},
        ]})  # fmt: skip
    return {"model": "claude-test", "max_tokens": 1000, "stream": stream, "messages": messages,
            "system": [{"type": "text", "text": "You are a test."}],
            "tools": [{"name": tool, "input_schema": {"type": "object"}} for tool in tools]}  # fmt: skip


def _responses_body(prompt: str, tools: list[str], results: list[str], stream: bool) -> dict[str, Any]:
    def message(role: str, text: str) -> dict[str, Any]:
        return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}

    items = [
        message("developer", "You are Codex."),
        message("user", "<environment_context>\n<cwd>/x</cwd>\n</environment_context>"),
        message("user", prompt),
    ]
    for n, result in enumerate(results):
        items.append({"type": "function_call", "call_id": f"c{n}", "name": "exec_command", "arguments": "{}"})
        items.append({"type": "function_call_output", "call_id": f"c{n}", "output": result})
    offered = [{"type": "function", "name": tool, "parameters": {}} for tool in tools] + [{"type": "web_search"}]
    return {"model": "gpt-test", "stream": stream, "input": items, "tools": offered}


def _chat_body(prompt: str, tools: list[str], results: list[str], stream: bool) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are pi."},
        {"role": "user", "content": prompt},
    ]
    for n, result in enumerate(results):
        call_ = {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call_]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": result})
    offered = [{"type": "function", "function": {"name": tool, "parameters": {}}} for tool in tools]
    return {"model": "fake-model", "stream": stream, "stream_options": {"include_usage": True},
            "messages": messages, "tools": offered}  # fmt: skip


def _of_type(answer: Answer, kind: str) -> dict[str, Any]:
    return next(event for event in answer.events() if event["type"] == kind)


DIALECTS = [
    Wire(
        "anthropic",
        "/v1/messages?beta=true",
        _anthropic_body,
        call=lambda a: (
            _of_type(a, "content_block_start")["content_block"]["name"],
            json.loads(_of_type(a, "content_block_delta")["delta"]["partial_json"]),
        ),
        text=lambda a: _of_type(a, "content_block_delta")["delta"]["text"],
        usage=lambda a: (
            _of_type(a, "message_start")["message"]["usage"]["input_tokens"],
            _of_type(a, "message_delta")["usage"]["output_tokens"],
        ),
    ),
    Wire(
        "responses",
        "/v1/responses",
        _responses_body,
        call=lambda a: (
            (item := _of_type(a, "response.output_item.done")["item"])["name"],
            json.loads(item["arguments"]),
        ),
        text=lambda a: _of_type(a, "response.output_item.done")["item"]["content"][0]["text"],
        usage=lambda a: (
            (usage := _of_type(a, "response.completed")["response"]["usage"])["input_tokens"],
            usage["output_tokens"],
        ),
    ),
    Wire(
        "chat",
        "/v1/chat/completions",
        _chat_body,
        call=lambda a: (
            (function := a.events()[0]["choices"][0]["delta"]["tool_calls"][0]["function"])["name"],
            json.loads(function["arguments"]),
        ),
        text=lambda a: a.events()[0]["choices"][0]["delta"]["content"],
        usage=lambda a: (a.events()[-2]["usage"]["prompt_tokens"], a.events()[-2]["usage"]["completion_tokens"]),
    ),
]
by_dialect = pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
PLAN = steps(Shell("echo hello > out.txt"), Text("all done"))


@by_dialect
@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("Bash", {"command": "echo hello > out.txt"}),
        ("bash", {"command": "echo hello > out.txt"}),
        ("exec_command", {"cmd": "echo hello > out.txt"}),
        ("shell_command", {"command": "echo hello > out.txt"}),
        ("shell", {"command": ["bash", "-lc", "echo hello > out.txt"]}),
    ],
)
async def test_shell_becomes_a_call_of_the_offered_shell_tool(dialect: Wire, tool: str, arguments: dict) -> None:
    async with ScriptedModel(PLAN) as model:
        answer = await call(model.port, "POST", dialect.path, dialect.body("write it", ["read", tool], [], True))
    assert answer.status == 200
    assert answer.headers["content-type"] == "text/event-stream"
    assert dialect.call(answer) == (tool, arguments)
    assert dialect.usage(answer) == (100, 20)
    [seen] = model.requests
    assert seen.dialect == dialect.name
    assert seen.conversation is not None
    assert (seen.conversation.prompt, seen.conversation.tool_results) == ("write it", ())
    assert seen.conversation.tools[:2] == ("read", tool)


@by_dialect
async def test_after_a_tool_result_the_plan_moves_on_and_reports_the_configured_usage(dialect: Wire) -> None:
    async with ScriptedModel(PLAN, input_tokens=7, output_tokens=3) as model:
        answer = await call(model.port, "POST", dialect.path, dialect.body("write it", ["bash"], ["hello\n"], True))
    assert dialect.text(answer) == "all done"
    assert dialect.usage(answer) == (7, 3)
    conv = model.requests[0].conversation
    assert conv is not None
    assert (conv.prompt, conv.tool_results) == ("write it", ("hello\n",))
    assert model.requests[0].reply == Text("all done")


@by_dialect
async def test_a_new_user_text_starts_the_plan_again(dialect: Wire) -> None:
    body = dialect.body("first", ["bash"], ["out 1"], True)
    key = "messages" if "messages" in body else "input"
    body[key].append([item for item in dialect.body("second", [], [], True)[key] if item["role"] == "user"][-1])
    async with ScriptedModel(PLAN) as model:
        answer = await call(model.port, "POST", dialect.path, body)
    assert dialect.call(answer)[0] == "bash"
    conv = model.requests[0].conversation
    assert conv is not None
    assert (conv.prompt, conv.tool_results, conv.history) == ("second", (), tuple(body[key]))


@by_dialect
async def test_a_non_streaming_call_gets_the_whole_reply_as_json(dialect: Wire) -> None:
    async with ScriptedModel(lambda conv: Text(f"echo: {conv.prompt}")) as model:
        answer = await call(model.port, "POST", dialect.path, dialect.body("hi", [], [], False))
    assert answer.status == 200
    assert answer.headers["content-type"] == "application/json"
    whole = answer.json()
    text = {
        "anthropic": lambda: whole["content"][0]["text"],
        "responses": lambda: whole["output"][0]["content"][0]["text"],
        "chat": lambda: whole["choices"][0]["message"]["content"],
    }[dialect.name]()
    assert text == "echo: hi"


@by_dialect
@pytest.mark.parametrize("status", [500, 400])
async def test_fail_status_answers_every_model_call_with_an_error_in_the_dialect(dialect: Wire, status: int) -> None:
    async with ScriptedModel(PLAN, fail_status=status) as model:
        answer = await call(model.port, "POST", dialect.path, dialect.body("hi", ["bash"], [], True))
    assert answer.status == status
    error = answer.json()["error"]
    assert "scripted failure" in error["message"]
    if dialect.name == "anthropic":
        assert answer.json()["type"] == "error"
        assert error["type"] == {500: "api_error", 400: "invalid_request_error"}[status]
    assert model.requests[0].status == status
    assert model.requests[0].reply is None


async def test_anthropic_count_tokens_answers_the_configured_input_size() -> None:
    async with ScriptedModel(PLAN, input_tokens=42) as model:
        answer = await call(model.port, "POST", "/v1/messages/count_tokens?beta=true", {"messages": []})
    assert (answer.status, answer.json()) == (200, {"input_tokens": 42})


async def test_anthropic_stream_is_the_full_event_sequence() -> None:
    async with ScriptedModel(PLAN) as model:
        answer = await call(model.port, "POST", "/v1/messages", _anthropic_body("go", ["Bash"], [], True))
    assert answer.event_names() == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert _of_type(answer, "message_delta")["delta"]["stop_reason"] == "tool_use"
    assert model.requests[0].query == ""


async def test_responses_stream_ends_with_response_completed_and_counts_its_events() -> None:
    async with ScriptedModel(lambda conv: Text("done")) as model:
        answer = await call(model.port, "POST", "/v1/responses", {"model": "m", "stream": True, "input": "hi"})
    events = answer.events()
    assert events[-1]["type"] == "response.completed"
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    assert model.requests[0].conversation.prompt == "hi"  # type: ignore[union-attr]
    assert _of_type(answer, "response.output_item.done")["item"]["content"][0]["text"] == "done"


async def test_chat_stream_ends_with_a_usage_chunk_and_done() -> None:
    async with ScriptedModel(PLAN) as model:
        answer = await call(model.port, "POST", "/v1/chat/completions", _chat_body("go", ["bash"], [], True))
    events = answer.events()
    assert events[-1] == "[DONE]"
    assert events[-2]["choices"] == []
    assert events[1]["choices"][0]["finish_reason"] == "tool_calls"


async def test_an_async_script_is_awaited() -> None:
    async def script(conv: Conversation) -> Text:
        return Text(f"{conv.dialect} {len(conv.history)}")

    async with ScriptedModel(script) as model:
        answer = await call(model.port, "POST", "/v1/chat/completions", _chat_body("go", [], [], True))
    assert answer.events()[0]["choices"][0]["delta"]["content"] == "chat 2"


async def test_a_tool_step_calls_any_tool_with_its_arguments() -> None:
    async with ScriptedModel(lambda conv: Tool("read", {"path": "a.txt"})) as model:
        answer = await call(model.port, "POST", "/v1/responses", _responses_body("go", ["read"], [], True))
    assert DIALECTS[1].call(answer) == ("read", {"path": "a.txt"})


async def test_a_chunked_gzip_body_is_read() -> None:
    async with ScriptedModel(PLAN) as model:
        body = _chat_body("x" * 5000, ["bash"], ["ok"], True)
        answer = await call(model.port, "POST", "/v1/chat/completions", body, chunked=True, gzipped=True)
    assert answer.status == 200
    assert model.requests[0].body == body


async def test_expect_100_continue_is_answered_before_the_body() -> None:
    async with ScriptedModel(PLAN) as model:
        answer = await call(model.port, "POST", "/v1/messages/count_tokens", {}, headers={"Expect": "100-continue"})
    assert answer.status == 100
    assert b"HTTP/1.1 200 OK" in answer.body


async def test_models_are_listed() -> None:
    async with ScriptedModel(PLAN) as model:
        answer = await call(model.port, "GET", "/v1/models")
    assert answer.status == 200
    assert [entry["id"] for entry in answer.json()["data"]] == ["fake-model"]


async def test_any_other_request_gets_404_and_is_logged() -> None:
    async with ScriptedModel(PLAN) as model:
        head = await call(model.port, "HEAD", "/api/hello")
        get = await call(model.port, "GET", "/v1/responses")
    assert (head.status, head.body, get.status) == (404, b"", 404)
    assert [(r.method, r.path, r.status, r.dialect) for r in model.requests] == [
        ("HEAD", "/api/hello", 404, None),
        ("GET", "/v1/responses", 404, None),
    ]


async def test_a_body_that_is_not_json_gets_400_in_the_dialect() -> None:
    async with ScriptedModel(PLAN) as model:
        answer = await call(model.port, "POST", "/v1/messages", b"{not json")
    assert answer.status == 400
    assert answer.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"NONSENSE\r\n\r\n", 400),
        (b"GET /" + b"x" * MAX_LINE_BYTES + b" HTTP/1.1\r\n\r\n", 431),
        (f"POST /v1/messages HTTP/1.1\r\nContent-Length: {MAX_BODY_BYTES + 1}\r\n\r\n".encode(), 413),
        (b"POST /v1/messages HTTP/1.1\r\nContent-Length: 10\r\n\r\nshort", 400),
        (b"POST /v1/messages HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        (encode("POST", "/v1/messages", b"{}", headers={"Content-Encoding": "zstd"}), 415),
    ],
    ids=["request-line", "long-line", "too-large", "cut-short", "bad-chunk", "zstd"],
)
async def test_an_unreadable_request_gets_an_error_status(request_bytes: bytes, status: int) -> None:
    async with ScriptedModel(PLAN) as model:
        answer = await exchange(model.port, request_bytes, half_close=True)
    assert answer.status == status
    assert model.requests == []


@pytest.mark.virtual_time
async def test_a_request_that_dawdles_gets_408() -> None:
    async with ScriptedModel(PLAN) as model:
        started = anyio.current_time()
        with anyio.fail_after(http.REQUEST_TIMEOUT_SECONDS + 1):
            answer = await exchange(model.port, b"POST /v1/messages HTTP/1.1\r\nContent-Length: 10\r\n\r\n")
    assert answer.status == 408
    assert anyio.current_time() - started == pytest.approx(http.REQUEST_TIMEOUT_SECONDS, abs=0.1)


async def test_a_script_that_raises_gets_500_and_fails_the_block() -> None:
    def script(conv: Conversation) -> Text:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        async with ScriptedModel(script) as model:
            answer = await call(model.port, "POST", "/v1/messages", _anthropic_body("go", [], [], True))
            assert answer.status == 500
            assert "boom" in answer.json()["error"]["message"]
            assert model.requests[0].status == 500


async def test_shell_without_a_shell_tool_offered_fails_the_block() -> None:
    with pytest.raises(TestScriptError, match="offered no shell tool"):
        async with ScriptedModel(PLAN) as model:
            answer = await call(model.port, "POST", "/v1/chat/completions", _chat_body("go", ["read"], [], True))
            assert answer.status == 500


def _conv(results: int) -> Conversation:
    return Conversation("chat", "m", "go", tuple(str(n) for n in range(results)), ("bash",), ())


def test_steps_plays_the_kth_step_after_k_tool_results_then_ends_with_text() -> None:
    script = steps(Shell("a"), Shell("b"))
    assert [script(_conv(k)) for k in range(4)] == [Shell("a"), Shell("b"), Text("done"), Text("done")]
    assert steps(Shell("a"), Text("bye"))(_conv(5)) == Text("bye")
