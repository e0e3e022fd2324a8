"""The requests `wfa` sends and the one response each gets, as msgspec Structs.

A request is tagged by its ``command``; every request carries the wire ``version``.
A response carries what the client prints and the exit status it exits with, so the
client stays a dumb pipe, plus the refusal ``code`` and a structured ``value`` for code
that reads it (the scripted agents of ``agentswf.testing``).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from .codes import TOOL_FAILURES, Code
from .common import WIRE_VERSION, exit_code

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
TimeoutMs = Annotated[int, msgspec.Meta(gt=0)]


class _Request(msgspec.Struct, tag_field="command", forbid_unknown_fields=True, frozen=True):
    version: int


class ResultRequest(_Request, tag="result", frozen=True):
    """`wfa result <call-id> [flags…]`, or with JSON on standard input."""

    call_id: Name
    args: list[str] = []
    input: str | None = None


class ToolRequest(_Request, tag="tool", frozen=True):
    """`wfa tool <name> [flags…]`, or with JSON on standard input."""

    name: Name
    args: list[str] = []
    input: str | None = None


class WaitingRequest(_Request, tag="waiting", frozen=True):
    """`wfa waiting <call-id> --reason <text> [--timeout <duration>]`."""

    call_id: Name
    reason: str
    timeout_ms: TimeoutMs | None = None


class PeersRequest(_Request, tag="peers", frozen=True):
    """`wfa peers [--json]`."""

    json: bool = False


class SendRequest(_Request, tag="send", frozen=True):
    """`wfa send [--await-reply [--timeout <duration>]] <peer> <message>`."""

    peer: Name
    message: str
    await_reply: bool = False
    timeout_ms: TimeoutMs | None = None


class ReplyRequest(_Request, tag="reply", frozen=True):
    """`wfa reply [--await-reply [--timeout <duration>]] <peer> <message>`."""

    peer: Name
    message: str
    await_reply: bool = False
    timeout_ms: TimeoutMs | None = None


Request = ResultRequest | ToolRequest | WaitingRequest | PeersRequest | SendRequest | ReplyRequest


class Response(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """One answer: what to print, the exit status, and the code and value behind them."""

    version: int
    exit: int
    code: Code | None = None
    stdout: str = ""
    stderr: str = ""
    value: Any = None
    error: str = ""  # a refusal's or failure's message alone, for code that reads it

    @property
    def ok(self) -> bool:
        return self.code is None


def accepted(command: str, *, stdout: str = "", stderr: str = "", value: Any = None) -> Response:
    """A command that did what it was asked."""
    return Response(WIRE_VERSION, exit_code(command, None), None, stdout, stderr, value)


def refused(command: str, code: Code, message: str, *, notice: str = "") -> Response:
    """A command refused (or a tool call that failed) with `code`; `message` says what to do."""
    text = f"wfa: {command} refused ({code}): {message}"
    if code in TOOL_FAILURES:
        text = f"wfa: {command} {code}: {message}"
    return Response(
        WIRE_VERSION,
        exit_code(command, code),
        code,
        "",
        notice + text.rstrip("\n") + "\n",
        None,
        message,
    )
