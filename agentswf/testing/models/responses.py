"""OpenAI Responses (`POST /v1/responses`): spoken by codex, and by pi's openai-responses.

Codex sends its system prompt as `developer` messages and an `<environment_context>`
user message before the prompt. It needs `response.completed` to end the stream; the
other events are sent too, since pi's SDK builds its message from the deltas.
"""

from __future__ import annotations

from typing import Any

from .script import Conversation, Reply, Text, user_words
from .sse import Usage, dumps, named_events, new_id

_TOOL_OUTPUTS = ("function_call_output", "custom_tool_call_output")


def conversation(body: dict[str, Any]) -> Conversation:
    """The state of the conversation in a Responses request."""
    items = body.get("input") or []
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    prompt, results = "", []
    for item in items:
        if item.get("type") in _TOOL_OUTPUTS:
            results.append(_text_of(item.get("output")))
        elif item.get("type", "message") == "message" and item.get("role") == "user":
            words = user_words(_text_of(item.get("content")))
            if words:
                prompt, results = words, []
    return Conversation(
        dialect="responses",
        model=str(body.get("model", "")),
        prompt=prompt,
        tool_results=tuple(results),
        tools=tuple(tool.get("name") or tool.get("type", "") for tool in body.get("tools") or []),
        history=tuple(items),
    )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def _item(reply: Reply) -> dict[str, Any]:
    if isinstance(reply, Text):
        return {"type": "message", "id": new_id("msg_"), "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}]}  # fmt: skip
    return {"type": "function_call", "id": new_id("fc_"), "status": "completed", "call_id": new_id("call_"),
            "name": reply.name, "arguments": dumps(reply.arguments)}  # fmt: skip


def body(reply: Reply, model: str, usage: Usage, item: dict[str, Any] | None = None) -> dict[str, Any]:
    """The whole response object: the non-streaming answer, and `response.completed`'s."""
    return {
        "id": new_id("resp_"),
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": model,
        "output": [item or _item(reply)],
        "usage": {
            "input_tokens": usage.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.input_tokens + usage.output_tokens,
        },
    }


def events(reply: Reply, model: str, usage: Usage) -> bytes:
    """The streamed answer: created, one output item built by deltas, completed."""
    item = _item(reply)
    whole = body(reply, model, usage, item)
    opening = {**whole, "status": "in_progress", "output": [], "usage": None}
    at = {"output_index": 0, "item_id": item["id"]}
    empty: dict[str, Any] = {"content": []} if item["type"] == "message" else {"arguments": ""}
    started = {**item, "status": "in_progress", **empty}
    added = {"type": "response.output_item.added", "output_index": 0, "item": started}
    if item["type"] == "message":
        part = item["content"][0]
        building = [
            added,
            {"type": "response.content_part.added", **at, "content_index": 0, "part": {**part, "text": ""}},
            {"type": "response.output_text.delta", **at, "content_index": 0, "delta": part["text"]},
            {"type": "response.output_text.done", **at, "content_index": 0, "text": part["text"]},
            {"type": "response.content_part.done", **at, "content_index": 0, "part": part},
        ]  # fmt: skip
    else:
        building = [
            added,
            {"type": "response.function_call_arguments.delta", **at, "delta": item["arguments"]},
            {"type": "response.function_call_arguments.done", **at, "arguments": item["arguments"]},
        ]  # fmt: skip
    sequence = [
        {"type": "response.created", "response": opening},
        {"type": "response.in_progress", "response": opening},
        *building,
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": whole},
    ]
    return named_events({**event, "sequence_number": n} for n, event in enumerate(sequence))


def error(status: int, text: str) -> dict[str, Any]:
    kind = "invalid_request_error" if 400 <= status < 500 else "server_error"
    return {"error": {"message": text, "type": kind, "param": None, "code": None}}
