"""OpenAI Chat Completions (`POST /v1/chat/completions`): spoken by pi's openai-completions.

Tool results come back as `role: "tool"` messages. pi asks for usage with
`stream_options.include_usage`, which arrives as a last chunk with no choices.
"""

from __future__ import annotations

from typing import Any

from .responses import error
from .script import Conversation, Reply, Text, user_words
from .sse import Usage, data_events, dumps, new_id

__all__ = ["body", "conversation", "error", "events"]


def conversation(body: dict[str, Any]) -> Conversation:
    """The state of the conversation in a Chat Completions request."""
    messages = body.get("messages") or []
    prompt, results = "", []
    for message in messages:
        if message.get("role") == "tool":
            results.append(_text_of(message.get("content")))
        elif message.get("role") == "user" and user_words(_text_of(message.get("content"))):
            prompt, results = user_words(_text_of(message.get("content"))), []
    return Conversation(
        dialect="chat",
        model=str(body.get("model", "")),
        prompt=prompt,
        tool_results=tuple(results),
        tools=tuple((tool.get("function") or tool).get("name", "") for tool in body.get("tools") or []),
        history=tuple(messages),
    )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def _message(reply: Reply) -> tuple[dict[str, Any], str]:
    if isinstance(reply, Text):
        return {"role": "assistant", "content": reply.text}, "stop"
    call = {"id": new_id("call_"), "type": "function",
            "function": {"name": reply.name, "arguments": dumps(reply.arguments)}}  # fmt: skip
    return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"


def _usage(usage: Usage) -> dict[str, int]:
    return {"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens}  # fmt: skip


def body(reply: Reply, model: str, usage: Usage) -> dict[str, Any]:
    """The whole completion: the non-streaming answer."""
    message, finish = _message(reply)
    return {"id": new_id("chatcmpl-"), "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": _usage(usage)}  # fmt: skip


def events(reply: Reply, model: str, usage: Usage) -> bytes:
    """The streamed answer: the message in one delta, the finish reason, usage, [DONE]."""
    message, finish = _message(reply)
    if "tool_calls" in message:
        message = {**message, "tool_calls": [{"index": 0, **message["tool_calls"][0]}]}
    head = {"id": new_id("chatcmpl-"), "object": "chat.completion.chunk", "created": 0, "model": model}
    return data_events([
        {**head, "choices": [{"index": 0, "delta": message, "finish_reason": None}]},
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        {**head, "choices": [], "usage": _usage(usage)},
        "[DONE]",
    ])  # fmt: skip
