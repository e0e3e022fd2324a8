"""`agentswf.run(...)`: run a workflow under whichever of asyncio or trio is running."""

from __future__ import annotations

import inspect
import os
import shutil
import tempfile
import traceback
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

import anyio
import anyio.lowlevel
import anyio.to_thread
import msgspec
import structlog

from ..engine.accounting import RunUsage
from ..engine.actor_trace import RunTrace, write_trace
from ..engine.clock import wall
from ..engine.mail.switchboard import WORKFLOW_KEY, CloseAll, Register
from ..engine.record.layout import DEFAULT_RUN_ROOT, make_run_record_dir
from ..engine.record.lines import RunEnded, RunStarted
from ..engine.record.recorder import RecordGaps
from ..engine.run import RunActors, run_actors
from ..engine.tools.broker import Replay
from ..errors import DefinitionError, StopRequested, WorkflowError, leaf_errors, stop_among
from ..harnesses.environment import scrubbed
from ..harnesses.runtime import harness_for
from ..progress import run_recorded, run_started
from ..sandbox.spec import RunSandboxFile
from .agents import Agents, HarnessResolver
from .budgets import Budget
from .context import Approvals, Workflow
from .continuing import continued_run
from .definition import NO_ARGS, WorkflowDefinition
from .durable import Durable
from .durations import Duration
from .forking import ContinueFrom, Forked, forked_run, played_definition
from .run_options import Engine, RunOptions
from .sandboxes import run_sandbox
from .worktrees import RunWorktrees, WorktreeEnd

MAX_REASON_CHARS = 4000
MAX_TRACEBACK_CHARS = 64_000
_PACKAGE_DIR = str(Path(__file__).resolve().parent.parent)

RunOutcome = Literal["completed", "stopped", "failed", "timed-out", "cancelled"]


@dataclass(frozen=True)
class RunResult:
    """How a run ended. `value` is the workflow's return value when it completed.

    When the workflow raised, `where` is the line it raised from (`file:line, in name`,
    the innermost in the workflow's own file) and `traceback` the whole of it, as the
    record's output.json also holds them. `attempt` is the attempt's number (1 for a new
    run, more for a continued one); `needs` is set by a look-ahead (`from_stage` without
    `values`): each stage before the start, and its value's JSON Schema.
    """

    outcome: RunOutcome
    value: Any
    reason: str | None
    run_id: str
    run_dir: Path
    where: str | None = None
    traceback: str | None = None
    usage: RunUsage = field(default_factory=RunUsage)  # what the run spent: in all, by agent, key group, model and turn
    attempt: int = 1
    needs: dict[str, Any] | None = None  # a look-ahead's: each stage before --from-stage, and its JSON Schema
    worktrees: tuple[WorktreeEnd, ...] = ()  # what became of each wf.worktree

    @property
    def completed(self) -> bool:
        return self.outcome == "completed"


def _reason(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, BaseExceptionGroup):  # name the errors inside, not only the group
        text += ": " + "; ".join(f"{type(leaf).__name__}: {leaf}" for leaf in leaf_errors(error))
    text += "".join(f" ({hint})" for leaf in leaf_errors(error) if (hint := missing_await(leaf)))
    return text if len(text) <= MAX_REASON_CHARS else text[: MAX_REASON_CHARS - 1] + "…"


_AS_AUTHORS_WRITE = {"Agents": "wf.agents", "Agent": "agent", "Workflow": "wf", "Approvals": "wf.approvals",
                     "Sandboxes": "wf.sandboxes", "Route": "route", "Participants": "wf.participants"}  # fmt: skip


def missing_await(error: BaseException) -> str | None:
    """`did you forget to await wf.agents.open(...)?` where `error` is an attribute asked of one of
    agentswf's coroutines (`agent = wf.agents.open(...)` then `agent.run`); else None."""
    made = getattr(error, "obj", None) if isinstance(error, AttributeError) else None
    if not inspect.iscoroutine(made) or not made.cr_code.co_filename.startswith(_PACKAGE_DIR):
        return None
    made.close()  # never started, never to be: closed here, not warned of as never awaited when collected
    owner, _, name = made.cr_code.co_qualname.rpartition(".")
    return f"did you forget to await {_AS_AUTHORS_WRITE.get(owner, owner or 'agentswf')}.{name}(...)?"


class _Ending(NamedTuple):
    outcome: RunOutcome
    value: Any
    reason: str | None
    where: str | None = None
    traceback: str | None = None


def failure_ending(error: BaseException, home: str) -> _Ending:
    """A failed ending for `error`: its reason, the line it came from, its whole traceback.

    The traceback starts in the workflow's function, not in agentswf's frame that called it.
    """
    if error.__traceback__ is not None and error.__traceback__.tb_next is not None:
        error = error.with_traceback(error.__traceback__.tb_next)
    text = "".join(traceback.format_exception(error))
    if len(text) > MAX_TRACEBACK_CHARS:
        text = "…" + text[-(MAX_TRACEBACK_CHARS - 1) :]
    return _Ending("failed", None, _reason(error), _where(error, home), text)


def _where(error: BaseException, home: str) -> str | None:
    """The innermost line of `home` (the workflow's file) that `error` came through.

    Failing that, the innermost line outside agentswf: a library the workflow called.
    """
    cancelled = anyio.get_cancelled_exc_class()
    leaves = [leaf for leaf in leaf_errors(error) if not isinstance(leaf, cancelled)] or [error]
    frames = [frame for leaf in leaves for frame in reversed(traceback.extract_tb(leaf.__traceback__))]
    if error is not leaves[0]:
        frames += reversed(traceback.extract_tb(error.__traceback__))
    found = next((frame for frame in frames if frame.filename == home), None)
    found = found or next((frame for frame in frames if not frame.filename.startswith(_PACKAGE_DIR)), None)
    return None if found is None else f"{found.filename}:{found.lineno}, in {found.name}"


def decode_args(definition: WorkflowDefinition, args: Any) -> Any:
    """`args` checked against the workflow's args type; raises DefinitionError if they don't fit."""
    if not definition.takes_args:
        if args is not None:
            raise DefinitionError(f"workflow {definition.name} takes no args")
        return None
    if args is None and definition.args_default is not NO_ARGS:
        args = definition.args_default  # as Python reads `async def f(wf, args: T = default)`
    elif args is None and isinstance(definition.args_type, type) and issubclass(definition.args_type, msgspec.Struct):
        args = {}  # a Struct of defaults
    try:
        return msgspec.convert(args, definition.args_type)
    except msgspec.ValidationError as error:
        raise DefinitionError(f"the args of workflow {definition.name} don't fit: {error}") from None


def _replay_of(definition: WorkflowDefinition, record: Path) -> Replay:
    """The tool calls of `record`, a run of this same workflow; raises DefinitionError if it isn't one."""
    try:
        recorded = msgspec.json.decode((record / "run.json").read_bytes())
    except (OSError, msgspec.DecodeError):
        raise DefinitionError(f"replay {record}: that is not a run's record") from None
    workflow_name = recorded.get("workflow") if isinstance(recorded, dict) else None
    if workflow_name != definition.name:
        raise DefinitionError(
            f"replay {record}: that is a run of workflow {workflow_name!r}, not of {definition.name!r}"
        )
    return Replay.from_record(record)


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
    continue_from: str | Path | ContinueFrom | None = None,
    rerun: str | None = None,
    from_stage: str | None = None,
    values: Mapping[str, Any] | None = None,
    trace: bool = False,
    budget: Budget | None = None,
    sandbox: RunSandboxFile | None = None,
    engine: Engine | None = None,
) -> RunResult:
    """Run `definition` to its end and return how it ended; a failing workflow doesn't raise.

    `timeout` bounds the whole run (30 minutes when not given). `harnesses` replaces how
    agents' runtimes become harnesses (agentswf.testing uses it for scripted agents).
    `replay` names a recorded run's directory: every tool call is answered from its
    record and no handler runs, for debugging a workflow's logic without side effects.
    `trace` records every mailbox event of the run's actors in its record (`awf trace RUN --actors`).
    `budget` caps what the run's turns may spend (see `Budget`). `sandbox` puts every agent in
    one sandbox working in `cwd` (`awf run --sandbox`'s file, decoded); it is kept in the
    record, and a continue given none puts its agents in the recorded one again; so is
    `budget`, which in a continue counts what the earlier attempts spent.

    `continue_from` (a run's id or directory) makes this a new attempt of that run: stages
    recorded complete give back their values without running, id'd turns answered before
    give back their turns, and `rerun` names a stage to run again (and all after it).
    `from_stage` starts a new run at that stage, the stages before it given by `values`
    (by stage name); without `values` it only looks ahead: nothing runs or is recorded, and
    `RunResult.needs` lists the stage values needed with their JSON Schemas.

    `continue_from=ContinueFrom(run, agent, turn)` forks `run` at `agent`'s turn `turn` instead, as
    `awf continue RUN --from KEY:N` does: a new run, with the forked run's args, in its cwd, sandbox
    and budget (unless others are given), every turn that started before that one played from its
    record (no CLI, no model, no tool call, no spend) and the rest run for real, with the models or
    efforts its `settings` give. Its run.json's `forked_from` names the run and turn. When the
    workflow, before that turn, does something the record doesn't have, the fork raises
    `ReplayDiverged` (`agentswf.ReplayDiverged`) once its run has ended.

    `engine` runs it elsewhere: `agentswf.temporal.TemporalEngine(...)` on Temporal
    (docs/guide/temporal.md), which takes `args`, `run_root`, `cwd`, `timeout` and `budget` only, and
    `continue_from` (a run's id or directory, not a fork) and `rerun` of a run on it.
    """
    if not isinstance(definition, WorkflowDefinition):
        raise DefinitionError(f"{definition!r} is not a workflow: decorate an async function with @workflow(...)")
    options = RunOptions(
        args=args, run_root=run_root, cwd=cwd, timeout=timeout, env=env, harnesses=harnesses, replay=replay,
        continue_from=continue_from, rerun=rerun, from_stage=from_stage, values=values, trace=trace, budget=budget,
        sandbox=sandbox, engine=engine,
    )  # fmt: skip
    if options.engine is not None:
        continued = {} if continue_from is None else {"continue_from": continue_from, "rerun": rerun}
        return await options.engine.run(
            definition, args=args, run_root=run_root, cwd=cwd, timeout=timeout, budget=budget, **continued
        )
    local = await LocalRun.start(definition, options)
    result = await local.execute()
    if local.forked is not None:
        local.forked.fork.check()  # a fork that diverged from its record before its turn
    return result


@dataclass
class LocalRun:
    """One run on this process's actors, in three steps: `start` does what comes before anything
    runs (a continued run's record read, its sandbox opened, its record begun), `execute` runs the
    workflow under the run's actors to its end, and `record_end` writes how it ended. The steps
    share what they learn as this object's fields, not as lists passed in to be filled."""

    definition: WorkflowDefinition
    options: RunOptions
    args: Any  # as given, or as the continued run recorded them
    checked_args: Any  # decoded as the workflow's args type
    directory: Path  # the run's cwd
    env: dict[str, str]  # its agents', without a Temporal run key
    resolve: HarnessResolver
    replayed: Replay | None
    replay_of: str | None  # the replayed record's directory, resolved
    budget: Budget | None  # given, or the continued run's
    run_id: str
    record_dir: Path
    durable: Durable
    first_started: float  # when the run's first attempt started (this one, in a new run)
    worktrees: RunWorktrees
    trace: RunTrace | None
    # The run's actors outlive a cancellation from the caller long enough to record how
    # the run ended: they run shielded, in a task of their own, since no shield stops
    # asyncio's native cancellation (task.cancel(), wait_for) in the task it is aimed
    # at. The caller's cancellation reaches only the watcher, which passes it on to the
    # workflow alone (`work`), with a bounded time to clean up (`cleanup`).
    work: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    cleanup: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    stopped: list[str] = field(default_factory=list)  # `awf stop`'s reason, once asked (Agents reads it)
    interrupted: list[str] = field(default_factory=list)  # once the caller cancelled the run, Ctrl-C (Agents reads it)
    ending: _Ending | None = None  # once recorded
    usage: RunUsage = field(default_factory=RunUsage)  # what it spent, once recorded
    worktree_ends: tuple[WorktreeEnd, ...] = ()
    forked: Forked | None = None  # a fork's (continue_from=ContinueFrom(...)): what it plays from the record

    @classmethod
    async def start(cls, definition: WorkflowDefinition, options: RunOptions) -> LocalRun:
        """Everything before the run's actors start: the continued (or forked) run's record read, the args
        decoded, the sandbox opened and the replayed record read, each refusing the run
        (DefinitionError) before anything is recorded; then the run's record begun."""
        directory = Path(options.cwd or os.getcwd()).resolve()
        root = Path(options.run_root) if options.run_root is not None else DEFAULT_RUN_ROOT
        root = root if root.is_absolute() else directory / root
        args, sandbox, budget, continued, forked = options.args, options.sandbox, options.budget, None, None
        if isinstance(options.continue_from, ContinueFrom):
            forked = forked_run(definition, root, options.continue_from)
            args, definition = forked.args, played_definition(definition, forked.fork.book)
            directory = forked.cwd if options.cwd is None and forked.cwd is not None else directory
            root = root if options.run_root is not None else forked.root
            sandbox = sandbox if sandbox is not None else forked.sandbox
            budget = budget if budget is not None else forked.budget
        elif options.continue_from is not None:
            continued = continued_run(definition, root, options.continue_from, args, options.cwd)
            args, directory = continued.args, continued.cwd
            sandbox = sandbox if sandbox is not None else continued.sandbox
            budget = budget if budget is not None else continued.budget
        checked_args = decode_args(definition, args)
        run_env = scrubbed(options.env if options.env is not None else os.environ)  # a Temporal run key never reaches an agent
        resolve = options.harnesses or (lambda key, runtime: harness_for(runtime, run_env))
        if forked is not None:
            resolve = forked.resolver(resolve)
        if sandbox is not None:  # before anything is recorded: a sandbox that can't open refuses the run
            resolve = await run_sandbox(sandbox, directory, resolve)
        replayed = _replay_of(definition, Path(options.replay)) if options.replay is not None else None
        if continued is not None:
            run_id, record_dir = continued.run_dir.name, continued.run_dir
        else:
            # a lookahead writes nothing under the run root: its record is a scratch one, removed after
            scratch = Path(tempfile.mkdtemp(prefix="awf-lookahead-")) if options.looks_ahead else root
            try:
                run_id, record_dir = make_run_record_dir(scratch / definition.name)
            except OSError as error:
                raise DefinitionError(f"the run's record can't be written under {root}: {error.strerror or error}") from None
        durable = Durable.begin(
            record_dir, definition, continuing=continued is not None, from_stage=options.from_stage,
            rerun=options.rerun, values=options.values,
            sandbox=msgspec.to_builtins(sandbox) if sandbox is not None else None,
            budget={name: cap for name, cap in msgspec.to_builtins(budget).items() if cap is not None} if budget else None,
        )  # fmt: skip
        started = durable.attempt.started_at  # this attempt's, as its record has it
        return cls(
            definition, options, args, checked_args, directory, run_env, resolve, replayed,
            str(Path(options.replay).resolve()) if options.replay is not None else None, budget, run_id, record_dir,
            durable, started if continued is None or continued.started_at is None else continued.started_at,
            RunWorktrees(run_id=run_id, run_dir=record_dir, cwd=directory), RunTrace() if options.trace else None,
            forked=forked,
        )  # fmt: skip

    async def execute(self) -> RunResult:
        """Run the workflow to its end, record how it ended, and return that; the caller's
        cancellation cancels the workflow, then goes on to the caller once the ending is recorded."""
        try:
            async with anyio.create_task_group() as watch:
                watch.start_soon(self._pass_on_cancellation)
                watch.start_soon(self._shielded, watch.cancel_scope)
        finally:
            if self.options.looks_ahead:
                shutil.rmtree(self.record_dir.parent.parent, ignore_errors=True)
        await anyio.lowlevel.checkpoint_if_cancelled()  # the caller's cancellation goes on to the caller
        end = self.ending
        assert end is not None  # _shielded records it, or raises
        return RunResult(
            end.outcome, end.value, end.reason, self.run_id, self.record_dir, end.where, end.traceback, self.usage,
            self.durable.attempt.n, dict(self.durable.needs) if self.options.looks_ahead else None, self.worktree_ends,
        )

    def stop(self, reason: str) -> bool:
        """`awf stop`: the workflow is cancelled as on Ctrl-C, and the run ends `stopped`."""
        if self.stopped or self.work.cancel_called:
            return False
        self.stopped.append(reason)
        self.work.cancel()
        self.cleanup.deadline = anyio.current_time() + CANCEL_CLEANUP_SECONDS
        return True

    async def _shielded(self, watch: anyio.CancelScope) -> None:
        """The run's actors, from its start to its recorded end, shielded from the caller's cancellation."""
        tracer = self.trace.tracer() if self.trace is not None else None
        run_deadline = anyio.current_time() + self.options.seconds
        with anyio.CancelScope(shield=True), tracer or nullcontext():
            async with run_actors(
                self.record_dir, deadline=run_deadline, policies=self.definition.policies, replay=self.replayed,
                stop=self.stop, tracer=tracer, ledger=self.durable.ledger,
            ) as actors:
                await actors.recorder.ask(
                    RunStarted(
                        self.run_id, self.definition.name, self.args, str(self.directory), self.first_started,
                        str(actors.control), self.replay_of,
                        self.forked.forked_from if self.forked is not None else None,
                    )
                )
                run_started(self.run_id, self.record_dir, **({} if self.replay_of is None else {"replay_of": self.replay_of}))
                await actors.board.ask(Register(key=WORKFLOW_KEY, kind="participant", can_await=False))
                self.durable.recording(actors.recorder)
                agents = Agents(
                    actors.run, actors.board, self.directory, self.env, self.resolve, ledger=actors.ledger,
                    durable=self.durable, run_stopped=self.stopped, run_interrupted=self.interrupted,
                )
                wf = Workflow(
                    name=self.definition.name, run_id=self.run_id, run_dir=self.record_dir, cwd=self.directory,
                    agents=agents, log_lines=actors.log_lines, approvals=Approvals(actors.desk), board=actors.board,
                    budget=self.budget, durable=self.durable, worktrees=self.worktrees,
                )
                end = _Ending("cancelled", None, "the run was cancelled")  # the workflow's own scope
                with self.cleanup:  # after a cancellation, the workflow and its agents have a bounded time to stop
                    with self.work:
                        end = await _run_workflow(self.definition, wf, self.checked_args, run_deadline, self.options.seconds)
                    if self.work.cancelled_caught:
                        cancelled = f"the run was {self.interrupted[0]}" if self.interrupted else "the run was cancelled"
                        end = _Ending(*(("stopped", None, self.stopped[0]) if self.stopped else ("cancelled", None, cancelled)))
                    await actors.board.ask(CloseAll())  # the workflow is finishing: every route closes
                    await agents.close_all()
                self.worktree_ends = tuple(await anyio.to_thread.run_sync(self.worktrees.finish))  # its agents are stopped
                for gone in self.worktree_ends:
                    wf.log(f"worktree {gone.state}", worktree=gone.name, path=str(gone.path), branch=gone.branch, reason=gone.reason)
                # The Recorder outlives that bound: the ending is recorded even when the time ran out.
                self.ending = await self.record_end(actors, end)
                run_recorded(self.run_id, self.ending.outcome)  # what follows is teardown: a handler that shields itself holds it
            if self.trace is not None:  # once the actors have stopped: their last dead letters are in it
                await _record_trace(self.record_dir, self.trace)
        watch.cancel()

    async def record_end(self, actors: RunActors, end: _Ending) -> _Ending:
        """Record how the run ended, and what it spent; the ending as recorded: a run whose record
        is incomplete has failed, whatever its workflow did."""
        ended = end
        gap = await actors.recorder.ask(RecordGaps())
        if gap is not None:
            end = _Ending("failed", None, _incomplete(gap, ended.outcome, ended.reason), end.where, end.traceback)
        if not await actors.recorder.ask(
            RunEnded(end.outcome, end.reason, end.value, self.durable.attempt.started_at, wall(), end.where, end.traceback)
        ):
            gap = await actors.recorder.ask(RecordGaps()) or "the run's record is incomplete"
            end = _Ending("failed", None, _incomplete(gap, ended.outcome, ended.reason), end.where, end.traceback)
        self.usage = actors.ledger.snapshot()
        try:
            await self.durable.end(end.outcome, end.reason)
        except WorkflowError as error:  # its attempt's record: the run's record is incomplete
            reason = f"{end.reason}; and {error}" if end.outcome == "failed" else _incomplete(str(error), end.outcome, end.reason)
            end = _Ending("failed", None, reason, end.where, end.traceback)
        return end

    async def _pass_on_cancellation(self) -> None:
        """Wait; once cancelled (by the caller, or at the run's end), cancel the workflow's own
        scope, and bound the time the workflow and its agents take to stop. A cancellation while
        the workflow works is the caller's (a person's Ctrl-C, for `awf run`): said in `interrupted`,
        so a turn it cancels says so, not that the workflow gave it up."""
        try:
            await anyio.sleep_forever()
        finally:
            if not self.work.cancel_called and self.ending is None:  # not stopped, nor ended: the caller's
                self.interrupted.append(INTERRUPTED)
            self.work.cancel()
            self.cleanup.deadline = anyio.current_time() + CANCEL_CLEANUP_SECONDS


async def _record_trace(record_dir: Path, run_trace: RunTrace) -> None:
    """The run's mailbox trace, beside its record, and its OpenTelemetry spans where the
    `otel` extra is installed; a trace that can't be written or exported is only logged."""
    try:
        await anyio.to_thread.run_sync(write_trace, record_dir, run_trace)
    except OSError as error:
        structlog.get_logger("agentswf.run").warning("the run's mailbox trace could not be written", error=str(error))
    try:
        from ..otel import export_run
    except ImportError:  # no agentswf[otel]
        return
    try:
        await anyio.to_thread.run_sync(export_run, record_dir)
    except Exception as error:  # an exporter's failure is not the run's
        structlog.get_logger("agentswf.run").warning("the run's spans could not be exported", error=str(error))


def _incomplete(gap: str, outcome: RunOutcome, reason: str | None) -> str:
    """The reason of a run whose record is incomplete: that first, then how it had ended."""
    if outcome == "completed":
        return gap
    return f"{gap}; the run had ended {outcome}" + (f": {reason}" if reason else "")


CANCEL_CLEANUP_SECONDS = 10.0  # after the caller cancels, to stop the agents and record the ending


INTERRUPTED = "interrupted (Ctrl-C, or its caller cancelled it)"


async def _run_workflow(
    definition: WorkflowDefinition, wf: Workflow, args: Any, run_deadline: float, seconds: float
) -> _Ending:
    """Run the workflow's function; how it ended, whatever it raised (but a cancellation)."""
    home = getattr(getattr(inspect.unwrap(definition.fn), "__code__", None), "co_filename", "")
    try:
        with anyio.move_on_at(run_deadline) as deadline:
            value = await (definition.fn(wf, args) if definition.takes_args else definition.fn(wf))
    except StopRequested as stop:
        return _Ending("stopped", None, stop.reason)
    except Exception as error:
        return failure_ending(error, home)
    except BaseExceptionGroup as group:
        if (stopped := stop_among(group)) is not None:  # wf.stop inside the workflow's own task group
            return _Ending("stopped", None, stopped.reason)
        if any(not isinstance(leaf, anyio.get_cancelled_exc_class()) for leaf in leaf_errors(group)):
            return failure_ending(group, home)
        raise
    if deadline.cancelled_caught:
        return _Ending("timed-out", None, f"the run's timeout of {seconds:g}s passed")
    if wf.stop_reason is not None:
        return _Ending("failed", None, f"stop was caught: {wf.stop_reason}")
    try:
        msgspec.json.encode(value)
    except (TypeError, msgspec.EncodeError) as error:
        return _Ending("failed", None, f"the workflow's return value is not JSON: {error}")
    return _Ending("completed", value, None)
