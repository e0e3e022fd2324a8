"""What a continued run goes on with, and which stage options go together.

A continue takes the record a run id (or directory) names, checks it is a run of this
workflow, and takes the args and cwd it was started with (passing others is refused), the
run's sandbox and budget its last attempt ran with (another given wins), and its first
attempt's start, which stays the run's.
"""

from __future__ import annotations

import hashlib
import inspect
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from ..engine.accounting import RunUsage
from ..engine.record.attempts import AttemptRecord, RecordRefused, read_attempts
from ..engine.record.layout import TEMPORAL_FILE, find_run, read_json
from ..errors import DefinitionError
from ..sandbox.spec import RunSandboxFile
from . import stages as plan
from .budgets import Budget, Spent, carried, raised, ran_seconds, spent_before
from .definition import WorkflowDefinition

USAGE_FILE = "usage.json"  # the run's spend, across its attempts (engine/accounting.py)


class Continued(NamedTuple):
    """The run a continue goes on with: its record, the args and cwd it was started with, the
    run's sandbox (`awf run --sandbox`) and budget its last attempt ran with, and when its first
    attempt started (the run's start, which run.json keeps; None without an attempt on record)."""

    run_dir: Path
    args: Any
    cwd: Path
    sandbox: RunSandboxFile | None
    budget: Budget | None
    started_at: float | None


def continued_run(
    definition: WorkflowDefinition, root: Path, run: str | Path, args: Any, cwd: str | Path | None, *,
    on_temporal: bool = False,
) -> Continued:
    """The record `run` names (an id, `<workflow>/<id>`, or a directory); raises DefinitionError if it
    isn't a run of this workflow, if other args or another cwd are given than it was started with, or
    if it ran on another engine than the continue's (`on_temporal`): its attempts go on where they ran."""
    run_dir = find_run(root, str(run))
    if run_dir is None:
        raise DefinitionError(f"continue {run}: no record of that run under {root}")
    ran_on_temporal = (run_dir / TEMPORAL_FILE).exists()
    if ran_on_temporal != on_temporal:
        where, other = ("Temporal", "the local engine") if ran_on_temporal else ("the local engine", "Temporal")
        raise DefinitionError(f"continue {run}: it ran on {where}, and goes on there, not on {other}")
    try:
        info = read_json(run_dir / "run.json")
    except (OSError, msgspec.DecodeError):
        raise DefinitionError(f"continue {run}: {run_dir} is not a run's record") from None
    if not isinstance(info, dict) or info.get("workflow") != definition.name:
        workflow_name = info.get("workflow") if isinstance(info, dict) else None
        raise DefinitionError(f"continue {run}: that is a run of workflow {workflow_name!r}, not of {definition.name!r}")
    if args is not None and msgspec.to_builtins(args) != info.get("args"):
        raise DefinitionError(f"continue {run}: a continued run takes the args it was started with, not others")
    given_cwd = info.get("cwd")
    if not isinstance(given_cwd, str) or not os.path.isabs(given_cwd) or not os.path.isdir(given_cwd):
        raise DefinitionError(f"continue {run}: the cwd on record ({given_cwd!r}) is not a directory; the run can't go on there")
    recorded_cwd = Path(given_cwd)
    if cwd is not None and Path(cwd).resolve() != recorded_cwd:
        raise DefinitionError(f"continue {run}: a continued run works in {recorded_cwd}, where it started")
    try:
        attempts = read_attempts(run_dir)
    except RecordRefused as error:
        raise DefinitionError(f"continue {run}: {error}") from None
    last = attempts[-1] if attempts else None
    try:
        sandbox = msgspec.convert(last.sandbox, RunSandboxFile) if last is not None and last.sandbox is not None else None
        budget = msgspec.convert(last.budget, Budget) if last is not None and last.budget is not None else None
    except (msgspec.ValidationError, DefinitionError) as error:
        raise DefinitionError(f"continue {run}: the sandbox or budget on record doesn't read: {error}") from None
    started_at = attempts[0].started_at if attempts else None
    return Continued(run_dir, info.get("args"), recorded_cwd, sandbox, budget, started_at)


def _spend_on_record(run_dir: Path) -> tuple[list[AttemptRecord], RunUsage]:
    """The run's attempts (raises OSError or RecordRefused when they don't read) and its
    usage.json (nothing spent when there is none yet, or it doesn't read: an agent can write it)."""
    attempts = read_attempts(run_dir)
    try:
        spent = msgspec.convert(read_json(run_dir / USAGE_FILE), RunUsage)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        spent = RunUsage()
    return attempts, spent


def _budget_of(attempt: AttemptRecord) -> Budget | None:
    return msgspec.convert(attempt.budget, Budget) if attempt.budget else None


def attempt_budget(run_dir: Path) -> tuple[Budget | None, Spent]:
    """The run budget the run's latest attempt (the live one) runs under, and what the attempts
    before it spent and the time they ran, which that budget goes on from. No budget and nothing
    spent when the record doesn't say."""
    try:
        attempts, spent = _spend_on_record(run_dir)
        budget = _budget_of(attempts[-1]) if attempts else None
    except (OSError, RecordRefused, msgspec.ValidationError, DefinitionError):
        return None, Spent()
    if not attempts:
        return None, Spent()
    return budget, spent_before(spent, attempts[-1].n, ran_seconds(attempts[:-1], spent))


def budget_to_go_on(run_dir: Path) -> Budget | None:
    """The budget a continue of the ended run needs, when the one its last attempt ran with is
    spent (a turn would not start under it): raised where it ran out. None when it isn't spent,
    there is none, or the record doesn't say."""
    try:
        attempts, spent = _spend_on_record(run_dir)
        budget = _budget_of(attempts[-1]) if attempts else None
    except (OSError, RecordRefused, msgspec.ValidationError, DefinitionError):
        return None
    if budget is None:
        return None
    run, _, _ = carried(spent, ran_seconds(attempts, spent))
    return raised(budget, run)


def check_stage_options(
    continue_from: Any, rerun: str | None, from_stage: str | None, values: Mapping[str, Any] | None
) -> None:
    """Refuse what doesn't go together, or names what can't be a stage."""
    if rerun is not None and continue_from is None:
        raise DefinitionError("rerun re-runs a stage of a run being continued: give continue_from too")
    if from_stage is not None and continue_from is not None:
        raise DefinitionError("from_stage starts a new run at a stage; to run a stage of a run again, continue it with rerun")
    if values is not None and from_stage is None:
        raise DefinitionError("values are the stages' before from_stage: give from_stage too")
    for what, name in (("rerun", rerun), ("from_stage", from_stage)):
        if name is not None and not plan.is_stage_name(name):
            raise DefinitionError(f"{what} {name!r} is not a stage's name: lowercase letters, digits and '-'")
    if values is not None:
        if not isinstance(values, Mapping):
            raise DefinitionError("values must be an object of stage values, by stage name")
        wrong = [name for name in values if not isinstance(name, str) or not plan.is_stage_name(name)]
        if wrong:
            raise DefinitionError(f"values: {wrong[0]!r} is not a stage's name")


def workflow_file(definition: WorkflowDefinition) -> Path | None:
    """The file the workflow's function is defined in, when it has one."""
    try:
        source = inspect.getsourcefile(inspect.unwrap(definition.fn))
    except TypeError:
        return None
    return Path(source).resolve() if source else None


def file_sha256(path: Path | None) -> str | None:
    if path is None:
        return None
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
