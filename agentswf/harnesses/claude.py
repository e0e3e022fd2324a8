"""Claude Code (`claude`) headless: `claude -p`, stream-json output, resumed by session id."""

from __future__ import annotations

import os
import uuid
from typing import Any

from .base import Attempt, AttemptEnding, Operation, OperationResult
from .cli import CliHarness, OutputReader
from .usage import Usage
from .versions import install_command

RETRYABLE_STATUSES = (408, 429, 500, 502, 503, 504, 529)
CALLING_SESSION_VARIABLES = ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT")


class ClaudeReader(OutputReader):
    """stream-json: an init line with the session id, then messages, then one `result` line."""

    def event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            self.session = event.get("session_id") or self.session
            self.model = event.get("model") or self.model
        elif kind == "system" and event.get("subtype") == "api_retry":  # its model unreachable, retrying
            status = event.get("error_status")
            self.noted(f"API retry {event.get('attempt')}/{event.get('max_retries')}: {event.get('error')}"
                       + (f" (HTTP {status})" if status else ""))  # fmt: skip
        elif kind == "result":
            self.finished = True
            self.session = event.get("session_id") or self.session
            usage = event.get("usage") or {}
            self.usage = Usage(
                input_tokens=usage.get("input_tokens"),
                output_tokens=usage.get("output_tokens"),
                cache_read_tokens=usage.get("cache_read_input_tokens"),
                cache_write_tokens=usage.get("cache_creation_input_tokens"),
                cost_usd=event.get("total_cost_usd"),
            )
            if event.get("is_error"):  # `subtype` still says success: is_error is what counts
                status = event.get("api_error_status")
                text = event.get("result") or event.get("terminal_reason") or "an error"
                self.error = f"{text} (HTTP {status})" if status else str(text)
                self.retryable = status in RETRYABLE_STATUSES
                if status in (401, 403):
                    self.login = ClaudeHarness.login_hint


SUMMARY_START = "</system-reminder>\n"  # claude's compaction row: its preamble, then the summary,
SUMMARY_END = "\n\nIf you need specific details"  # then where the full transcript is


class ClaudeCompactionReader(ClaudeReader):
    """`/compact <focus>`: a `compact_boundary` row, then the synthetic user row carrying the summary."""

    def __init__(self) -> None:
        super().__init__()
        self.compacted = False
        self.summary: str | None = None

    def event(self, event: dict[str, Any]) -> None:
        super().event(event)
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "compact_boundary":
            self.compacted = True
        elif kind == "user" and self.compacted and self.summary is None:
            content = (event.get("message") or {}).get("content")
            if isinstance(content, str):
                self.summary = summary_of(content)


def summary_of(content: str) -> str:
    """The summary in claude's compaction row, without the preamble and the transcript's path around it."""
    start = content.find(SUMMARY_START)
    text = content[start + len(SUMMARY_START):] if start >= 0 else content
    end = text.find(SUMMARY_END)
    return (text[:end] if end >= 0 else text).strip()


class ClaudeHarness(CliHarness):
    name = "claude"
    executable_name = "claude"
    install = install_command("claude")
    login_hint = "Run `claude` and log in with /login, or set ANTHROPIC_API_KEY in the runtime's env."
    session_totals = frozenset({"cost_usd"})  # on --resume, total_cost_usd is the session's; its tokens are the run's own

    def argv(self, attempt: Attempt) -> list[str]:
        argv = [self.executable, "-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"]
        if attempt.session:
            argv += ["--resume", attempt.session]
        if self.model:
            argv += ["--model", self.model]
        if self.effort:
            argv += ["--effort", self.effort]
        return argv + list(self.args)

    def _headless(self, session: str) -> list[str]:
        return [self.executable, "-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions",
                "--resume", session]

    async def compact(self, operation: Operation) -> OperationResult:
        """`/compact <focus>` on a copy of the session (`--fork-session`), which is the agent's session once
        compacted: a compaction that fails or is stopped leaves the session as it was, without the command."""
        if operation.session is None:
            return OperationResult(AttemptEnding("failed", reason="nothing to compact: the agent has no session yet"))
        new = str(uuid.uuid4())
        argv = [*self._headless(operation.session), "--fork-session", "--session-id", new]
        if self.model:  # the compaction's model call runs with what `set` left, as a turn does
            argv += ["--model", self.model]
        if self.effort:
            argv += ["--effort", self.effort]
        reader = ClaudeCompactionReader()
        exited = await self.operate(operation, argv, f"/compact {operation.focus}", reader)
        ending = self.ending(exited, reader)
        if ending.kind == "exited" and (not reader.compacted or reader.summary is None):
            ending = AttemptEnding("failed", reason="claude did not confirm a compaction (no compact_boundary)")
        elif ending.kind == "exited" and reader.session != new:
            ending = AttemptEnding("failed", reason=f"claude did not compact into {new} (it reported {reader.session})")
        if ending.kind != "exited":
            return OperationResult(ending)
        before = self.totals(operation.session)
        if before is not None:
            self.seed(new, before)  # the copy's total_cost_usd runs on from the parent's
        usage = self._own(new, reader.usage)
        return OperationResult(ending, session=new, summary=reader.summary or "", usage=usage)

    async def fork(self, operation: Operation) -> OperationResult:
        """`--fork-session` with a session id of its own, running `/cost`: a local command, no model call."""
        if operation.session is None:
            return OperationResult(AttemptEnding("failed", reason="an agent cannot be forked before its first turn"))
        new = str(uuid.uuid4())
        argv = [*self._headless(operation.session), "--fork-session", "--session-id", new]
        reader = ClaudeReader()
        exited = await self.operate(operation, argv, "/cost", reader)
        ending = self.ending(exited, reader)
        if ending.kind == "exited" and reader.session != new:
            ending = AttemptEnding("failed", reason=f"claude did not fork the session into {new} (it reported {reader.session})")
        if ending.kind == "exited":
            self.seed(new, reader.usage)  # the copy's total_cost_usd is the parent's so far: not the fork's to spend
        return OperationResult(ending, session=new)

    def reader(self, attempt: Attempt) -> ClaudeReader:
        return ClaudeReader()

    def env(self, attempt: Attempt) -> dict[str, str]:
        """Without the calling Claude Code session's own variables, which change how a child claude runs."""
        env = super().env(attempt)
        for name in CALLING_SESSION_VARIABLES:
            env.pop(name, None)
        return env

    def ending(self, exited: Any, reader: OutputReader) -> Any:
        ending = super().ending(exited, reader)
        if "root/sudo" in exited.stderr and os.geteuid() == 0:
            return type(ending)(
                "failed",
                reason="claude refuses --dangerously-skip-permissions as root: run as another user, "
                "or, on a machine that is itself a sandbox, set IS_SANDBOX=1 in the runtime's env",
            )
        return ending
