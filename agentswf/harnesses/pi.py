"""pi (`pi`) headless: `pi --mode json <prompt>`, resumed by session id from the agent's cwd.

pi exits 0 even when the model's API failed, so the ending is read from its last
assistant message (`stopReason`), never from the exit status alone.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..errors import HarnessError
from .base import Attempt, AttemptEnding, Operation, OperationResult
from .cli import STDERR_LINES_IN_REASON, CliHarness, OutputReader
from .usage import Usage, add_usage, sound
from .versions import install_command

SESSION_FILE_SUFFIX = ".jsonl"  # how a session named by its file is told from one named by id
MAX_RPC_LINES = 10_000  # lines read waiting for an rpc answer: a pi that writes more without one is given up on


def pi_usage(usage: object) -> Usage | None:
    """pi's `usage` object (a message's, or a compaction's from 1.x on) as a Usage; None if it isn't one."""
    if not isinstance(usage, dict):
        return None
    cost = usage.get("cost")
    return Usage(
        input_tokens=usage.get("input"),
        output_tokens=usage.get("output"),
        cache_read_tokens=usage.get("cacheRead"),
        cache_write_tokens=usage.get("cacheWrite"),
        cost_usd=cost.get("total") if isinstance(cost, dict) else None,
    )


class PiReader(OutputReader):
    """JSON lines: a `session` line first, `message_end` per message (with usage), `agent_end` last.

    A session resumed by its file (a fork's, which may be in another directory's store) stays
    named by that file: by id, pi looks only in the store of the agent's cwd.
    """

    def __init__(self, file: str | None = None) -> None:
        super().__init__()
        self.file = file

    def event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "session":
            self.session = self.file or event.get("id") or self.session
        elif kind == "message_end":
            message = event.get("message") or {}
            # each message's own, made sound: a forged negative one takes nothing off the others
            self.usage = add_usage(self.usage, sound(pi_usage(message.get("usage"))))
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
    install = install_command("pi")
    login_hint = "Run `pi`, then /login, or set the provider's API key in the runtime's env."

    def argv(self, attempt: Attempt) -> list[str]:
        return [*self._command("json", attempt.session), attempt.prompt]

    def _command(self, mode: str, session: str | None) -> list[str]:
        argv = [self.executable, "--mode", mode]
        if session:
            argv += ["--session", session]
        if self.model:
            argv += ["--model", self.model]
        if self.effort:
            argv += ["--thinking", self.effort]
        return argv + list(self.args)

    def stdin(self, attempt: Attempt) -> bytes:
        return b""  # the prompt is the last argument; pi reads no standard input in json mode

    def reader(self, attempt: Attempt) -> PiReader:
        by_file = attempt.session is not None and attempt.session.endswith(SESSION_FILE_SUFFIX)
        return PiReader(attempt.session if by_file else None)

    async def fork(self, operation: Operation) -> OperationResult:
        """`pi --mode rpc --fork <session>` answering `get_state` with the copy's file: no model call."""
        if operation.session is None:
            return OperationResult(AttemptEnding("failed", reason="an agent cannot be forked before its first turn"))
        argv = [self.executable, "--mode", "rpc", "--fork", operation.session]
        if self.model:
            argv += ["--model", self.model]
        reader = PiStateReader()
        exited = await self.operate(operation, argv + list(self.args), '{"id":"fork","type":"get_state"}\n', reader)
        if reader.file is None:
            tail = exited.stderr_lines(STDERR_LINES_IN_REASON)
            reason = f"pi did not fork the session (it reported no session file){': ' + tail if tail else ''}"
            return OperationResult(AttemptEnding("failed", reason=reason))
        return OperationResult(AttemptEnding("exited"), session=reader.file)


    async def compact(self, operation: Operation) -> OperationResult:
        """`pi --mode rpc --session <session>` sent `compact` with the focus, its input held open until it answers."""
        if operation.session is None:
            return OperationResult(AttemptEnding("failed", reason="nothing to compact: the agent has no session yet"))
        command: dict[str, str] = {"id": "compact", "type": "compact"}
        if operation.focus:
            command["customInstructions"] = operation.focus
        reader = PiCompactionReader()
        closed: HarnessError | None = None
        async with self.session(operation, self._command("rpc", operation.session)) as channel:
            try:
                await channel.send(msgspec.json.encode(command) + b"\n")
                for _ in range(MAX_RPC_LINES):
                    reader.feed(await channel.receive())
                    if reader.finished:
                        break
            except HarnessError as error:  # it closed its end: exited
                closed = error
        if closed is not None:
            tail = await channel.stderr_lines(STDERR_LINES_IN_REASON)
            reason = f"pi ended before it answered compact ({closed}){': ' + tail if tail else ''}"
            return OperationResult(AttemptEnding("failed", reason=reason), session=operation.session)
        if reader.summary is None:
            said = reader.error or f"no answer in {MAX_RPC_LINES} lines"
            return OperationResult(AttemptEnding("failed", reason=f"pi did not compact: {said}"), session=operation.session)
        usage = self.operation_usage(reader.usage, None)
        return OperationResult(AttemptEnding("exited"), session=operation.session, summary=reader.summary, usage=usage)


class PiCompactionReader(OutputReader):
    """`--mode rpc`: the answer to `compact`, with the summary and (1.x) its usage, or the error pi gave.

    pi 1.x compacts only what is older than its last `compaction.keepRecentTokens` (20000 by
    default): a smaller session is answered "Nothing to compact (session too small)", a failure.
    """

    def __init__(self) -> None:
        super().__init__()
        self.summary: str | None = None

    def event(self, event: dict[str, Any]) -> None:
        if event.get("type") != "response" or event.get("command") != "compact":
            return
        self.finished = True
        data = (event.get("data") or {}) if event.get("success") is True else {}
        summary = data.get("summary")
        if isinstance(summary, str):
            self.summary = summary
            self.usage = pi_usage(data.get("usage"))  # from 1.x on; 0.7x's answer has none
        else:
            error = event.get("error")
            self.error = error if isinstance(error, str) else "pi answered compact without a summary"


class PiStateReader(OutputReader):
    """`--mode rpc`: the answer to `get_state`, naming the session's file."""

    def __init__(self) -> None:
        super().__init__()
        self.file: str | None = None

    def event(self, event: dict[str, Any]) -> None:
        if event.get("type") == "response" and event.get("command") == "get_state" and event.get("success"):
            file = (event.get("data") or {}).get("sessionFile")
            self.file = file if isinstance(file, str) and file.endswith(SESSION_FILE_SUFFIX) else None
