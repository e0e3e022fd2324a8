"""`run_workflow`: the real engine, with the named agents and participants played by scripts."""

from __future__ import annotations

import atexit
import dataclasses
import functools
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio

from ..errors import HarnessError, StopRequested, TestScriptError
from ..workflow.context import Workflow
from ..workflow.definition import WorkflowDefinition
from ..workflow.durations import Duration
from ..workflow.running import RunResult, run
from .approvals import Approvals, play_approvals
from .participants import ParticipantScript
from .record import Record
from .scripted import Script, ScriptBook, Scripts


@dataclass(frozen=True)
class TestRun:
    """A finished test run. `value` is the workflow's return value; it raises if the run didn't complete."""

    __test__ = False
    result: RunResult
    unused: str | None = None  # scripts a failed run never reached: said after its own failure
    notes: tuple[str, ...] = ()  # a replay's: what it played other than as recorded, and why

    @property
    def outcome(self) -> str:
        return self.result.outcome

    @property
    def reason(self) -> str | None:
        return self.result.reason

    @property
    def value(self) -> Any:
        if self.result.outcome != "completed":
            raise AssertionError(self.failure)
        return self.result.value

    @property
    def failure(self) -> str:
        """How the run ended, where the workflow raised, then any script it never reached."""
        where = f" (at {self.result.where})" if self.result.where else ""
        unused = f"\nand, as it ended before using them: {self.unused}" if self.unused else ""
        return f"the run ended {self.result.outcome}: {self.result.reason}{where}{unused}"

    @property
    def run_id(self) -> str:
        return self.result.run_id

    @property
    def run_dir(self) -> Path:
        return self.result.run_dir

    @property
    def record(self) -> Record:
        """The run's record: its turns, tool calls, messages, approvals and log."""
        return Record(self.run_dir)

    @property
    def turns(self) -> list[dict[str, Any]]:
        """The run's ended turns, as recorded in turns.jsonl."""
        return self.record.turns

    @property
    def logs(self) -> list[dict[str, Any]]:
        return self.record.logs

    def turns_of(self, key: str, kind: str = "turn") -> list[dict[str, Any]]:
        """`key`'s recorded turns, or its operations of `kind`: "compaction", "set", "fork", "stop"."""
        return [turn for turn in self.turns if turn["agent"] == key and turn.get("kind", "turn") == kind]

    def compactions_of(self, key: str) -> list[dict[str, Any]]:
        return self.turns_of(key, "compaction")

    def sets_of(self, key: str) -> list[dict[str, Any]]:
        return self.turns_of(key, "set")


async def run_workflow(
    definition: WorkflowDefinition,
    *,
    agents: Mapping[str, Scripts],
    participants: Mapping[str, ParticipantScript] | None = None,
    args: Any = None,
    run_root: str | Path | None = None,
    cwd: str | Path | None = None,
    timeout: Duration | None = None,
    supports_waiting: bool = True,
    replay: str | Path | None = None,
    compactions: Mapping[str, Sequence[Script]] | None = None,
    approvals: Approvals | None = None,
    engine: Literal["local", "temporal"] = "local",
) -> TestRun:
    """Run `definition` for real, its agents played by `agents` (key -> script or list).

    `participants` (key -> `respond(...)`) answer as people would, through the run's
    operator socket as `awf inbox` and `awf reply` do. The record goes under `run_root`;
    when not given, a temporary directory removed when the test process exits (the
    record stays readable until then). Raises TestScriptError when an agent has no
    script, a list runs out or has entries left, and re-raises an error raised inside a
    script, such as a failed assert. A run that failed on its own (the workflow raised) is
    returned as it ended, its `value` raising that failure with its line; a script it never
    reached is said after it (`unused`), not raised instead of it. With `replay` (a recorded run's directory) every
    tool call is answered from that record. `compactions` (key -> a list, one entry per
    compaction) script compactions; unscripted, a compaction answers "" and takes no entry
    of the agent's script. A fork is scripted under its own key in `agents`. `approvals` decides
    the tool calls that wait for a person's approval (tool name -> `approve(...)` or `reject(...)`,
    or a function of the `ApprovalRequest`), as `awf approve` would; a call it decides nothing for is
    rejected, and fails the test naming the call.

    `engine="temporal"` runs it on Temporal's time-skipping test server (agentswf[temporal]), its
    scripted turns on a turn worker here, then replays its history: NotDeterministic (an
    AssertionError) if the workflow's code decides otherwise (docs/guide/testing.md). There,
    `participants`, `approvals` and `replay` aren't taken.
    """
    if engine == "temporal" and (participants or approvals is not None or replay is not None):
        raise TestScriptError("run_workflow(engine='temporal') takes no participants, approvals or replay yet: they "
                              "speak through a local run's operator socket")
    compacting = {key: list(entries) for key, entries in (compactions or {}).items()}
    book = ScriptBook(dict(agents), supports_waiting=supports_waiting, compactions=compacting)
    root = scratch_run_root(run_root)
    errors: list[Exception] = []
    if participants or approvals is not None:
        definition = _with_participants(definition, dict(participants or {}), approvals, errors)
    if engine == "temporal":
        result = await _on_temporal(definition, book, args=args, run_root=root, cwd=cwd, timeout=timeout)
    else:
        result = await run(
            definition, args=args, run_root=root, cwd=cwd, timeout=timeout, harnesses=book.harness_for, replay=replay
        )
    if errors:
        raise errors[0]
    if result.outcome == "failed" and not book.errors:  # the workflow's own failure first: what it left unused follows
        try:
            book.check()
        except TestScriptError as unused:
            return TestRun(result, str(unused))
    book.check()
    return TestRun(result)


async def _on_temporal(
    definition: WorkflowDefinition, book: ScriptBook, *, args: Any, run_root: str | Path, cwd: str | Path | None,
    timeout: Duration | None,
) -> RunResult:
    try:
        from .temporal import run_on_temporal
    except ImportError:
        raise HarnessError("run_workflow(engine='temporal') needs agentswf[temporal]: "
                           "pip install 'agentswf[temporal]'") from None
    return await run_on_temporal(definition, book, args=args, run_root=run_root, cwd=cwd, timeout=timeout)


_SCRATCH_ROOTS: list[str] = []  # made by this process, not yet removed


def scratch_run_root(run_root: str | Path | None) -> str | Path:
    """`run_root`, or a temporary directory removed when the test process exits (or, under pytest,
    as its session ends: an xdist worker exits without running atexit's functions)."""
    if run_root is not None:
        return run_root
    if not _SCRATCH_ROOTS:
        atexit.register(remove_scratch_run_roots)
    root = tempfile.mkdtemp(prefix="awf-test-runs-")
    _SCRATCH_ROOTS.append(root)
    return root


def remove_scratch_run_roots() -> None:
    """Remove the scratch run roots this process made."""
    while _SCRATCH_ROOTS:
        shutil.rmtree(_SCRATCH_ROOTS.pop(), ignore_errors=True)


def _with_participants(
    definition: WorkflowDefinition, scripts: dict[str, ParticipantScript], approvals: Approvals | None,
    errors: list[Exception],
) -> WorkflowDefinition:
    """The workflow, with the scripted participants (and the approver) playing beside it while it runs.

    A participant's error (a failed assert, a refused reply) ends the run, and goes in
    `errors` for run_workflow to raise; the workflow's own error is raised as itself.
    """
    inner = definition.fn

    async def play(key: str, script: ParticipantScript, wf: Workflow) -> None:
        try:
            await wf.participants._opened(key).wait()
            await script.play(key, wf.run_dir)
        except Exception as error:
            errors.append(error)
            raise

    @functools.wraps(inner)  # the run names the line a failure came from in the workflow's own file
    async def with_participants(wf: Workflow, *args: Any) -> Any:
        failure: Exception | StopRequested | None = None
        try:
            async with anyio.create_task_group() as group:
                for key, script in scripts.items():
                    group.start_soon(play, key, script, wf)
                if approvals is not None:
                    group.start_soon(play_approvals, approvals, wf.run_dir, errors)
                try:
                    value = await inner(wf, *args)
                except (Exception, StopRequested) as error:  # raised below as itself, not inside the group's ExceptionGroup
                    failure = error
                group.cancel_scope.cancel()
        finally:  # a timed-out run too: a misspelt key would otherwise only have waited
            unopened = sorted(set(scripts) - set(wf.participants._open))
            if unopened and failure is None:  # strict, as agents are
                opened = ", ".join(sorted(wf.participants._open)) or "none"
                errors.append(
                    TestScriptError(
                        f"participant {', '.join(unopened)} has a script, but the workflow never opened it "
                        f"(it opened: {opened})"
                    )
                )
        if failure is not None:
            raise failure
        return value

    return dataclasses.replace(definition, fn=with_participants)
