"""What every agent-CLI harness shares: find the CLI, run one attempt, read its output.

Each CLI's own module says how to start and resume it and how to read what it prints;
this base runs it in a process group of its own (stopped as a group on deadline or
cancellation) and turns how it ended into an attempt's ending. Output that can't be
read is never taken for success.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
from abc import abstractmethod
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar

import msgspec

from ..errors import HarnessError
from ..wire.nesting import too_deep
from .base import Attempt, AttemptEnding, AttemptResult, Harness, Operation, is_session_id
from .capabilities import refusal
from .cli_version import known_version
from .prices import LIST_PRICES, Prices, estimate
from .process import Channel, Exited, open_in_group, run_in_group
from .usage import Usage, UsageField, since, sound

STDERR_LINES_IN_REASON = 20
OPERATION_HIDDEN_VARIABLES = ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT")


def operation_env(operation: Operation) -> dict[str, str]:
    """An operation's environment: the agent's, without a calling Claude Code session's variables."""
    return {name: value for name, value in operation.env.items() if name not in OPERATION_HIDDEN_VARIABLES}


def _unheard(text: str) -> None:
    """Where a reader's notes go when no attempt keeps them (an operation's run)."""


class OutputReader:
    """Reads a CLI's output line by line: its session, usage, and how the turn ended."""

    def __init__(self) -> None:
        self.session: str | None = None
        self.usage: Usage | None = None
        self.model: str | None = None  # the model the CLI says it ran
        self.error: str | None = None  # an error the CLI reported
        self.retryable = False
        self.login: str | None = None  # what the person should run, when the CLI isn't logged in
        self.finished = False  # the CLI reported the end of its turn
        self.noted: Callable[[str], None] = _unheard  # told each line the CLI reported for a person (said.Said.note)

    def feed(self, line: bytes) -> None:
        if too_deep(line):
            return  # no CLI event nests that deep: not an event, and never decoded
        try:
            event = msgspec.json.decode(line)
        except msgspec.DecodeError:
            return  # not a JSON line: progress text, a warning
        if not isinstance(event, dict):
            return
        try:
            self.event(event)
        except (AttributeError, TypeError, KeyError, IndexError, ValueError):
            return  # an event of a known type in an unknown shape (another process can write here too): not one
        finally:
            self._text_only()

    def _text_only(self) -> None:
        """A model or an error of another type than text (any JSON a line can hold) raised where it
        was used, after the turn: the attempt was reported broken and the spend its CLI reported
        went uncounted, so an agent that wrote such a line after answering spent past its budget."""
        if not isinstance(self.model, str | None):
            self.model = None
        if not isinstance(self.error, str | None):
            self.error = str(self.error)

    @abstractmethod
    def event(self, event: dict[str, Any]) -> None:
        """One JSON event of the CLI's output."""


USAGE_EXIT_STATUS = 2  # what a CLI exits with on a command line it can't parse (clap's, codex's)
# Its words for a flag it doesn't know: commander's (claude) "error: unknown option '--x'", clap's (codex)
# "error: unexpected argument '--x' found", pi's "Error: Unknown option: --x".
_REFUSED_FLAG = re.compile(
    r"\b(?:unknown option|unexpected argument|unrecognized option|unknown argument)\b[\s:]*['\"`]?(-{1,2}[A-Za-z0-9][\w-]*)",
    re.IGNORECASE,
)


def refused_flag(exit_code: int, stderr: str, reported: bool) -> str | None:
    """The flag a CLI refused its command line for, "" when it said none, or None when it didn't refuse it.

    A CLI's words for an unknown flag, or the usage status from one that reported nothing of a
    turn: a CLI changed under agentswf, which no retry mends."""
    if exit_code == 0:
        return None
    found = _REFUSED_FLAG.search(stderr)
    if found is not None:
        return found.group(1)
    return "" if exit_code == USAGE_EXIT_STATUS and not reported else None


LOGIN_MARKERS = ("401", "unauthorized", "invalid api key", "invalid x-api-key", "not logged in", "/login", "authentication")


def looks_like_login(text: str) -> bool:
    lowered = text.lower()
    return any(marker in lowered for marker in LOGIN_MARKERS)


class CliHarness(Harness):
    """An agent CLI run headless, one process per attempt, resuming its native session."""

    executable_name: ClassVar[str]
    install: ClassVar[str]  # the command that installs it, pinned where it can be
    login_hint: ClassVar[str]
    session_totals: ClassVar[frozenset[UsageField]] = frozenset()  # what it reports as its session's total on resume
    input_counts_cache_reads: ClassVar[bool] = False  # its input count includes the cached tokens

    def __init__(
        self,
        executable: str,
        *,
        model: str | None = None,
        effort: str | None = None,
        args: tuple[str, ...] = (),
        prices: Prices = LIST_PRICES,
    ) -> None:
        self.executable = executable
        self.model = model
        self.effort = effort
        self.args = args
        self.prices = prices  # for the cost of a turn whose CLI prints none
        self._reported: dict[str, Usage] = {}  # by session: what the CLI last reported, to take off the next

    @property
    def can_await(self) -> bool:  # type: ignore[override]
        return refusal(self.name, "await_reply") is None

    def settings(self) -> tuple[str | None, str | None]:
        return self.model, self.effort

    def cli_executable(self) -> tuple[str, str] | None:
        return self.name, self.executable

    def with_settings(self, model: str | None, effort: str | None) -> CliHarness:
        """A copy running with `model` and `effort`, sharing what each session has reported so far."""
        switched = copy.copy(self)
        switched.model = model if model is not None else self.model
        switched.effort = effort if effort is not None else self.effort
        return switched

    def seed(self, session: str, totals: Usage | None) -> None:
        if totals is not None and self.session_totals:
            self._reported[session] = totals

    def totals(self, session: str) -> Usage | None:
        return self._reported.get(session)

    @classmethod
    def locate(cls, command: tuple[str, ...], env: Mapping[str, str]) -> str:
        """The CLI's executable: `command[0]` if given, else found on the agent's PATH."""
        wanted = command[0] if command else cls.executable_name
        found = shutil.which(wanted, path=env.get("PATH", os.defpath))
        if found is None:
            where = f"{wanted} was not found" if command else f"{wanted} is not on PATH"
            raise HarnessError(
                f"{where}: install it with `{cls.install}`, "
                f"or give Runtime(harness={cls.name!r}, command=['/path/to/{cls.executable_name}'])"
            )
        return found

    @abstractmethod
    def argv(self, attempt: Attempt) -> list[str]:
        """The command line of one attempt: the first, or a resume of `attempt.session`."""

    @abstractmethod
    def reader(self, attempt: Attempt) -> OutputReader:
        """A fresh reader of this CLI's output."""

    def stdin(self, attempt: Attempt) -> bytes:
        """What goes on standard input: the prompt, the one channel no CLI reinterprets."""
        return attempt.prompt.encode()

    def env(self, attempt: Attempt) -> dict[str, str]:
        return self.attempt_env(attempt)

    async def run(self, attempt: Attempt) -> AttemptResult:
        reader = self.reader(attempt)
        reader.noted = attempt.said.note
        exited = await run_in_group(
            self.argv(attempt), input=self.stdin(attempt), cwd=attempt.cwd, env=self.env(attempt), read_line=reader.feed,
            started=attempt.started, confine=attempt.confine, said=attempt.said,
        )
        session = reader.session if is_session_id(reader.session) else attempt.session  # never an option or a path
        return AttemptResult(self.ending(exited, reader), session=session, usage=self.attempt_usage(session, reader))

    def attempt_usage(self, session: str | None, reader: OutputReader) -> Usage | None:
        """The attempt's own usage, naming its model, with a cost where the CLI printed none."""
        usage = self._own(session, sound(reader.usage))
        model = reader.model or self.model
        if usage is not None and model is not None:
            usage = msgspec.structs.replace(usage, model=model)
        return estimate(usage, self.prices, input_counts_cache_reads=self.input_counts_cache_reads)

    def _own(self, session: str | None, reported: Usage | None) -> Usage | None:
        """The attempt's own usage, where the CLI reported its session's running totals."""
        if reported is None or not self.session_totals or session is None:
            return reported
        before = self._reported.get(session)
        self._reported[session] = reported
        return since(reported, before, self.session_totals)

    async def operate(self, operation: Operation, argv: list[str], stdin: str, reader: OutputReader) -> Exited:
        """Run the CLI once for an operation (no `wfa`: it answers nothing), reading its output with `reader`."""
        env = operation_env(operation)
        return await run_in_group(
            argv, input=stdin.encode(), cwd=operation.cwd, env=env, read_line=reader.feed, started=operation.started,
            confine=operation.confine,
        )

    def session(self, operation: Operation, argv: list[str]) -> AbstractAsyncContextManager[Channel]:
        """The CLI run for an operation with its standard input held open: a JSON-RPC or rpc-mode session."""
        return open_in_group(
            argv, cwd=operation.cwd, env=operation_env(operation), started=operation.started, confine=operation.confine
        )

    def operation_usage(self, usage: Usage | None, model: str | None) -> Usage | None:
        """An operation's own usage, naming its model, with a cost where the CLI printed none."""
        model, usage = model or self.model, sound(usage)
        if usage is not None and model is not None:
            usage = msgspec.structs.replace(usage, model=model)
        return estimate(usage, self.prices, input_counts_cache_reads=self.input_counts_cache_reads)

    def ending(self, exited: Exited, reader: OutputReader) -> AttemptEnding:
        """How the attempt ended, from the exit status and what the CLI reported; fail closed."""
        stderr = exited.stderr_lines(STDERR_LINES_IN_REASON)
        flag = refused_flag(exited.exit_code, exited.stderr, reader.session is not None or reader.finished)
        if flag is not None:  # before the login check: pi's usage error goes on to say "Use /login"
            version = known_version(self.executable) or "(version unknown)"
            what = f"the flag {flag}" if flag else f"its command line (status {exited.exit_code})"
            return AttemptEnding(
                "failed", exit_code=exited.exit_code, retryable=False,
                reason=f"{self.name} {version} refused {what}: this version of it isn't one agentswf works with "
                       f"(`awf doctor` says which are):\n{stderr}",
            )
        problem = reader.error or (stderr if exited.exit_code != 0 else None)
        if problem is not None and (reader.login or looks_like_login(problem)):
            run = reader.login or self.login_hint
            return AttemptEnding("failed", reason=f"{self.name} isn't logged in: {problem.strip()}\n{run}", retryable=False)
        if reader.error is not None:
            return AttemptEnding("failed", reason=f"{self.name} reported an error: {reader.error}", retryable=reader.retryable)
        if exited.exit_code != 0:
            status = f"status {exited.exit_code}" if exited.exit_code > 0 else f"signal {-exited.exit_code}"
            tail = f":\n{stderr}" if stderr else ""
            return AttemptEnding("failed", exit_code=exited.exit_code, reason=f"{self.name} exited with {status}{tail}", retryable=True)
        if not reader.finished:
            tail = f"; the CLI's last lines:\n{stderr}" if stderr else ""
            return AttemptEnding(
                "failed", reason=f"{self.name} exited without reporting the end of its turn; its output couldn't be read{tail}"
            )
        return AttemptEnding("exited")
