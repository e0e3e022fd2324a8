"""Codex (`codex`) headless: `codex exec --json`, the prompt on standard input, resumed by thread id."""

from __future__ import annotations

from typing import Any

from .base import Attempt
from .cli import CliHarness, OutputReader
from .usage import Usage, add_usage


class CodexReader(OutputReader):
    """JSON lines: `thread.started` with the thread id, items, then `turn.completed` or `turn.failed`."""

    def event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "thread.started":
            self.session = event.get("thread_id") or self.session
        elif kind == "turn.completed":
            self.finished = True
            usage = event.get("usage") or {}
            self.usage = add_usage(
                self.usage,
                Usage(
                    input_tokens=usage.get("input_tokens"),
                    output_tokens=usage.get("output_tokens"),
                    cache_read_tokens=usage.get("cached_input_tokens"),
                    cache_write_tokens=usage.get("cache_write_input_tokens"),
                ),
            )
        elif kind == "turn.failed":
            self.finished = True
            error = event.get("error") or {}
            self.error = error.get("message") if isinstance(error, dict) else str(error)
            self.retryable = True


class CodexHarness(CliHarness):
    name = "codex"
    executable_name = "codex"
    install = "npm install -g @openai/codex@0.171.0"
    login_hint = "Run `codex login`, or configure a model provider with its API key in the runtime's env."
    # `codex exec resume` reports the whole thread's tokens in its turn.completed
    session_totals = frozenset({"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"})
    input_counts_cache_reads = True  # it prints no dollars: its tokens are priced, the cached part as cache reads

    def argv(self, attempt: Attempt) -> list[str]:
        # Its own sandbox would block the agent's socket: the run decides where agents may reach.
        argv = [self.executable, "exec"]
        if attempt.session:
            argv += ["resume", attempt.session]
        argv += ["--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
        if self.model:
            argv += ["--model", self.model]
        if self.effort:
            argv += ["-c", f'model_reasoning_effort="{self.effort}"']
        return argv + list(self.args) + ["-"]

    def reader(self, attempt: Attempt) -> CodexReader:
        return CodexReader()
