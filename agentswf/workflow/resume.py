"""Agents opened again in a continued run resume their native sessions, where their harness can.

The session on record for an agent is the latest its turns reported (turns.jsonl), with the
harness it was opened on (sessions.jsonl); a harness that can't resume, a session of another
harness, or none on record means a fresh start, and the record says which and why.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import msgspec

from ..engine.attempts import SessionRecord, read_sessions
from ..engine.records import read_lines
from ..harnesses.base import Attempt, AttemptResult, Harness, Operation, OperationResult, is_session_id
from ..harnesses.capabilities import TABLE, refusal
from ..harnesses.usage import Usage, add_usage


def sessions_on_record(run_dir: Path) -> dict[str, SessionRecord]:
    """Each agent's latest native session on record, with the harness it was opened on; a session
    that is no session id (`is_session_id`) is passed over."""
    harnesses = {
        line["agent"]: harness
        for line in read_sessions(run_dir)
        if isinstance(line.get("agent"), str) and isinstance(harness := line.get("harness", ""), str)
    }
    found: dict[str, SessionRecord] = {}
    for turn in read_lines(run_dir / "turns.jsonl"):
        agent, session = turn.get("agent"), turn.get("session")
        if isinstance(agent, str) and is_session_id(session):
            found[agent] = SessionRecord(agent, harnesses.get(agent, ""), session)
    return found


def usage_by_session(run_dir: Path) -> dict[tuple[str, str], Usage]:
    """What each (agent, native session)'s turns on record spent in all: a CLI that reports its
    session's running totals on resume reports them from there, so a resumed agent's first turn
    takes them off (`Harness.seed`) and counts only its own."""
    found: dict[tuple[str, str], Usage] = {}
    for turn in read_lines(run_dir / "turns.jsonl"):
        agent, session, usage = turn.get("agent"), turn.get("session"), turn.get("usage")
        if not (isinstance(agent, str) and isinstance(session, str) and is_session_id(session) and isinstance(usage, dict)):
            continue
        try:
            spent = msgspec.convert(usage, Usage)
        except msgspec.ValidationError:
            continue  # a line of the wrong shape takes nothing off
        found[(agent, session)] = add_usage(found.get((agent, session)), spent) or spent
    return found


def fresh_because(recorded: SessionRecord | None, harness: str) -> str | None:
    """Why an agent opened again starts a fresh session, or None when it resumes `recorded`."""
    if harness in TABLE:
        why = refusal(harness, "resume")
        if why is not None:
            return f"its harness can't resume: {why}"
    if recorded is None or recorded.session is None:
        return "no native session of it is on record"
    if not is_session_id(recorded.session):
        return "its session on record is not a session id"
    if recorded.harness != harness:
        return f"its session on record is of harness {recorded.harness or 'unknown'}, and it opens on {harness}"
    return None


class _Resuming(Harness):
    """A harness whose attempts resume `session` until the engine knows a session of its own.

    Wraps the agent's harness: an agent opened again in a continued run resumes the native
    session its record holds (claude --resume, codex resume, pi --session, …).
    """

    def __init__(self, inner: Harness, session: str) -> None:
        self._inner = inner
        self._session = session
        for name, annotation in inspect.get_annotations(Harness).items():
            if "ClassVar" in str(annotation):  # name, spawns, can_await, supports_waiting…: the inner's own
                setattr(self, name, getattr(inner, name))

    async def run(self, attempt: Attempt) -> AttemptResult:
        if attempt.session is None:
            attempt = dataclasses.replace(attempt, session=self._session)
        return await self._inner.run(attempt)

    def attempt_env(self, attempt: Attempt) -> dict[str, str]:
        return self._inner.attempt_env(attempt)

    # What Harness defines is not found by __getattr__: each is the inner's, resuming the same session.
    def settings(self) -> tuple[str | None, str | None]:
        return self._inner.settings()

    def with_settings(self, model: str | None, effort: str | None) -> Harness:
        return _Resuming(self._inner.with_settings(model, effort), self._session)

    async def compact(self, operation: Operation) -> OperationResult:
        return await self._inner.compact(operation if operation.session else dataclasses.replace(operation, session=self._session))

    async def fork(self, operation: Operation) -> OperationResult:
        return await self._inner.fork(operation if operation.session else dataclasses.replace(operation, session=self._session))

    def seed(self, session: str, totals: Usage | None) -> None:
        self._inner.seed(session, totals)

    def totals(self, session: str) -> Usage | None:
        return self._inner.totals(session)

    async def close(self) -> None:
        await self._inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def resuming(harness: Harness, session: str) -> Harness:
    return _Resuming(harness, session)
