"""pi (`pi`) headless: `pi --mode json <prompt>`, resumed by session id from the agent's cwd.

pi exits 0 even when the model's API failed, so the ending is read from its last
assistant message (`stopReason`), never from the exit status alone.
"""

from __future__ import annotations

from typing import Any

from .base import Attempt
from .cli import CliHarness, OutputReader
from .usage import Usage, add_usage


class PiReader(OutputReader):
    """JSON lines: a `session` line first, `message_end` per message (with usage), `agent_end` last."""

    def event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "session":
            self.session = event.get("id") or self.session
        elif kind == "message_end":
            message = event.get("message") or {}
            usage = message.get("usage")
            if isinstance(usage, dict):
                cost = usage.get("cost")
                self.usage = add_usage(
                    self.usage,
                    Usage(
                        input_tokens=usage.get("input"),
                        output_tokens=usage.get("output"),
                        cache_read_tokens=usage.get("cacheRead"),
                        cache_write_tokens=usage.get("cacheWrite"),
                        cost_usd=cost.get("total") if isinstance(cost, dict) else None,
                    ),
                )
            if message.get("role") == "assistant":
                self.model = message.get("model") or self.model
                if message.get("stopReason") == "error":
                    self.error = message.get("errorMessage") or "the model's API failed"
                    self.retryable = True
                else:
                    self.error = None
        elif kind == "agent_end":
            self.finished = True


class PiHarness(CliHarness):
    name = "pi"
    executable_name = "pi"
    install = "npm install -g @mariozechner/pi-coding-agent@0.73.1"
    login_hint = "Run `pi`, then /login, or set the provider's API key in the runtime's env."

    def argv(self, attempt: Attempt) -> list[str]:
        argv = [self.executable, "--mode", "json"]
        if attempt.session:
            argv += ["--session", attempt.session]
        if self.model:
            argv += ["--model", self.model]
        if self.effort:
            argv += ["--thinking", self.effort]
        return argv + list(self.args) + [attempt.prompt]

    def stdin(self, attempt: Attempt) -> bytes:
        return b""  # the prompt is the last argument; pi reads no standard input in json mode

    def reader(self, attempt: Attempt) -> PiReader:
        return PiReader()
