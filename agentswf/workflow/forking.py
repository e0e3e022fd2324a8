"""`ContinueFrom`: a run forked at an agent's turn, as `agentswf.run(continue_from=…)` takes it.

The fork is a new run of the workflow, from the top. What started, on record, before agent
KEY's turn N started is played from the forked run's record (agentswf/replay: no CLI, no model,
no tool call, no spend); from that turn on every agent runs for real, with the model or effort
given. The new run's run.json names the run and turn it forked at (`forked_from`), `awf ls` shows
it, and its usage counts only what it ran. `awf continue RUN --from KEY:N [--set …]` is the same.

`check_continue_from` is the rule for what a fork is given, without I/O (RunOptions calls it);
`forked_run` reads the record, as `LocalRun.start` does before anything is recorded.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import msgspec

from ..engine.record.attempts import RecordRefused, read_attempts
from ..engine.record.layout import find_run
from ..errors import DefinitionError, StopRequested
from ..harnesses.base import Harness
from ..harnesses.runtime import Runtime
from ..replay.fork import Fork
from ..replay.played import ReplayBook
from ..replay.recorded import RecordUnreadable, read_recorded
from ..sandbox.spec import RunSandboxFile
from .agents import check_key
from .budgets import Budget
from .context import Workflow
from .definition import WorkflowDefinition

SETTINGS = ("model", "effort")
"""What a fork may set of an agent, from the fork's turn on."""


class ContinueFrom(msgspec.Struct, frozen=True):
    """Fork `run` (a run's id or record directory, an exported one too) at `agent`'s turn `turn`
    (1 for its first): `agentswf.run(definition, continue_from=ContinueFrom(run, "writer", 2))`.

    `settings` gives agents' models or efforts from the fork's turn on, by agent key:
    `{"writer": {"model": "opus", "effort": "high"}}` (`awf continue --set writer:model=opus`).
    `strict=False` lets a played turn's prompt text differ from the record's (its schema, and
    everything else, must still match).
    """

    run: str | Path
    agent: str
    turn: int
    settings: Mapping[str, Mapping[str, str]] = msgspec.field(default_factory=dict)
    strict: bool = True


def parse_turn(at: str) -> tuple[str, int]:
    """`KEY:N` (as `awf continue --from` takes it) as (key, n); raises DefinitionError for anything else."""
    key, _, number = at.rpartition(":")
    if not key or not number.isdigit() or int(number) < 1:
        raise DefinitionError(f"{at!r} is no turn: give KEY:N, an agent's key and its turn's number (1 for its first)")
    return check_key(key), int(number)


def check_continue_from(fork: ContinueFrom) -> None:
    """Refuse a fork that can't be one, saying why; reads nothing."""
    if not isinstance(fork.run, str | Path) or not str(fork.run):
        raise DefinitionError(f"continue_from's run is a run's id or record directory, not {fork.run!r}")
    check_key(fork.agent)
    if type(fork.turn) is not int or fork.turn < 1:
        raise DefinitionError(f"continue_from's turn is agent {fork.agent}'s turn's number, 1 for its first; not {fork.turn!r}")
    if not isinstance(fork.settings, Mapping):
        raise DefinitionError("continue_from's settings are by agent key: {KEY: {'model': …, 'effort': …}}")
    for agent, asked in fork.settings.items():
        check_key(agent)
        wrong = sorted(map(str, set(asked) - set(SETTINGS))) if isinstance(asked, Mapping) else ["nothing"]
        if wrong or not asked or not all(isinstance(value, str) and value for value in asked.values()):
            named = ", ".join(wrong) or "an empty one"
            raise DefinitionError(f"continue_from's settings of {agent}: give model= and/or effort=, each a name; not {named}")
    if not isinstance(fork.strict, bool):
        raise DefinitionError(f"continue_from's strict is True or False, not {fork.strict!r}")


@dataclass(frozen=True)
class Forked:
    """A fork as its run starts: what it plays, and the forked run's args, cwd, run root, and the
    sandbox and budget its last attempt had (None in an exported record), which the fork keeps."""

    fork: Fork
    args: Any
    cwd: Path | None  # None: the record's isn't a directory here (an exported record's)
    root: Path
    sandbox: RunSandboxFile | None
    budget: Budget | None
    forked_from: dict[str, Any]  # run.json's: the run, its id, the agent and the turn
    settings: Mapping[str, Mapping[str, str]]  # by agent: its model and effort from the fork's turn on

    def resolver(self, resolve: Callable[[str, Runtime], Harness]) -> Callable[[str, Runtime], Harness]:
        """How the fork's agents are made: `resolve`'s harness, with the settings given, behind the record's turns."""
        settings = self.settings

        def harness(agent: str, runtime: Runtime) -> Harness:
            given = (settings[agent].get("model"), settings[agent].get("effort")) if agent in settings else None
            try:
                return self.fork.harness(agent, resolve(agent, runtime), given)
            except NotImplementedError as error:
                raise DefinitionError(f"agent {agent}: {error}") from None

        return harness


def forked_run(definition: WorkflowDefinition, root: Path, given: ContinueFrom) -> Forked:
    """The fork `given` asks for, its record read (`run` by id under `root`, or a directory); raises
    DefinitionError (RecordUnreadable) when it isn't a record of this workflow with that turn."""
    run_dir = find_run(root, str(given.run))
    if run_dir is None:
        raise DefinitionError(f"continue_from {given.run}: no record of that run under {root}")
    recorded = read_recorded(run_dir)
    if recorded.workflow != definition.name:
        raise RecordUnreadable(f"{run_dir} is a record of workflow {recorded.workflow!r}, not of {definition.name!r}")
    fork = Fork.at(recorded, given.agent, given.turn, strict=given.strict)
    try:
        attempts = read_attempts(run_dir)
        last = attempts[-1] if attempts else None
        sandbox = msgspec.convert(last.sandbox, RunSandboxFile) if last is not None and last.sandbox else None
        budget = msgspec.convert(last.budget, Budget) if last is not None and last.budget else None
    except (OSError, RecordRefused, msgspec.ValidationError, DefinitionError) as error:
        raise RecordUnreadable(f"{run_dir}: the sandbox or budget on record doesn't read: {error}") from None
    cwd = Path(recorded.cwd) if os.path.isabs(recorded.cwd) and os.path.isdir(recorded.cwd) else None
    resolved = run_dir.resolve()
    forked_from = {"run": str(resolved), "run_id": resolved.name, "agent": given.agent, "turn": given.turn}
    return Forked(fork, recorded.args, cwd, resolved.parent.parent, sandbox, budget, forked_from, given.settings)


def played_definition(definition: WorkflowDefinition, book: ReplayBook) -> WorkflowDefinition:
    """The workflow, telling the book where its record is, and cancelled once the replay diverges."""
    inner = definition.fn

    @functools.wraps(inner)  # the run names the line a failure came from in the workflow's own file
    async def replaying(wf: Workflow, *args: Any) -> Any:
        book.run_dir, book.cwd = wf.run_dir, str(wf.cwd)
        with anyio.CancelScope() as scope:
            book.cancel = scope.cancel
            return await inner(wf, *args)
        raise StopRequested("the replay diverged from the record")

    return dataclasses.replace(definition, fn=replaying)
