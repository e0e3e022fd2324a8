"""`fork`: a recorded run run again from one agent's turn on, as a new run, everything before it
played from the record: `agentswf.run(continue_from=ContinueFrom(...))` with the turn as `KEY:N`
(agentswf/workflow/forking.py says what a fork plays and what it runs)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..sandbox.spec import RunSandboxFile
from ..workflow.agents import HarnessResolver
from ..workflow.budgets import Budget
from ..workflow.definition import WorkflowDefinition
from ..workflow.durations import Duration
from ..workflow.forking import ContinueFrom, parse_turn
from ..workflow.running import RunResult, run


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
    return await run(
        definition, continue_from=ContinueFrom(record, key, n, settings=settings or {}, strict=strict), harnesses=harnesses,
        run_root=run_root, timeout=timeout, env=env, sandbox=sandbox, budget=budget,
    )  # fmt: skip
