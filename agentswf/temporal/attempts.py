"""A Temporal run's attempts: its stages and id'd turns kept as a local run keeps them, so `awf continue`
goes on with it as with a local run.

The record is the local engine's (engine/record/attempts.py: attempts/, stages/, replaced/,
turn-ids.jsonl, usage.json), read by the local continue's machinery unchanged (workflow/durable.py):
- the run's host claims the attempt and reads what the attempts before it left, as a local run does
  (`Durable.begin`), and gives that to the attempt's Temporal workflow in its input (`AttemptInput`):
  the records it reuses are workflow state, from the history, so the workflow replays deterministically;
- the workflow code runs the local engine's stage plan and id'd-turn give-back (`WorkflowDurable`: the
  local `Durable`, its writes kept as workflow state instead of done); the stage records, the id'd
  turns answered and the attempt as it ended come back in the workflow's result (`RunLines.durable`,
  `RunLines.attempt`);
- the host writes them as a local attempt writes them (`write_kept`, `end_attempt`) when the run ends,
  as it writes the rest of a Temporal run's record (engine.write_record).
Each attempt is a Temporal workflow of its own (`attempt_workflow_id`), on the one record.

Timestamps in these records are read as the local engine reads them (`engine.clock.wall`): in
workflow code they decide only which earlier id'd turns a re-run stage voids, against earlier
attempts' times, never what Temporal is asked to do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from ..engine.accounting import RunUsage
from ..engine.clock import wall
from ..engine.record.attempts import (
    STAGES_DIR,
    TURN_IDS_FILE,
    AttemptRecord,
    SessionRecord,
    StageRecord,
    append_synced,
    replace_stage,
    rewrite_attempt,
    write_stage,
)
from ..engine.record.lines import SessionOpened
from ..workflow.durable import Durable
from ..workflow.resume import fresh_because
from ..workflow.stages import is_stage_name

KEPT_WRITES = {write_stage: "stage", replace_stage: "replaced", append_synced: "turn-id"}
"""The local attempt's record writes the workflow keeps, by the name its result gives each."""

ATTEMPT_FIELDS = ("stage", "stages", "turns", "reused_turns", "usage", "replaced_from")
"""What of the attempt's record the workflow decides (the rest is its host's: pid, file, start, budget)."""


class AttemptInput(msgspec.Struct, kw_only=True):
    """What an attempt's workflow starts from: the attempt, and what the attempts before it left."""

    attempt: AttemptRecord
    continuing: bool = False
    rerun: str | None = None
    stages: dict[str, StageRecord] = {}
    turn_ids: list[dict[str, Any]] = []  # the answered id'd turns it may give back, as turn-ids.jsonl's lines
    sessions: list[SessionRecord] = []  # each agent's latest native session on record, with its harness
    earlier_usage: RunUsage | None = None  # the run's usage.json as the attempts before left it
    earlier_seconds: float = 0.0  # the time they ran


def attempt_input(durable: Durable) -> dict[str, Any]:
    """The host's `Durable` (begun, attempt claimed) as its workflow's input."""
    given = AttemptInput(
        attempt=durable.attempt, continuing=durable.continuing, rerun=durable.rerun, stages=durable.stages,
        turn_ids=list(durable.turn_ids.values()), sessions=list(durable.sessions.values()),
        earlier_usage=durable.earlier_usage, earlier_seconds=durable.earlier_seconds,
    )
    return msgspec.to_builtins(given)  # type: ignore[no-any-return]


def attempt_workflow_id(workflow: str, run_id: str, attempt: int) -> str:
    """The Temporal workflow of a run's attempt: the run's own id for its first, one per attempt after."""
    return f"{workflow}-{run_id}" if attempt == 1 else f"{workflow}-{run_id}.{attempt}"


class WorkflowDurable(Durable):
    """The local `Durable` in Temporal workflow code: the same plan and give-back, from the attempt's
    input; each record it would write is kept (`kept`, as builtins) for the host to write, and the
    attempt's own record comes back whole at the end (`attempt`). No file is read or written here."""

    kept: list[dict[str, Any]]

    @classmethod
    def of(cls, raw: dict[str, Any], run_dir: Path) -> WorkflowDurable:
        given = msgspec.convert(raw, AttemptInput)
        durable = cls(
            run_dir, given.attempt, stages=dict(given.stages),
            turn_ids={(line["agent"], line["id"]): line for line in given.turn_ids},
            sessions={record.agent: record for record in given.sessions},
            from_stage=None, rerun=given.rerun, values=None, continuing=given.continuing, writes=True,
            earlier=(given.earlier_usage, given.earlier_seconds),
        )
        durable.kept = []
        return durable

    def resumes(self, key: str, harness: str) -> str | None:
        """The native session agent `key` resumes, by `Durable.opened`'s rule (its recorded one, where its
        harness can), or None; its sessions.jsonl line kept for the host. Each turn's worker resumes it
        as it resumes the session of any later turn on Temporal."""
        recorded = self.sessions.get(key) if self.continuing else None
        fresh = fresh_because(recorded, harness) if self.continuing else None
        resumed = recorded.session if recorded is not None and fresh is None else None
        opened = SessionOpened(self.attempt.n, key, harness, wall(), resumed, fresh)
        self.kept.append({"write": "session", "record": msgspec.to_builtins(opened)})
        return resumed

    def returned(self) -> dict[str, Any]:
        """The attempt's record as the workflow left it, for its result: its stages as pairs, in the order
        entered (Temporal's JSON sorts an object's keys)."""
        return {**msgspec.to_builtins(self.attempt), "stages": list(self.attempt.stages.items())}

    async def _write(self, write: Any, *args: Any, what: str) -> None:
        kind = KEPT_WRITES.get(write)  # none for rewrite_attempt: the attempt goes back whole (`returned`)
        if kind is not None:
            self.kept.append({"write": kind, "record": msgspec.to_builtins(args[-1])})


def write_kept(run_dir: Path, attempt: AttemptRecord, kept: list[Any]) -> None:
    """The stage records and id'd turns an attempt's workflow kept, written (and fsynced) as a local
    attempt writes them. What doesn't fit the attempt (another attempt's, a stage's name that is no
    name) is left out: the result came through Temporal."""
    for line in kept:
        if not isinstance(line, dict):
            continue
        kind, record = line.get("write"), line.get("record")
        if kind == "turn-id" and isinstance(record, dict) and record.get("attempt") == attempt.n:
            append_synced(run_dir / TURN_IDS_FILE, record)
        if kind not in ("stage", "replaced"):
            continue  # sessions' lines go through the Recorder (sessions_opened)
        try:
            stage = msgspec.convert(record, StageRecord)
        except msgspec.ValidationError:
            continue
        if not is_stage_name(stage.stage):
            continue
        if kind == "stage" and stage.attempt == attempt.n:
            write_stage(run_dir, stage)
        elif kind == "replaced" and stage.attempt < attempt.n and (run_dir / STAGES_DIR / f"{stage.stage}.json").is_file():
            replace_stage(run_dir, stage)


def sessions_opened(kept: list[Any], attempt: int) -> list[SessionOpened]:
    """The sessions.jsonl lines of the agents the attempt's workflow opened, for the run's Recorder."""
    opened = []
    for line in kept:
        if isinstance(line, dict) and line.get("write") == "session":
            try:
                session = msgspec.convert(line.get("record"), SessionOpened)
            except msgspec.ValidationError:
                continue
            if session.attempt == attempt:
                opened.append(session)
    return opened


def end_attempt(run_dir: Path, attempt: AttemptRecord, returned: Any, outcome: str, reason: str | None) -> None:
    """The attempt's record, ended: what its workflow decided (its stages, turns, spend), how it ended."""
    decided = _decided(returned)
    if decided is not None and decided.n == attempt.n:
        for name in ATTEMPT_FIELDS:
            setattr(attempt, name, getattr(decided, name))
    attempt.ended_at = wall()
    attempt.outcome = outcome
    attempt.reason = reason
    if outcome == "completed":
        attempt.stage = None
    rewrite_attempt(run_dir, attempt)


def _decided(returned: Any) -> AttemptRecord | None:
    """The attempt's record from the workflow's result (`WorkflowDurable.returned`); None where it doesn't read."""
    if not isinstance(returned, dict) or not isinstance(returned.get("stages"), list):
        return None
    try:
        return msgspec.convert({**returned, "stages": dict(returned["stages"])}, AttemptRecord)
    except (msgspec.ValidationError, TypeError, ValueError):
        return None
