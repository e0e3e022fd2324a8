"""Anthropic Messages (`POST /v1/messages`): spoken by claude, and by pi's anthropic-messages.

Claude sends `role: "system"` messages inside `messages` (an environment update after a
resume from another cwd), and puts `<system-reminder>` text blocks next to the prompt
and the tool results, so neither "the last message" nor "the last text block" is
reliably the user's words.
"""

from __future__ import annotations

from typing import Any

from .script import Conversation, Reply, Text, user_words
from .sse import Usage, dumps, named_events, new_id

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                529: "overloaded_error"}  # fmt: skip


def conversation(body: dict[str, Any]) -> Conversation:
    """The state of the conversation in a Messages request."""
    prompt, results = "", []
    messages = body.get("messages") or []
    for message in messages:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        words = []
        for block in blocks:
            if block.get("type") == "tool_result":
                results.append(_text_of(block.get("content")))
            elif block.get("type") == "text" and user_words(block.get("text", "")):
                words.append(user_words(block["text"]))
        if words:
            prompt, results = "\n".join(words), []
    return Conversation(
        dialect="anthropic",
        model=str(body.get("model", "")),
        prompt=prompt,
        tool_results=tuple(results),
        tools=tuple(tool["name"] for tool in body.get("tools") or [] if "name" in tool),
        history=tuple(messages),
    )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content or [] if isinstance(block, dict))


def body(reply: Reply, model: str, usage: Usage) -> dict[str, Any]:
    """The whole assistant message: the non-streaming answer."""
    if isinstance(reply, Text):
        block: dict[str, Any] = {"type": "text", "text": reply.text}
    else:
        block = {"type": "tool_use", "id": new_id("toolu_"), "name": reply.name, "input": reply.arguments}
    return {
        "id": new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [block],
        "stop_reason": "end_turn" if isinstance(reply, Text) else "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
    }


def events(reply: Reply, model: str, usage: Usage) -> bytes:
    """The streamed answer: message_start, one content block, message_delta, message_stop."""
    whole = body(reply, model, usage)
    block = whole["content"][0]
    if block["type"] == "text":
        start, delta = {**block, "text": ""}, {"type": "text_delta", "text": block["text"]}
    else:
        start, delta = {**block, "input": {}}, {"type": "input_json_delta", "partial_json": dumps(block["input"])}
    opening = {**whole, "content": [], "stop_reason": None,
               "usage": {"input_tokens": usage.input_tokens, "output_tokens": 1}}  # fmt: skip
    return named_events([
        {"type": "message_start", "message": opening},
        {"type": "content_block_start", "index": 0, "content_block": start},
        {"type": "content_block_delta", "index": 0, "delta": delta},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
         "usage": {"output_tokens": usage.output_tokens}},
        {"type": "message_stop"},
    ])  # fmt: skip


def token_count(usage: Usage) -> dict[str, Any]:
    """The answer to `POST /v1/messages/count_tokens`: the configured input size."""
    return {"input_tokens": usage.input_tokens}


def error(status: int, text: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": _ERROR_TYPES.get(status, "api_error"), "message": text}}
