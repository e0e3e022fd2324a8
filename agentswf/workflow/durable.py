"""One attempt of a run, and what it takes from the attempts before it.

A run is started (attempt 1) and may be continued (attempt 2, 3, …: `awf continue`,
`agentswf.run(continue_from=…)`). Each attempt runs the workflow from the top; `Durable` is
what its `wf.stage`, `agent.run` and `wf.agents.open` ask on the way: a stage recorded
complete gives back its recorded value without its work being called; a turn given an id
that was answered before gives back its recorded turn; an agent opened again resumes its
native session where its harness can. It also writes the attempt's own records
(engine/record/attempts.py) — a stage's before the stage returns, so a run that dies after it
never runs it again — but for the sessions lines, which it tells the run's Recorder as agents
open (no agent's open waits on disk). The stage plan itself is pure (stages.py).

What earlier attempts spent carries over: the attempt's `Ledger` goes on from the run's
usage.json as they left it, and its budgets from the same (`carry`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import msgspec

from ..actors import ActorRef
from ..engine.accounting import Ledger, RunUsage
from ..engine.clock import in_real_time, wall
from ..engine.outcomes import Answered, Turn, Usage, add_usage
from ..engine.record.attempts import (
    INTERRUPTED,
    TURN_IDS_FILE,
    AttemptRecord,
    RecordRefused,
    SessionRecord,
    StageHow,
    StageRecord,
    append_synced,
    claim_attempt,
    is_live,
    move_output_aside,
    process_start,
    read_attempts,
    read_stages,
    read_turn_ids,
    replace_stage,
    rewrite_attempt,
    write_stage,
)
from ..engine.record.layout import RECORD_VERSION, read_json, write_whole
from ..engine.record.lines import CliUsed, SessionOpened
from ..engine.tell import tell
from ..errors import DefinitionError, StopRequested, WorkflowError
from ..harnesses.base import Harness
from ..progress import progress
from . import stages as plan
from .budgets import Budgets, ran_seconds
from .continuing import USAGE_FILE, file_sha256, workflow_file
from .definition import WorkflowDefinition
from .resume import fresh_because, is_session_id, sessions_on_record, usage_by_session


@dataclass
class _OpenStage:
    name: str
    started_at: float
    turns: int = 0
    usage: Usage | None = None
    sessions: dict[str, SessionRecord] = field(default_factory=dict)


class Durable:
    """This attempt's plan and records. Built by `begin` before the run's actors start."""

    def __init__(
        self,
        run_dir: Path,
        attempt: AttemptRecord,
        *,
        stages: dict[str, StageRecord],
        turn_ids: dict[tuple[str, str], dict[str, Any]],
        sessions: dict[str, SessionRecord],
        from_stage: str | None,
        rerun: str | None,
        values: Mapping[str, Any] | None,
        continuing: bool,
        writes: bool,
        earlier: tuple[RunUsage | None, float] = (None, 0.0),
        session_usage: dict[tuple[str, str], Usage] | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.attempt = attempt
        self.stages = stages
        self.turn_ids = turn_ids
        self.sessions = sessions
        self.from_stage = from_stage
        self.rerun = rerun
        self.values = dict(values) if values is not None else None
        self.continuing = continuing
        self.writes = writes  # a look-ahead writes nothing
        self.started = False  # past the start point: every stage runs
        self.needs: dict[str, Any] = {}  # a look-ahead's stages before the start, and their JSON Schemas
        self._open: _OpenStage | None = None
        self._left_in: str | None = None  # the last stage that raised or was cancelled
        self.earlier_usage, self.earlier_seconds = earlier  # what the attempts before spent, and how long they ran
        self.session_usage = session_usage or {}  # (agent, session): what its turns on record spent in all
        self.ledger = Ledger(attempt.n, self.earlier_usage)  # the Recorder's: the run's spend, from the earlier
        self._recorder: ActorRef | None = None  # the run's, once its actors start (`recording`)

    @property
    def lookahead(self) -> bool:
        return self.from_stage is not None and self.values is None

    @classmethod
    def begin(
        cls,
        run_dir: Path,
        definition: WorkflowDefinition,
        *,
        continuing: bool = False,
        from_stage: str | None = None,
        rerun: str | None = None,
        values: Mapping[str, Any] | None = None,
        sandbox: dict[str, Any] | None = None,
        budget: dict[str, Any] | None = None,
    ) -> Durable:
        """Claim the run's next attempt (the first, for a new run); raises DefinitionError if it can't go on.

        `sandbox` is the run's one sandbox (`awf run --sandbox`'s spec) and `budget` its budget,
        kept in the attempt's record so a continue goes on with them."""
        file = workflow_file(definition)
        sha = file_sha256(file)
        lookahead = from_stage is not None and values is None
        try:
            earlier = read_attempts(run_dir) if continuing else []
            last = _last_of(run_dir, earlier, rerun) if continuing else None
            attempt = AttemptRecord(
                n=last.n + 1 if last is not None else 1,
                workflow=definition.name,
                file=str(file) if file is not None else None,
                file_sha256=sha,
                pid=os.getpid(),
                process_start=process_start(os.getpid()),
                started_at=wall(),
                continues=last.n if last is not None else None,
                file_changed=last is not None and last.file_sha256 != sha,
                from_stage=from_stage,
                rerun=rerun,
                sandbox=sandbox,
                budget=budget,
            )
            stages = read_stages(run_dir) if continuing else {}
            if rerun is not None:
                _check_rerun(run_dir, rerun, stages, earlier)
            # read before the attempt is claimed: a file an agent grew past what is read refuses the continue, claiming nothing
            turn_ids = _turn_ids(run_dir, earlier) if continuing else {}
            sessions = sessions_on_record(run_dir) if continuing else {}
            session_usage = usage_by_session(run_dir) if continuing else None
            if not lookahead:
                claim_attempt(run_dir, attempt)
            if last is not None:
                move_output_aside(run_dir, last.n)
        except RecordRefused as error:
            raise DefinitionError(str(error)) from None
        except OSError as error:
            raise DefinitionError(f"the run's record at {run_dir} can't be read or written: {error.strerror or error}") from None
        if attempt.file_changed:
            progress(
                "agentswf.run",
                f"the workflow's file changed since attempt {attempt.continues}: stages recorded then are reused "
                "as they were recorded (awf continue --rerun STAGE runs one again)",
                file=attempt.file,
            )
        durable = cls(
            run_dir,
            attempt,
            stages=stages,
            turn_ids=turn_ids,
            sessions=sessions,
            from_stage=from_stage,
            rerun=rerun,
            values=values,
            continuing=continuing,
            writes=not lookahead,
            earlier=_spent_before(run_dir, earlier) if continuing else (None, 0.0),
            session_usage=session_usage,
        )
        if continuing and not lookahead:  # usage.json says this attempt's spend from its start
            try:
                spent = msgspec.structs.asdict(durable.ledger.snapshot())
                write_whole(run_dir / USAGE_FILE, msgspec.json.encode({"version": RECORD_VERSION, **spent}))
            except OSError as error:
                raise DefinitionError(f"the run's usage.json can't be written: {error.strerror or error}") from None
        return durable

    def carry(self, budgets: Budgets) -> None:
        """The budgets go on from what the earlier attempts spent."""
        if self.earlier_usage is not None:
            budgets.carry(self.earlier_usage, self.earlier_seconds)

    # Stages ---------------------------------------------------------------------------

    async def enter(self, name: str, result: Any) -> tuple[bool, Any]:
        """(True, value) for a stage that doesn't run (reused, provided, a look-ahead's stand-in),
        (False, None) for one that runs now. Stops the run where the plan can't go on."""
        self._left_in = None
        decision = plan.enter(
            name,
            recorded=self.stages.get(name),
            started=self.started,
            from_stage=self.from_stage,
            rerun=self.rerun,
            values=self.values,
        )
        if isinstance(decision, plan.Reuse):
            record = decision.record
            try:
                value = plan.decode_value(record.value, result)
            except msgspec.ValidationError as error:
                raise StopRequested(
                    f"stage {name}'s record (attempt {record.attempt}) no longer fits its result: {error}; "
                    f"awf continue --rerun {name} runs it again"
                ) from None
            self._entered(name, "reused")
            progress("agentswf.run", "stage reused", stage=name, attempt=record.attempt)
            return True, value
        if isinstance(decision, plan.Need):
            return True, self._stand_in(name, result)
        if isinstance(decision, plan.Missing):
            schema = msgspec.json.encode(plan.schema_of(result)).decode()
            raise StopRequested(
                f"--values has no value for stage {name}, which comes before --from-stage {self.from_stage}; "
                f"its value fits this JSON Schema: {schema}"
            )
        if isinstance(decision, plan.Provide):
            return True, await self._provided(name, decision.value, result)
        if self.lookahead:
            raise StopRequested(self._lookahead_reason(f"reached stage {name}"))
        if decision.start:
            await self._start_point()
        self._entered(name, "ran")
        self._open = _OpenStage(name, wall())
        if self.writes:  # so an attempt killed in it still says which stage it was in
            self.attempt.stage = name
            await self._write(rewrite_attempt, self.run_dir, self.attempt, what=f"attempt {self.attempt.n}'s record")
        return False, None

    def _entered(self, name: str, how: StageHow) -> None:
        self.attempt.stages = {**self.attempt.stages, name: how}

    def _stand_in(self, name: str, result: Any) -> Any:
        schema = plan.schema_of(result)
        self.needs[name] = schema
        try:
            return plan.decode_value(plan.stand_in(result), result)
        except msgspec.ValidationError:
            raise StopRequested(self._lookahead_reason(f"found no stand-in for stage {name}'s value")) from None

    def _lookahead_reason(self, where: str) -> str:
        names = ", ".join(self.needs) or "none"
        return f"a look-ahead (--from-stage {self.from_stage} without --values) {where}; the stage values needed: {names}"

    async def _provided(self, name: str, value: Any, result: Any) -> Any:
        try:
            decoded = plan.decode_value(value, result)
        except msgspec.ValidationError as error:
            raise StopRequested(f"--values' value for stage {name} doesn't fit its result: {error}") from None
        now = wall()
        record = StageRecord(stage=name, attempt=self.attempt.n, started_at=now, ended_at=now, value=value, provided=True,
                             file_sha256=self.attempt.file_sha256)
        await self._write(write_stage, self.run_dir, record, what=f"stage {name}'s record")
        self.stages[name] = record
        self._entered(name, "provided")
        return decoded

    async def _start_point(self) -> None:
        """From here every stage runs: the records not reused in this attempt move to replaced/,
        and the id'd turns answered since the earliest of them are given again."""
        self.started = True
        kept = set(self.attempt.stages)
        replaced = [record for name, record in self.stages.items() if name not in kept]
        if not replaced:
            return
        since = min(record.started_at for record in replaced)
        self.attempt.replaced_from = since
        for record in replaced:
            await self._write(replace_stage, self.run_dir, record, what=f"stage {record.stage}'s record")
            del self.stages[record.stage]
        self.turn_ids = {key: line for key, line in self.turn_ids.items() if line.get("at", 0.0) < since}
        await self._write(rewrite_attempt, self.run_dir, self.attempt, what=f"attempt {self.attempt.n}'s record")

    async def completed(self, name: str, value: Any) -> None:
        """Stage `name` returned `value`: recorded (whole, fsynced) before the stage returns it."""
        stage, self._open = self._open, None
        try:
            encoded = msgspec.json.decode(msgspec.json.encode(value))
        except (TypeError, msgspec.EncodeError) as error:
            raise DefinitionError(
                f"stage {name}'s value is not JSON ({error}): the record keeps a stage's value, so return "
                "plain data or a msgspec Struct (with result= to have it back as that type)"
            ) from None
        if stage is None or not self.writes:
            return
        record = StageRecord(
            stage=name,
            attempt=self.attempt.n,
            started_at=stage.started_at,
            ended_at=wall(),
            value=encoded,
            sessions=list(stage.sessions.values()),
            turns=stage.turns,
            usage=stage.usage,
            file_sha256=self.attempt.file_sha256,
        )
        await self._write(write_stage, self.run_dir, record, what=f"stage {name}'s record")
        self.stages[name] = record

    def left(self) -> None:
        """The stage running ended without a value (it raised, or was cancelled)."""
        if self._open is not None:
            self._left_in = self._open.name
        self._open = None

    @property
    def current_stage(self) -> str | None:
        return self._open.name if self._open is not None else None

    # Turns ----------------------------------------------------------------------------

    def given(self, key: str, id: str | None, prompt: str, schema: dict[str, Any], answer_type: Any) -> Turn[Any] | None:
        """The recorded turn an id'd turn gives back in a continued run (a look-ahead's stand-in), or None to run it.

        Raises DefinitionError when the id was answered for another prompt or schema.
        """
        if self.lookahead:  # nothing runs: the turn is answered with the smallest value its schema allows
            try:
                value = plan.decode_value(plan.stand_in(answer_type), answer_type)
            except msgspec.ValidationError:
                raise StopRequested(self._lookahead_reason(f"found no stand-in for a turn of agent {key}")) from None
            now = wall()
            return Turn(outcome=Answered(value), agent=key, call_id="look-ahead", n=0, started_at=now, ended_at=now)
        if id is None:
            return None
        line = self.turn_ids.get((key, id))
        if line is None:
            return None
        if line.get("prompt") != prompt or line.get("schema") != schema:
            what = "prompt" if line.get("prompt") != prompt else "schema"
            raise DefinitionError(
                f"agent {key}: turn id {id!r} was answered in attempt {line.get('attempt')} for another {what}; "
                "give this turn another id"
            )
        try:
            turn: Turn[Any] = msgspec.json.decode(msgspec.json.encode(line["turn"]), type=Turn[answer_type])  # type: ignore[valid-type]
        except msgspec.ValidationError as error:
            raise DefinitionError(f"agent {key}: turn id {id!r}'s recorded turn no longer reads: {error}") from None
        self.attempt.reused_turns += 1
        return turn

    async def ended(self, key: str, harness: str, id: str | None, prompt: str, schema: dict[str, Any], turn: Turn[Any]) -> None:
        """A turn the workflow gave ended: counted, with its stage; an answered id'd turn recorded."""
        self.attempt.turns += 1
        self.attempt.usage = add_usage(self.attempt.usage, turn.usage)
        if self._open is not None:
            self._open.turns += 1
            self._open.usage = add_usage(self._open.usage, turn.usage)
            self._open.sessions[key] = SessionRecord(key, harness, turn.session)
        if is_session_id(turn.session):  # what a later open resumes: never an option or a path
            self.sessions[key] = SessionRecord(key, harness, turn.session)
        if id is None or not turn.answered or not self.writes:
            return
        line = {"attempt": self.attempt.n, "agent": key, "id": id, "prompt": prompt, "schema": schema,
                "stage": self.current_stage, "at": wall(), "turn": msgspec.to_builtins(turn)}
        await self._write(append_synced, self.run_dir / TURN_IDS_FILE, line, what=f"turn {id!r}'s record")
        self.turn_ids[(key, id)] = line

    def counted(self, turn: Turn[Any]) -> None:
        """A turn the workflow didn't give ended (mail's, or an operation): its spend counts in
        the attempt's and in the stage open now; a turn (no operation) as a turn of them."""
        turns = 1 if turn.kind == "turn" else 0
        self.attempt.turns += turns
        self.attempt.usage = add_usage(self.attempt.usage, turn.usage)
        if self._open is not None:
            self._open.turns += turns
            self._open.usage = add_usage(self._open.usage, turn.usage)

    # Agents ---------------------------------------------------------------------------

    def recording(self, recorder: ActorRef) -> None:
        """The run's Recorder, once it has started: it appends the attempt's sessions lines."""
        self._recorder = recorder

    async def cli_used(self, cli: str, path: str, agent: str, version: str | None) -> None:
        """A CLI executable the run uses for the first time: told to the Recorder for run.json's `clis`."""
        if self.writes and self._recorder is not None:
            await tell(self._recorder, CliUsed(cli, path, agent, version))

    async def opened(self, key: str, harness_name: str, harness: Harness, version: str | None = None) -> str | None:
        """The native session agent `key` resumes (its recorded one, where its harness can), or None.

        Its sessions line is told to the Recorder, not waited for: nothing waits on disk as an
        agent opens, and the line is written before any line of the agent's turns (record/layout.py)."""
        resumed: str | None = None
        fresh: str | None = None
        if self.continuing:
            recorded = self.sessions.get(key)
            fresh = fresh_because(recorded, harness_name)
            if fresh is None and recorded is not None and recorded.session is not None:
                resumed = recorded.session
                # what its CLI reports on resume is the session's running total: its turns on record took it so far
                harness.seed(resumed, self.session_usage.get((key, resumed)))
                progress("agentswf.run", "agent resumes its session", agent=key, session=resumed)
        if self.writes:
            assert self._recorder is not None, "an agent opens in a run whose actors have started"
            await tell(self._recorder, SessionOpened(self.attempt.n, key, harness_name, wall(), resumed, fresh, version))
        return resumed

    # The attempt's ending -------------------------------------------------------------

    async def end(self, outcome: str, reason: str | None) -> None:
        if not self.writes:
            return
        self.attempt.ended_at = wall()
        self.attempt.outcome = outcome
        self.attempt.reason = reason
        self.attempt.stage = None if outcome == "completed" else self.current_stage or self._left_in
        await self._write(rewrite_attempt, self.run_dir, self.attempt, what=f"attempt {self.attempt.n}'s record")

    async def _write(self, write: Callable[..., None], *args: Any, what: str) -> None:
        with anyio.CancelScope(shield=True):  # a record half-decided is worse than a late one
            try:
                await in_real_time(lambda: write(*args))
            except OSError as error:
                raise WorkflowError(f"{what} can't be written: {error.strerror or error}") from None


def _last_of(run_dir: Path, earlier: list[AttemptRecord], rerun: str | None) -> AttemptRecord:
    """The attempt a continue goes on from, marked interrupted if it never recorded its end."""
    if not earlier:
        raise RecordRefused(f"run {run_dir.name} has no attempts on record (recorded by an older agentswf); start it anew")
    last = earlier[-1]
    if is_live(last):
        raise RecordRefused(
            f"attempt {last.n} of run {run_dir.name} is still running (pid {last.pid}); awf stop it, or wait for it to end"
        )
    if last.ended_at is None and last.outcome is None:
        last.outcome = INTERRUPTED
        last.found_interrupted_at = wall()
        rewrite_attempt(run_dir, last)
    if last.outcome == "completed" and rerun is None:
        raise RecordRefused(
            f"run {run_dir.name} completed in attempt {last.n}; there is nothing to continue "
            "(--rerun STAGE runs a stage again)"
        )
    return last


def _spent_before(run_dir: Path, attempts: list[AttemptRecord]) -> tuple[RunUsage | None, float]:
    """What the run's attempts so far spent (its usage.json as they left it, None without one or
    when it doesn't read), and the seconds they ran: to their recorded end, or for one killed
    before it recorded it, to the end of its last turn."""
    try:
        recorded = read_json(run_dir / USAGE_FILE)
        spent: RunUsage | None = msgspec.convert(recorded, RunUsage)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        spent = None
    if spent is not None and _below_zero(recorded):  # a spend of less than nothing would give the budget back
        raise DefinitionError(f"run {run_dir.name}'s usage.json says it spent less than nothing: it isn't a record of spend")
    return spent, ran_seconds(attempts, spent)


def _below_zero(value: Any) -> bool:
    """Whether a number below 0 is anywhere in `value` (JSON as decoded)."""
    if isinstance(value, dict):
        return any(_below_zero(item) for item in value.values())
    if isinstance(value, list):
        return any(_below_zero(item) for item in value)
    return isinstance(value, int | float) and not isinstance(value, bool) and value < 0


def _check_rerun(run_dir: Path, rerun: str, stages: dict[str, StageRecord], attempts: list[AttemptRecord]) -> None:
    """Refuse a --rerun of a stage no attempt entered: a misspelt name would re-run nothing."""
    known = {name for attempt in attempts for name in attempt.stages} | set(stages)
    if rerun not in known:
        names = ", ".join(sorted(known)) or "none"
        raise RecordRefused(f"--rerun {rerun}: run {run_dir.name} has no stage {rerun} on record (its stages: {names})")


def _turn_ids(run_dir: Path, attempts: list[AttemptRecord]) -> dict[tuple[str, str], dict[str, Any]]:
    """The answered id'd turns a continue may give back: the latest for each (agent, id), less those
    a later attempt ran again (answered after the stages it replaced began)."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for line in read_turn_ids(run_dir):
        if not _is_turn_line(line):  # torn, or not as this version writes them: nothing to give back
            continue
        voided = any(
            later.replaced_from is not None and later.n > line.get("attempt", 0) and line.get("at", 0.0) >= later.replaced_from
            for later in attempts
        )
        if not voided:
            found[(line["agent"], line["id"])] = line
    return found


def _is_turn_line(line: dict[str, Any]) -> bool:
    """A line of turn-ids.jsonl with every field a continue compares, of the type it compares."""
    return (
        all(isinstance(line.get(name), str) for name in ("agent", "id", "prompt"))
        and isinstance(line.get("schema"), dict)
        and isinstance(line.get("turn"), dict)
        and type(line.get("attempt")) is int
        and type(line.get("at")) in (int, float)
    )
