"""What `agentswf.run` is asked, checked whole before anything is read, written or started.

`RunOptions` holds run()'s keyword arguments. Making one refuses, with a DefinitionError that
says why, what can't run: options that don't go together (`rerun` without `continue_from`,
`values` without `from_stage`, …), a timeout that is no duration, a budget or a sandbox that
isn't one, a fork (`ContinueFrom`) that can't be one, and what an engine other than this process's actors (`engine=`, Temporal's) doesn't
do. It reads no file, no environment and no clock: a rule, testable from a table. What needs
the disk (the run continued or forked, the replayed record, the sandbox opened) is `LocalRun.start`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from ..errors import DefinitionError
from ..sandbox.spec import RunSandboxFile
from .budgets import Budget
from .continuing import check_stage_options
from .definition import WorkflowDefinition
from .durations import Duration, to_seconds
from .forking import ContinueFrom, check_continue_from

if TYPE_CHECKING:
    from .agents import HarnessResolver
    from .running import RunResult

DEFAULT_RUN_TIMEOUT_SECONDS = 30 * 60.0

LOCAL_ONLY = ("env", "harnesses", "replay", "from_stage", "values", "trace", "sandbox")
"""The options an `Engine` doesn't take (it takes args, run_root, cwd, timeout and budget, and continues a run of its
own with continue_from and rerun), in the order a refusal names them."""

ENGINE_FORK = (
    "continue_from=ContinueFrom(...) (awf continue --from): a fork plays the turns before its turn from the record, "
    "in this process, and an engine's turns run on its workers; run it locally"
)

FLAGS = {"budget": "--budget", "sandbox": "--sandbox", "trace": "--trace", "from_stage": "--from-stage",
         "values": "--values", "replay": "--replay", "rerun": "--rerun"}  # fmt: skip
"""awf's flag for each option that has one, named beside it in a refusal."""


class Engine(Protocol):
    """What runs a workflow elsewhere than this process's actors (`agentswf.temporal.TemporalEngine`)."""

    async def run(
        self, definition: WorkflowDefinition, *, args: Any, run_root: str | Path | None, cwd: str | Path | None,
        timeout: Duration | None, budget: Budget | None,
    ) -> RunResult:
        """The run; given `continue_from` and `rerun` (only when `agentswf.run` is), a new attempt of a run of its own."""
        ...


class RunOptions(msgspec.Struct, frozen=True, kw_only=True):
    """`agentswf.run`'s options (its docstring says what each does), refused at once where they can't run."""

    args: Any = None
    run_root: str | Path | None = None
    cwd: str | Path | None = None
    timeout: Duration | None = None
    env: Mapping[str, str] | None = None
    harnesses: HarnessResolver | None = None
    replay: str | Path | None = None
    continue_from: str | Path | ContinueFrom | None = None
    rerun: str | None = None
    from_stage: str | None = None
    values: Mapping[str, Any] | None = None
    trace: bool = False
    budget: Budget | None = None
    sandbox: RunSandboxFile | None = None
    engine: Engine | None = None

    def __post_init__(self) -> None:
        if self.engine is not None:
            given = [name for name in LOCAL_ONLY if getattr(self, name) not in (None, False)]
            if given:
                named = ", ".join(f"{name} ({FLAGS[name]})" if name in FLAGS else name for name in given)
                raise DefinitionError(f"not on {type(self.engine).__name__} yet: {named}; run locally for them")
            if isinstance(self.continue_from, ContinueFrom):
                raise DefinitionError(f"not on {type(self.engine).__name__} yet: {ENGINE_FORK}")
        if isinstance(self.continue_from, ContinueFrom):
            self._check_fork(self.continue_from)
        check_stage_options(self.continue_from, self.rerun, self.from_stage, self.values)
        if self.continue_from is not None and not isinstance(self.continue_from, str | Path | ContinueFrom):
            raise DefinitionError(
                f"continue_from is a run's id or directory, or a ContinueFrom to fork one; not {type(self.continue_from).__name__}"
            )
        if self.timeout is not None:
            to_seconds(self.timeout, what="the run's timeout")
        for name, kind in (("budget", Budget), ("sandbox", RunSandboxFile)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                raise DefinitionError(f"{name} is a {kind.__name__}, not {type(value).__name__}")

    def _check_fork(self, fork: ContinueFrom) -> None:
        check_continue_from(fork)
        given = [name for name in ("args", "rerun", "from_stage", "values", "replay") if getattr(self, name) is not None]
        if given:
            raise DefinitionError(
                f"a fork (continue_from=ContinueFrom(...)) is a new run with the forked run's args, its turns before the "
                f"fork's played from its record; it takes no {' or '.join(given)}"
            )

    @property
    def seconds(self) -> float:
        """The whole run's time, in seconds (30 minutes when no timeout is given)."""
        return DEFAULT_RUN_TIMEOUT_SECONDS if self.timeout is None else to_seconds(self.timeout, what="the run's timeout")

    @property
    def looks_ahead(self) -> bool:
        """`from_stage` without `values`: nothing runs or is recorded; the result lists the stage values needed."""
        return self.from_stage is not None and self.values is None
