"""One ACP turn as the client sees it, without I/O: the updates read, the permissions answered.

`Turn` is fed what the agent sends during an attempt (`session/update` notifications and its
requests) and keeps what the record needs: a transcript of the protocol (updates by kind, tool
calls, every permission request with its answer and why, every request refused), the text the
agent wrote, and the spend it reported on the way. What the agent sent before the prompt (a
`session/load`'s replay of the session's history) is the session's, not the turn's: only counted.
It decides each request of the agent's: a permission by `acp_rpc.choose`, anything else refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from .acp_rpc import Permissions, choose, command_of, cost_of, is_wfa_command, meta_usage
from .jsonrpc import Notice, Request
from .usage import Usage, add_usage, sound

MAX_TRANSCRIPT_ENTRIES = 2000  # a turn's protocol entries kept; past it, only counted
MAX_TEXT_CHARS = 16_000  # of the agent's messages, kept in the transcript
MAX_SAID_CHARS = 500  # of a title or a command, kept in the transcript
MAX_COMMAND_CHARS = 8192  # of a tool call's command kept to match a later permission against `wfa`; longer isn't `wfa`
MAX_TOOL_CALLS = 1000  # tool calls tracked in a turn (their titles and inputs, for a permission asked later)
WORKING_UPDATES = frozenset({"agent_message_chunk", "agent_thought_chunk", "tool_call", "tool_call_update", "plan"})


def _said(value: Any) -> str:
    return value[:MAX_SAID_CHARS] if isinstance(value, str) else ""


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class Turn:
    """What one attempt's agent said and asked, and what it was answered."""

    def __init__(self, launcher: str, permissions: Permissions, received: Callable[[], None] | None = None) -> None:
        self.launcher = launcher
        self.permissions = permissions
        self._received = received
        self.session: str | None = None  # the session the turn is in, once known: updates of others are not its
        self.prompting = False  # the prompt is sent: what the agent does from now is this turn's
        self.transcript: list[dict[str, Any]] = []
        self.dropped = 0  # entries past MAX_TRANSCRIPT_ENTRIES
        self.before_prompt = 0  # the session's updates read before the prompt was sent (a load's replay)
        self.text_chars = 0
        self.per_call: Usage | None = None  # the sum of each model call's own usage (qwen's `_meta.usage`)
        self.cost: float | None = None  # the last `usage_update` cost (opencode's: the session's running total)
        self._calls: dict[str, dict[str, Any]] = {}

    def _note(self, entry: dict[str, Any]) -> None:
        if len(self.transcript) < MAX_TRANSCRIPT_ENTRIES:
            self.transcript.append(entry)
        else:
            self.dropped += 1

    def notice(self, notice: Notice) -> None:
        """A notification: a `session/update` of the turn's session is kept; others are not the turn's."""
        update = notice.params.get("update")
        if notice.method != "session/update" or not isinstance(update, dict):
            return
        if self.session is not None and notice.params.get("sessionId") != self.session:
            return
        kind = update.get("sessionUpdate")
        if not isinstance(kind, str):
            return
        if not self.prompting:
            self.before_prompt += 1
            return
        if kind in WORKING_UPDATES and self._received is not None:
            self._received()  # the agent is at work on the prompt
            self._received = None
        if kind == "agent_message_chunk":
            self._message(update)
        elif kind in ("tool_call", "tool_call_update"):
            self._tool_call(kind, update)
        elif kind == "usage_update":
            self.cost = cost_of(update) if cost_of(update) is not None else self.cost
            self._note({"update": kind, "used": _count(update.get("used")), "size": _count(update.get("size")), "cost": self.cost})
        elif not self.transcript or self.transcript[-1].get("update") != kind:
            self._note({"update": kind})  # one entry for a run of the same kind (thoughts, commands)

    def _message(self, update: dict[str, Any]) -> None:
        self.per_call = add_usage(self.per_call, sound(meta_usage(update)))
        content = update.get("content")
        text = content.get("text") if isinstance(content, dict) and content.get("type") == "text" else None
        if not isinstance(text, str) or not text:
            return
        text = text[: max(0, MAX_TEXT_CHARS - self.text_chars)]
        self.text_chars += len(text)
        last = self.transcript[-1] if self.transcript else None
        if last is not None and last.get("update") == "agent_message_chunk":
            last["text"] += text
        elif text:
            self._note({"update": "agent_message_chunk", "text": text})

    def _tool_call(self, kind: str, update: dict[str, Any]) -> None:
        key = update.get("toolCallId")
        if not isinstance(key, str):
            return
        said = {name: update[name] for name in ("title", "kind", "status") if isinstance(update.get(name), str)}
        known = self._calls.get(key, {})
        merged = {**known, **{name: value[:MAX_SAID_CHARS] for name, value in said.items()}}
        if "rawInput" in update or "title" in said:  # what it runs, from this update's own (whole) words
            found = command_of({"kind": known.get("kind"), **said, "rawInput": update.get("rawInput")})
            if found is not None:
                merged["command"] = found if len(found) <= MAX_COMMAND_CHARS else ""  # "": too long to be `wfa`
        if key in self._calls or len(self._calls) < MAX_TOOL_CALLS:
            self._calls[key] = merged  # bounded: its words cut, its input not kept
        entry = {"update": kind, "toolCallId": _said(key), "title": merged.get("title"), "kind": merged.get("kind"),
                 "status": merged.get("status")}  # fmt: skip
        self._note({name: value for name, value in entry.items() if value})

    def request(self, request: Request) -> dict[str, Any] | None:
        """The result answering the agent's `request`: a permission decided; None for anything else (refused).

        The tool call is the request's own `toolCall` over what its updates said before; its kind and
        title are matched whole. A permission is what an honest CLI asks before its model's tool runs:
        a hostile agent's process runs what it likes, unasked (the keeper and the sandbox bound it)."""
        if request.method != "session/request_permission":
            self._note({"refused": _said(request.method)})
            return None
        asked = request.params.get("toolCall")
        asked = asked if isinstance(asked, dict) else {}
        key = asked.get("toolCallId")
        known = self._calls.get(key, {}) if isinstance(key, str) else {}
        kind: str = _text(asked.get("kind")) or _text(known.get("kind")) or "other"
        title: str = _text(asked.get("title")) or _text(known.get("title")) or ""
        # what it runs: the request's own input, else what its updates said, else its own title (gemini's)
        raw = command_of({"rawInput": asked.get("rawInput")})
        own = command_of({"kind": kind, "title": asked.get("title")})
        command = raw if raw is not None else known["command"] if "command" in known else own
        if command is not None and is_wfa_command(command, self.launcher):
            allow, why = True, "the agent's wfa"
        elif self.permissions.allows(kind, title):
            allow, why = True, "allowed by the runtime's permissions"
        else:
            allow, why = False, "not allowed by the runtime's permissions"
        answer = choose(request.params.get("options"), allow)
        outcome = answer["outcome"]
        chosen = outcome.get("optionId") and ("allow_once" if allow else "reject_once")
        entry = {"permission": _said(key), "kind": _said(kind), "title": _said(title), "command": _said(command),
                 "answer": chosen or outcome["outcome"], "why": why}  # fmt: skip
        self._note({name: value for name, value in entry.items() if value})
        return answer

    def record(self) -> str:
        """The transcript as JSON lines: the updates before the prompt counted in a first entry, those
        past the limit in a last one."""
        entries = [{"before_prompt": self.before_prompt}] if self.before_prompt else []
        entries += self.transcript + ([{"dropped": self.dropped}] if self.dropped else [])
        return "".join(msgspec.json.encode(entry).decode() + "\n" for entry in entries)
