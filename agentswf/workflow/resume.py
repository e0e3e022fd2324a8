"""Agents opened again in a continued run resume their native sessions, where their harness can.

The session on record for an agent is the latest its turns reported (turns.jsonl), with the
harness it was opened on (sessions.jsonl); a harness that can't resume, a session of another
harness, or none on record means a fresh start, and the record says which and why. A resumed
agent starts from its session as a fork starts from its copy (`AgentSetup.session`): its
first attempt resumes it, and its harness is its own.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from ..engine.record.attempts import SessionRecord, read_sessions
from ..engine.record.layout import read_lines
from ..harnesses.base import is_session_id
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
        if isinstance(agent, str) and is_session_id(session) and turn.get("kind") != "fork":  # a fork's names its copy's
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
