"""Codex (`codex`) headless: `codex exec --json`, the prompt on standard input, resumed by thread id.

A fork and a compaction go through `codex app-server` (`codex_app`), the only part of codex
that can do either; the thread it leaves is resumed by the next `codex exec resume` as any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio

from .base import Attempt, AttemptEnding, Operation, OperationResult, is_session_id
from .cli import CliHarness, OutputReader
from .codex_app import AppServer, AppServerError, read_tail, summary_in
from .usage import Usage, add_usage, since
from .versions import install_command

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
        elif kind == "error" and isinstance(event.get("message"), str):  # a stream's trouble: `Reconnecting...`
            self.noted(event["message"])
        elif kind == "item.completed" and event["item"].get("type") == "error" and isinstance(event["item"].get("message"), str):
            self.noted(event["item"]["message"])
        elif kind == "turn.failed":
            self.finished = True
            error = event.get("error") or {}
            self.error = error.get("message") if isinstance(error, dict) else str(error)
            self.retryable = True


class CodexHarness(CliHarness):
    name = "codex"
    executable_name = "codex"
    install = install_command("codex")
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
                new, _ = await copy_thread(server, operation.session, {})
        except AppServerError as error:
            return OperationResult(AttemptEnding("failed", reason=f"codex did not fork the thread: {error}"))
        self.seed(new, self.totals(operation.session))  # the copy's running totals are the parent's so far
        return OperationResult(AttemptEnding("exited"), session=new)

    async def compact(self, operation: Operation) -> OperationResult:
        """A copy of the thread (`thread/fork`), the focus added to it as a user message (`thread/inject_items`),
        compacted (`thread/compact/start`, read to its `turn/completed`): the copy is the agent's thread from
        then on. A compaction that fails or is stopped leaves the agent's thread as it was, focus and all.
        The summary is read from the copy's rollout; "" where it can't be."""
        thread = operation.session
        if thread is None:
            return OperationResult(AttemptEnding("failed", reason="nothing to compact: the agent has no session yet"))
        settings: dict[str, Any] = {}
        if self.model:
            settings["model"] = self.model
        if self.effort:
            settings["config"] = {"model_reasoning_effort": self.effort}
        try:
            async with self.session(operation, self.app_server()) as channel:
                server = AppServer(channel)
                await server.start()
                copy, answer = await copy_thread(server, thread, settings)
                if operation.focus:
                    focus = {"type": "message", "role": "user",
                             "content": [{"type": "input_text", "text": COMPACTION_FOCUS.format(focus=operation.focus)}]}
                    await server.call("thread/inject_items", {"threadId": copy, "items": [focus]})
                before = self.totals(thread) or server.totals.get(copy)
                await server.call("thread/compact/start", {"threadId": copy})
                done = await server.wait_for("turn/completed", copy)
        except AppServerError as error:
            return OperationResult(AttemptEnding("failed", reason=f"codex did not compact the thread: {error}"))
        turn = done.params.get("turn")
        status = turn.get("status") if isinstance(turn, dict) else None
        if status != "completed" or copy not in server.compacted:
            failure = turn.get("error") if isinstance(turn, dict) else None
            said = failure.get("message") if isinstance(failure, dict) else None
            reason = f"codex did not compact the thread (its compaction turn ended {status!r}{': ' + str(said) if said else ''})"
            return OperationResult(AttemptEnding("failed", reason=reason))
        after = server.totals.get(copy)
        usage = None
        if after is not None:
            usage = since(after, before, self.session_totals)
            self.seed(copy, after)  # the next `codex exec resume` reports totals with the compaction's in them
        model = answer.get("model")
        path = (answer.get("thread") or {}).get("path")
        tail = await anyio.to_thread.run_sync(read_tail, path) if isinstance(path, str) else b""
        return OperationResult(
            AttemptEnding("exited"), session=copy, summary=summary_in(tail) or "",
            usage=self.operation_usage(usage, model if isinstance(model, str) else None),
        )


async def copy_thread(server: AppServer, thread: str, settings: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """`thread/fork` of `thread` with `settings`: the copy's id and the whole answer."""
    answer = await server.call("thread/fork", {"threadId": thread, "excludeTurns": True, **settings})
    copied = answer.get("thread")
    new = copied.get("id") if isinstance(copied, dict) else None
    if not isinstance(new, str) or not is_session_id(new) or new == thread:
        raise AppServerError(f"codex app-server answered thread/fork with no new thread (it named {new!r})")
    return new, answer


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
