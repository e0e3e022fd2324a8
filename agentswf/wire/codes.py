"""Every code a `wfa` answer can carry: one catalogue, typed, and which commands send which.

A refusal's code is what an agent's instructions, the reference's tables and the exit status key
on, so a code is a `Code`: a misspelt one is a type error, and a code the tables don't list fails
the test that walks docs/reference/wfa.md. It is not in `common.py` because that file must stay
free of imports (`typing` alone would cost the `wfa` client's start).
"""

from __future__ import annotations

from typing import Literal, TypeGuard, get_args

__all__ = [
    "BY_COMMAND",
    "CODES",
    "COMMON_CODES",
    "REPLY_CODES",
    "RESULT_CODES",
    "SEND_CODES",
    "TOOL_CODES",
    "TOOL_FAILURES",
    "WAITING_CODES",
    "Code",
    "is_code",
]

Code = Literal[
    # Any command.
    "invalid-request",
    "unsupported-version",
    "unsupported-command",
    "request-too-large",
    "internal-error",
    # wfa result, and wfa waiting but the first.
    "invalid-result",
    "unknown-operation",
    "wrong-agent",
    "expired-operation",
    "closed-operation",
    "owes-reply",
    "no-result",
    "tool-running",
    # wfa tool, refused; then how a call that ran ends when it did not return.
    "no-operation",
    "result-accepted",
    "tool-busy",
    "unknown-tool",
    "invalid-input",
    "denied",
    "rejected",
    "failed",
    "timed-out",
    # wfa send and wfa reply.
    "no-route",
    "peer-stopped",
    "closed",
    "too-large",
    "already-awaiting",
    "unsupported",
    "cycle",
    "limit",
    "inbox-full",
    "none-owed",
    "expired",
]
"""A refusal's (or a failed tool call's) code, as the run sends it."""

CODES: frozenset[Code] = frozenset(get_args(Code))

COMMON_CODES: tuple[Code, ...] = (
    "invalid-request",
    "unsupported-version",
    "unsupported-command",
    "request-too-large",
    "internal-error",
)
RESULT_CODES: tuple[Code, ...] = (
    "invalid-result",
    "unknown-operation",
    "wrong-agent",
    "expired-operation",
    "closed-operation",
    "owes-reply",
    "no-result",
    "tool-running",
)
WAITING_CODES: tuple[Code, ...] = tuple(code for code in RESULT_CODES if code != "invalid-result")
TOOL_CODES: tuple[Code, ...] = (
    "no-operation",
    "result-accepted",
    "tool-busy",
    "unknown-tool",
    "invalid-input",
    "denied",
    "rejected",
)
TOOL_FAILURES: tuple[Code, ...] = ("failed", "timed-out")
"""How a tool call that ran ends when it did not return: these print without "refused"."""
SEND_CODES: tuple[Code, ...] = (
    "no-operation",
    "no-route",
    "peer-stopped",
    "closed",
    "too-large",
    "already-awaiting",
    "unsupported",
    "cycle",
    "limit",
    "inbox-full",
)
REPLY_CODES: tuple[Code, ...] = (
    "no-operation",
    "none-owed",
    "expired",
    "closed",
    "too-large",
    "already-awaiting",
    "unsupported",
    "cycle",
    "limit",
)

BY_COMMAND: dict[str, tuple[Code, ...]] = {
    "result": RESULT_CODES,
    "waiting": WAITING_CODES,
    "tool": TOOL_CODES + TOOL_FAILURES,
    "peers": (),
    "send": SEND_CODES,
    "reply": REPLY_CODES,
}
"""The codes each command's own table lists; any command may also meet `COMMON_CODES`."""


def is_code(text: str) -> TypeGuard[Code]:
    """Whether `text`, read from somewhere untyped (a record, a struct's `str` field), is a code."""
    return text in CODES
