"""`fork`: a recorded run run again from one agent's turn on, as a new run, everything before it
played from the record.

The workflow runs from the top. Every turn and operation that started, on record, before agent
KEY's turn N started is played from the record as a replay plays it (its tool calls not made
again, no model, no CLI); from there on every agent runs for real, on its runtime (or the
harnesses given), the agents played so far resuming the native session their last played turn
reported, and KEY (or any agent) with the model or effort given. The new run's record names the
run and turn it forked at (run.json's `forked_from`), and its usage counts only what it ran.

A fork resumes a native session as its CLI keeps it: claude, codex and pi resume the whole
session, so an agent whose session went on past turn N-1 in the forked run resumes it with those
later turns in it (no CLI here can resume a session at an earlier point of it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from ..engine.record.attempts import RecordRefused, read_attempts
from ..errors import DefinitionError
from ..harnesses.base import Attempt, AttemptResult, Harness, Operation, OperationResult
from ..harnesses.environment import scrubbed
from ..harnesses.runtime import Runtime, harness_for
from ..harnesses.usage import Usage
from ..sandbox.spec import RunSandboxFile
from ..workflow.agents import HarnessResolver, check_key
from ..workflow.budgets import Budget
from ..workflow.definition import WorkflowDefinition
from ..workflow.durations import Duration
from ..workflow.running import RunResult
from ..workflow.running import run as run_definition
from .recorded import RecordedTurn, RecordUnreadable, read_recorded
from .replay import ReplayBook, ReplayHarness, played_definition

SETTINGS = ("model", "effort")


def _kept(run_dir: Path) -> tuple[RunSandboxFile | None, Budget | None]:
    """The sandbox and budget the run's last attempt had, as its record says (an exported record has none)."""
    try:
        attempts = read_attempts(run_dir)
        last = attempts[-1] if attempts else None
        sandbox = msgspec.convert(last.sandbox, RunSandboxFile) if last is not None and last.sandbox else None
        budget = msgspec.convert(last.budget, Budget) if last is not None and last.budget else None
    except (OSError, RecordRefused, msgspec.ValidationError, DefinitionError) as error:
        raise RecordUnreadable(f"{run_dir}: the sandbox or budget on record doesn't read: {error}") from None
    return sandbox, budget


def parse_turn(at: str) -> tuple[str, int]:
    """`KEY:N` as (key, n); raises DefinitionError for anything else."""
    key, _, number = at.rpartition(":")
    if not key or not number.isdigit() or int(number) < 1:
        raise DefinitionError(f"{at!r} is no turn: give KEY:N, an agent's key and its turn's number (1 for its first)")
    return check_key(key), int(number)


class ForkHarness(Harness):
    """An agent of a fork: its attempts before the fork's turn played from the record, the rest run by `real`."""

    name = "fork"

    def __init__(self, key: str, book: ReplayBook, prefix: frozenset[str], real: Harness) -> None:
        self.key, self.book, self.prefix, self.real = key, book, prefix, real
        self.played = ReplayHarness(key, book, *real.settings())

    def _left(self, kind: str, by_workflow: bool, n: int | None = None) -> RecordedTurn | None:
        for turn in self.book.recorded.turns:
            if (
                turn.agent == self.key and turn.kind == kind and turn.by_workflow == by_workflow
                and turn.call_id in self.prefix and turn.call_id not in self.book.started and (n is None or turn.n == n)
            ):  # fmt: skip
                return turn
        return None

    def _plays(self, attempt: Attempt) -> bool:
        if attempt.call_id in self.book.playing:
            return True
        by_workflow = attempt.started_by == "workflow"
        return self._left("turn", by_workflow, attempt.turn if by_workflow else None) is not None

    async def run(self, attempt: Attempt) -> AttemptResult:
        return await (self.played if self._plays(attempt) else self.real).run(attempt)

    async def compact(self, operation: Operation) -> OperationResult:
        played = self._left("compaction", True) is not None
        return await (self.played if played else self.real).compact(operation)

    async def fork(self, operation: Operation) -> OperationResult:
        played = self._left("fork", True) is not None
        return await (self.played if played else self.real).fork(operation)

    def settings(self) -> tuple[str | None, str | None]:
        return self.real.settings()

    def with_settings(self, model: str | None, effort: str | None) -> ForkHarness:
        return ForkHarness(self.key, self.book, self.prefix, self.real.with_settings(model, effort))

    @property
    def supports_waiting(self) -> bool:  # type: ignore[override]
        return self.real.supports_waiting

    @property
    def confirms_delivery(self) -> bool:  # type: ignore[override]
        return self.real.confirms_delivery

    @property
    def can_await(self) -> bool:  # type: ignore[override]
        return self.real.can_await

    def seed(self, session: str, totals: Usage | None) -> None:
        self.real.seed(session, totals)

    def totals(self, session: str) -> Usage | None:
        return self.real.totals(session)

    def cli_executable(self) -> tuple[str, str] | None:
        return self.real.cli_executable()

    def cli_home(self) -> str:
        return self.real.cli_home()

    async def close(self) -> None:
        await self.real.close()

    @property
    def check_ins(self) -> Mapping[str, float]:
        return self.real.check_ins

    def turn_settled(self, outcome: str) -> None:
        self.real.turn_settled(outcome)

    def attempt_env(self, attempt: Attempt) -> dict[str, str]:
        return self.real.attempt_env(attempt)


async def fork(
    definition: WorkflowDefinition,
    record: str | Path,
    at: str,
    *,
    settings: Mapping[str, Mapping[str, str]] | None = None,
    harnesses: HarnessResolver | None = None,
    run_root: str | Path | None = None,
    timeout: Duration | None = None,
    env: Mapping[str, str] | None = None,
    strict: bool = True,
    sandbox: RunSandboxFile | None = None,
    budget: Budget | None = None,
) -> RunResult:
    """Run `definition` again as a new run, forked from `record` (a run's directory) at `at` (`KEY:N`,
    agent KEY's turn N): what started before that turn, on record, is played from the record, and
    from it on every agent runs for real, on its runtime or by `harnesses`, with `settings` (by
    agent key, `{"model": …, "effort": …}`). Raises `ReplayDiverged` when the workflow, before the
    fork's turn, does something the record doesn't have (`strict=False`: a prompt's text may differ).
    The new run goes under `run_root` (default: the forked run's), in the forked run's cwd, with its
    args, and in the sandbox and under the budget the forked run's last attempt had (`sandbox` and
    `budget` give others): an agent that ran sandboxed runs sandboxed in its fork."""
    key, n = parse_turn(at)
    recorded = read_recorded(Path(record))
    if recorded.workflow != definition.name:
        raise RecordUnreadable(f"{record} is a record of workflow {recorded.workflow!r}, not of {definition.name!r}")
    cut = next((turn for turn in recorded.turns if turn.agent == key and turn.kind == "turn" and turn.by_workflow
                and turn.n == n), None)  # fmt: skip
    if cut is None:
        given = sorted(turn.n for turn in recorded.turns if turn.agent == key and turn.kind == "turn" and turn.by_workflow)
        raise DefinitionError(f"{record} has no turn {n} of agent {key} (its turns: {', '.join(map(str, given)) or 'none'})")
    began = cut.line.get("started_at", 0.0)
    prefix = frozenset(turn.call_id for turn in recorded.turns if turn.line.get("started_at", 0.0) < began)
    changes = {agent: dict(asked) for agent, asked in (settings or {}).items()}
    for agent, asked in changes.items():
        wrong = sorted(set(asked) - set(SETTINGS))
        if wrong or not asked:
            raise DefinitionError(f"settings of {agent}: give model= and/or effort=, not {', '.join(wrong) or 'nothing'}")
    run_env = scrubbed(env if env is not None else os.environ)
    resolve = harnesses or (lambda agent, runtime: harness_for(runtime, run_env))
    book = ReplayBook(recorded, tools="record", strict=strict, spend=False, replays_tools=False)

    def harness(agent: str, runtime: Runtime) -> Harness:
        real = resolve(agent, runtime)
        if agent in changes:
            try:
                real = real.with_settings(changes[agent].get("model"), changes[agent].get("effort"))
            except NotImplementedError as error:
                raise DefinitionError(f"agent {agent}: {error}") from None
        return ForkHarness(agent, book, prefix, real)

    cwd = recorded.cwd if os.path.isabs(recorded.cwd) and os.path.isdir(recorded.cwd) else None
    root = run_root if run_root is not None else recorded.run_dir.resolve().parent.parent
    forked_from: dict[str, Any] = {"run": str(recorded.run_dir.resolve()), "run_id": recorded.run_dir.name, "agent": key,
                                   "turn": n}  # fmt: skip
    kept_sandbox, kept_budget = _kept(recorded.run_dir)
    result = await run_definition(
        played_definition(definition, book), args=recorded.args, run_root=root, cwd=cwd, timeout=timeout, env=env,
        harnesses=harness, forked_from=forked_from, sandbox=sandbox if sandbox is not None else kept_sandbox,
        budget=budget if budget is not None else kept_budget,
    )
    if book.errors:
        raise book.errors[0]
    if book.diverged is not None:
        raise book.diverged
    return result
