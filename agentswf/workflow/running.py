"""`agentswf.run(...)`: run a workflow under whichever of asyncio or trio is running."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.lowlevel
import msgspec

from ..errors import DefinitionError, StopRequested, leaf_errors
from ..engine.records import DEFAULT_RUN_ROOT, make_private_dirs, new_run_id
from ..engine.recorder import RecordGaps, RunEnded, RunStarted
from ..engine.broker import Replay
from ..engine.run import run_actors
from ..engine.switchboard import WORKFLOW_KEY, CloseAll, Register
from ..harnesses.runtime import harness_for
from .agents import Agents, HarnessResolver
from .context import Approvals, Workflow
from .definition import WorkflowDefinition
from .durations import Duration, to_seconds

DEFAULT_RUN_TIMEOUT_SECONDS = 30 * 60.0
MAX_REASON_CHARS = 4000

RunOutcome = Literal["completed", "stopped", "failed", "timed-out", "cancelled"]


@dataclass(frozen=True)
class RunResult:
    """How a run ended. `value` is the workflow's return value when it completed."""

    outcome: RunOutcome
    value: Any
    reason: str | None
    run_id: str
    run_dir: Path

    @property
    def completed(self) -> bool:
        return self.outcome == "completed"


def _reason(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, BaseExceptionGroup):  # name the errors inside, not only the group
        text += ": " + "; ".join(f"{type(leaf).__name__}: {leaf}" for leaf in leaf_errors(error))
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


def decode_args(definition: WorkflowDefinition, args: Any) -> Any:
    """`args` checked against the workflow's args type; raises DefinitionError if they don't fit."""
    if not definition.takes_args:
        if args is not None:
            raise DefinitionError(f"workflow {definition.name} takes no args")
        return None
    if args is None and isinstance(definition.args_type, type) and issubclass(definition.args_type, msgspec.Struct):
        args = {}  # a Struct of defaults
    try:
        return msgspec.convert(args, definition.args_type)
    except msgspec.ValidationError as error:
        raise DefinitionError(f"the args of workflow {definition.name} don't fit: {error}") from None


async def run(
    definition: WorkflowDefinition,
    *,
    args: Any = None,
    run_root: str | Path | None = None,
    cwd: str | Path | None = None,
    timeout: Duration | None = None,
    env: Mapping[str, str] | None = None,
    harnesses: HarnessResolver | None = None,
    replay: str | Path | None = None,
) -> RunResult:
    """Run `definition` to its end and return how it ended; a failing workflow doesn't raise.

    `timeout` bounds the whole run (30 minutes when not given). `harnesses` replaces how
    agents' runtimes become harnesses (agentswf.testing uses it for scripted agents).
    `replay` names a recorded run's directory: every tool call is answered from its
    record and no handler runs, for debugging a workflow's logic without side effects.
    """
    if not isinstance(definition, WorkflowDefinition):
        raise DefinitionError(f"{definition!r} is not a workflow: decorate an async function with @workflow(...)")
    checked_args = decode_args(definition, args)
    directory = Path(cwd or os.getcwd()).resolve()
    root = Path(run_root) if run_root is not None else DEFAULT_RUN_ROOT
    root = root if root.is_absolute() else directory / root
    seconds = DEFAULT_RUN_TIMEOUT_SECONDS if timeout is None else to_seconds(timeout, what="the run's timeout")
    run_env = dict(env if env is not None else os.environ)
    resolve = harnesses or (lambda key, runtime: harness_for(runtime, run_env))
    replayed = Replay.from_record(Path(replay)) if replay is not None else None
    if replay is not None and not (Path(replay) / "run.json").exists():
        raise DefinitionError(f"--replay {replay}: that is not a run's record")
    run_id = new_run_id()
    record_dir = root / definition.name / run_id
    try:
        make_private_dirs(record_dir, exist_ok=False)
    except OSError as error:
        raise DefinitionError(f"the run's record can't be written under {root}: {error.strerror or error}") from None
    started = time.time()
    run_deadline = anyio.current_time() + seconds
    async with anyio.create_task_group() as watch:
        # The run's actors outlive a cancellation from the caller long enough to record
        # how the run ended: they run shielded, and the caller's cancellation is passed
        # on to the workflow alone, with a bounded time to clean up.
        with anyio.CancelScope(shield=True) as protected:
            async with run_actors(
                record_dir, deadline=run_deadline, policies=definition.policies, replay=replayed
            ) as actors:
                await actors.recorder.ask(
                    RunStarted(
                        run_id,
                        definition.name,
                        args,
                        str(directory),
                        started,
                        str(actors.control),
                        str(Path(replay).resolve()) if replay is not None else None,
                    )
                )
                await actors.board.ask(Register(WORKFLOW_KEY, "participant", None, False))
                agents = Agents(actors.run, actors.board, directory, run_env, resolve)
                wf = Workflow(
                    name=definition.name,
                    run_id=run_id,
                    run_dir=record_dir,
                    cwd=directory,
                    agents=agents,
                    log_lines=actors.log_lines,
                    approvals=Approvals(actors.desk),
                    board=actors.board,
                )
                with anyio.CancelScope() as work:
                    watch.start_soon(_pass_on_cancellation, work, protected)
                    outcome, value, reason = await _run_workflow(definition, wf, checked_args, run_deadline, seconds)
                if work.cancelled_caught:
                    outcome, value, reason = "cancelled", None, "the run was cancelled"
                await actors.board.ask(CloseAll())  # the workflow is finishing: every route closes
                await agents.close_all()
                ended = (outcome, reason)
                gap = await actors.recorder.ask(RecordGaps())
                if gap is not None:  # a run whose record is incomplete has failed, whatever it did
                    outcome, value, reason = "failed", None, _incomplete(gap, *ended)
                if not await actors.recorder.ask(RunEnded(outcome, reason, value, started, time.time())):
                    gap = await actors.recorder.ask(RecordGaps()) or "the run's record is incomplete"
                    outcome, value, reason = "failed", None, _incomplete(gap, *ended)
        watch.cancel_scope.cancel()
    await anyio.lowlevel.checkpoint_if_cancelled()  # the caller's cancellation goes on to the caller
    return RunResult(outcome, value, reason, run_id, record_dir)


def _incomplete(gap: str, outcome: RunOutcome, reason: str | None) -> str:
    """The reason of a run whose record is incomplete: that first, then how it had ended."""
    if outcome == "completed":
        return gap
    return f"{gap}; the run had ended {outcome}" + (f": {reason}" if reason else "")


CANCEL_CLEANUP_SECONDS = 10.0  # after the caller cancels, to stop the agents and record the ending


async def _pass_on_cancellation(work: anyio.CancelScope, protected: anyio.CancelScope) -> None:
    """Wait; once cancelled (by the caller, or at the run's end), cancel the workflow's own scope."""
    try:
        await anyio.sleep_forever()
    finally:
        work.cancel()
        protected.deadline = anyio.current_time() + CANCEL_CLEANUP_SECONDS


async def _run_workflow(
    definition: WorkflowDefinition, wf: Workflow, args: Any, run_deadline: float, seconds: float
) -> tuple[RunOutcome, Any, str | None]:
    """Run the workflow's function; how it ended, whatever it raised (but a cancellation)."""
    try:
        with anyio.move_on_at(run_deadline) as deadline:
            value = await (definition.fn(wf, args) if definition.takes_args else definition.fn(wf))
    except StopRequested as stop:
        return "stopped", None, stop.reason
    except Exception as error:
        stop = next((leaf for leaf in leaf_errors(error) if isinstance(leaf, StopRequested)), None)
        if stop is not None:  # wf.stop inside the workflow's own task group
            return "stopped", None, stop.reason
        return "failed", None, _reason(error)
    except BaseExceptionGroup as group:
        if any(not isinstance(leaf, anyio.get_cancelled_exc_class()) for leaf in leaf_errors(group)):
            return "failed", None, _reason(group)
        raise
    if deadline.cancelled_caught:
        return "timed-out", None, f"the run's timeout of {seconds:g}s passed"
    if wf.stop_reason is not None:
        return "failed", None, f"stop was caught: {wf.stop_reason}"
    try:
        msgspec.json.encode(value)
    except (TypeError, msgspec.EncodeError) as error:
        return "failed", None, f"the workflow's return value is not JSON: {error}"
    return "completed", value, None
