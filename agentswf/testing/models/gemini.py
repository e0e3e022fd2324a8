"""The Gemini API (`POST /v1beta/models/<model>:streamGenerateContent?alt=sse`): spoken by gemini.

A call of a tool is a model part `functionCall {name, args, id}`; its result comes back as a user
part `functionResponse {id, name, response}`. The stream is bare `data:` events, each a whole
`GenerateContentResponse` with `usageMetadata`; `:generateContent` answers the same in one body,
and `:countTokens` a count.
"""

from __future__ import annotations

import re
from typing import Any

from .script import Conversation, Reply, Text, user_words
from .sse import Usage, data_events, dumps, new_id

ROUTE = re.compile(r"/v1beta/models/([\w.\-]+):(streamGenerateContent|generateContent|countTokens)")

__all__ = ["ROUTE", "body", "conversation", "error", "events", "token_count"]


def conversation(body: dict[str, Any]) -> Conversation:
    """The state of the conversation in a Gemini request (its model is in the path, not the body)."""
    contents = body.get("contents") or []
    prompt, results = "", []
    for content in contents:
        parts = [part for part in (content.get("parts") or []) if isinstance(part, dict)]
        if content.get("role") != "user":
            continue
        for part in parts:
            if isinstance(part.get("functionResponse"), dict):
                response = part["functionResponse"].get("response")
                output = response.get("output", response) if isinstance(response, dict) else response
                results.append(output if isinstance(output, str) else dumps(output))
        words = user_words("\n".join(part["text"] for part in parts if isinstance(part.get("text"), str)))
        if words:
            prompt, results = words, []
    tools = [declared.get("name", "") for group in body.get("tools") or [] if isinstance(group, dict)
             for declared in group.get("functionDeclarations") or [] if isinstance(declared, dict)]  # fmt: skip
    return Conversation(dialect="gemini", model="", prompt=prompt, tool_results=tuple(results), tools=tuple(tools),
                        history=tuple(contents))  # fmt: skip


def _part(reply: Reply) -> dict[str, Any]:
    if isinstance(reply, Text):
        return {"text": reply.text}
    return {"functionCall": {"name": reply.name, "args": reply.arguments, "id": new_id("call_")}}


def body(reply: Reply, model: str, usage: Usage) -> dict[str, Any]:
    """One whole GenerateContentResponse."""
    return {
        "candidates": [{"content": {"role": "model", "parts": [_part(reply)]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": usage.input_tokens, "candidatesTokenCount": usage.output_tokens,
                          "totalTokenCount": usage.input_tokens + usage.output_tokens},
        "modelVersion": model,
    }  # fmt: skip


def events(reply: Reply, model: str, usage: Usage) -> bytes:
    """The streamed answer: one event carrying the whole reply, its finish reason and usage."""
    return data_events([body(reply, model, usage)])


def token_count(usage: Usage) -> dict[str, Any]:
    return {"totalTokens": usage.input_tokens}


def error(status: int, text: str) -> dict[str, Any]:
    kind = "INVALID_ARGUMENT" if 400 <= status < 500 else "INTERNAL"
    return {"error": {"code": status, "message": text, "status": kind}}
