"""Codex (`codex`) headless: `codex exec --json`, the prompt on standard input, resumed by thread id.

A fork and a compaction go through `codex app-server` (`codex_app`), the only part of codex
that can do either; the thread it leaves is resumed by the next `codex exec resume` as any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import Attempt, AttemptEnding, Operation, OperationResult, is_session_id
from .cli import CliHarness, OutputReader
from .codex_app import AppServer, AppServerError
from .usage import Usage, add_usage, since

COMPACTION_FOCUS = "Your context is about to be compacted. For its summary: {focus}"  # as a user message before it


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

    def app_server(self) -> list[str]:
        """`codex app-server`, with the `-c` overrides of the runtime's args (its provider may be set there)."""
        return [self.executable, "app-server", *config_overrides(self.args)]

    async def fork(self, operation: Operation) -> OperationResult:
        """The app-server's `thread/fork`: a copy of the thread on disk, no model call."""
        if operation.session is None:
            return OperationResult(AttemptEnding("failed", reason="an agent cannot be forked before its first turn"))
        try:
            async with self.session(operation, self.app_server()) as channel:
                server = AppServer(channel)
                await server.start()
                answer = await server.call("thread/fork", {"threadId": operation.session, "excludeTurns": True})
        except AppServerError as error:
            return OperationResult(AttemptEnding("failed", reason=f"codex did not fork the thread: {error}"))
        thread = answer.get("thread")
        new = thread.get("id") if isinstance(thread, dict) else None
        if not isinstance(new, str) or not is_session_id(new) or new == operation.session:
            return OperationResult(AttemptEnding("failed", reason=f"codex did not fork the thread (it answered {new!r})"))
        self.seed(new, self.totals(operation.session))  # the copy's running totals are the parent's so far
        return OperationResult(AttemptEnding("exited"), session=new)

    async def compact(self, operation: Operation) -> OperationResult:
        """`thread/resume`, the focus added as a user message (`thread/inject_items`), then `thread/compact/start`,
        read to its `turn/completed`. codex keeps the summary in its rollout: the value is ""."""
        thread = operation.session
        if thread is None:
            return OperationResult(AttemptEnding("failed", reason="nothing to compact: the agent has no session yet"))
        resume: dict[str, Any] = {"threadId": thread, "excludeTurns": True}
        if self.model:
            resume["model"] = self.model
        if self.effort:
            resume["config"] = {"model_reasoning_effort": self.effort}
        try:
            async with self.session(operation, self.app_server()) as channel:
                server = AppServer(channel)
                await server.start()
                resumed = await server.call("thread/resume", resume)
                if operation.focus:
                    focus = {"type": "message", "role": "user",
                             "content": [{"type": "input_text", "text": COMPACTION_FOCUS.format(focus=operation.focus)}]}
                    await server.call("thread/inject_items", {"threadId": thread, "items": [focus]})
                before = server.totals.get(thread)
                await server.call("thread/compact/start", {"threadId": thread})
                done = await server.wait_for("turn/completed", thread)
        except AppServerError as error:
            return OperationResult(AttemptEnding("failed", reason=f"codex did not compact the thread: {error}"))
        turn = done.params.get("turn")
        status = turn.get("status") if isinstance(turn, dict) else None
        if status != "completed" or thread not in server.compacted:
            failure = turn.get("error") if isinstance(turn, dict) else None
            said = failure.get("message") if isinstance(failure, dict) else None
            reason = f"codex did not compact the thread (its compaction turn ended {status!r}{': ' + str(said) if said else ''})"
            return OperationResult(AttemptEnding("failed", reason=reason), session=thread)
        after = server.totals.get(thread)
        usage = None
        if after is not None:
            usage = since(after, self.totals(thread) or before, self.session_totals)
            self.seed(thread, after)  # the next `codex exec resume` reports totals with the compaction's in them
        model = resumed.get("model")
        return OperationResult(
            AttemptEnding("exited"), session=thread,
            usage=self.operation_usage(usage, model if isinstance(model, str) else None),
        )


def config_overrides(args: Sequence[str]) -> list[str]:
    """The `-c key=value` (`--config`) pairs of a codex command line: what `codex app-server` takes of it too."""
    found: list[str] = []
    pending = False
    for arg in args:
        if pending:
            found += ["-c", arg]
            pending = False
        elif arg in ("-c", "--config"):
            pending = True
        elif arg.startswith("--config="):
            found += ["-c", arg.removeprefix("--config=")]
    return found
