"""`awf run` and `awf continue`: a workflow's file run (or a run gone on with) here, its progress
shown, its ending printed.

Exit codes: 0 completed, 1 failed or timed out, 2 a usage error or a refused run, 3 stopped,
130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shlex
import signal
import sys
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Any, NoReturn

import anyio
import anyio.abc
import msgspec
import structlog

from ..engine.record.attempts import RecordRefused, read_attempts
from ..engine.record.layout import DEFAULT_RUN_ROOT, find_run, read_json
from ..errors import DefinitionError, leaf_errors
from ..progress import show_progress, watch_endings, watch_runs
from ..sandbox.spec import RunSandboxFile
from ..wire.nesting import too_deep
from ..wire.teaching import MAX_FLAG_FIELDS, ReadError, Taught
from ..workflow.budgets import budget_flag, parse_budget
from ..workflow.checking import long_turn_timeouts
from ..workflow.continuing import budget_to_go_on
from ..workflow.definition import NO_ARGS, WorkflowDefinition
from ..workflow.durations import to_seconds
from ..workflow.loading import load_workflow
from ..workflow.running import CANCEL_CLEANUP_SECONDS, RunResult, run
from ..workflow.sandboxes import read_run_sandbox
from . import replay, temporal, worktrees
from .attach import find_kept
from .failures import EXIT_INTERRUPTED, AttachFailure, UsageFailure
from .live import RECORDED_SOURCES, RunView, ViewKind
from .runs import (
    TEMPORAL_FILE,
    latest_run_of,
    recorded_file,
    run_dir_of,
    run_root_of,
    was_on_temporal,
)
from .shown import BODY_INDENT, shown, shown_json, shown_lines

EXIT_BY_OUTCOME = {"completed": 0, "failed": 1, "timed-out": 1, "stopped": 3, "cancelled": 130}
MAX_PROGRESS_LINE_CHARS = 2000  # of one progress line of awf run's, as printed: its fields can carry what agents wrote
BACKEND_HELP = "the event loop the run's engine runs on (default asyncio)"
RUN_EPILOG = (
    "The words after -- are the workflow's args: --name value flags for an args Struct "
    f"of at most {MAX_FLAG_FIELDS} simple fields (more, or a field that isn't simple, and it takes one JSON "
    "value), one JSON value, or a bare word for a str. None: the parameter's default. "
    "Standard output holds only the run's result."
)


def parse_args(definition: WorkflowDefinition, argv: list[str]) -> Any:
    """The workflow's args from the words after `--`: flags by its args type, or one JSON value;
    a bare word for a `str` parameter; None, for the parameter's default, when none are given."""
    if not definition.takes_args:
        if argv:
            raise UsageFailure(f"workflow {definition.name} takes no args, but was given {argv}")
        return None
    args_type = definition.args_type
    if args_type in (list[str], tuple[str, ...]):
        return list(argv)
    if not argv and definition.args_default is not NO_ARGS:
        return None  # the parameter's own default
    try:
        taught = Taught(args_type)
        if taught.is_text and len(argv) == 1:  # a JSON string as the string it holds; a word as it is
            try:
                return msgspec.json.decode(argv[0], type=str)
            except msgspec.DecodeError:
                return argv[0]
        if taught.form != "json" or not argv:
            return taught.read(argv, None if argv else "{}")
        if len(argv) == 1:
            deep = too_deep(argv[0])
            if deep is not None:
                raise ReadError(deep)
            return msgspec.json.decode(argv[0], type=args_type)
    except (ReadError, msgspec.DecodeError) as error:
        said = args_error(str(error), flags=taught.form == "flags")
        raise UsageFailure(f"workflow {definition.name}'s args: {said}; {args_example(definition)}") from None
    raise UsageFailure(f"workflow {definition.name} takes its args as one JSON value after --; {args_example(definition)}")


_AT_FIELD = re.compile(r"(?P<what>.+) - at `\$\.(?P<field>[A-Za-z_][A-Za-z0-9_-]*)`")


def args_error(text: str, *, flags: bool) -> str:
    """What is wrong with the args, said for the command line: msgspec's `Expected `int` <= 5 - at
    `$.rounds`` as `--rounds: expected `int` <= 5` (of flags), without the full stop of a sentence."""
    text = text.rstrip().removesuffix(".")
    at = _AT_FIELD.fullmatch(text)
    if at is None:
        return text
    what = at["what"][:1].lower() + at["what"][1:]
    return f"--{at['field']}: {what}" if flags else f"{at['field']}: {what}"


def args_example(definition: WorkflowDefinition) -> str:
    """How the workflow's args are written after `--`, with an example of its type."""
    taught = Taught(definition.args_type)
    if taught.form == "flags":
        return f"give them as flags: -- {taught.flags_usage()}"
    schema = taught.schema
    fields = schema.get("properties")
    if isinstance(fields, dict) and fields:
        sample = {name: _sample(field) for name, field in list(fields.items())[:2]}
        why = f" (an args Struct of more than {MAX_FLAG_FIELDS} fields, or of fields that aren't simple, is JSON)"
        return f"give them as one JSON value, e.g. -- '{json_text(sample)}'{why}"
    return f"give them as one JSON value, e.g. -- '{json_text(_sample(schema))}'"


def _sample(schema: Any) -> Any:
    kind = schema.get("type") if isinstance(schema, dict) else None
    return {"string": "text", "integer": 3, "number": 1.5, "boolean": True, "array": [], "object": {}}.get(
        kind if isinstance(kind, str) else "", "…"
    )


def json_text(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def _configure_progress(kind: ViewKind) -> RunView:
    """Progress for `awf run`: the live view, or plain lines (turns, tool calls, messages from the record)."""
    show_progress(kind == "plain", except_sources=RECORDED_SOURCES)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="%H:%M:%S"),
            _shown_fields,  # a line can carry what an agent wrote (wf.log of its answer): shown, not obeyed
            structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty(), sort_keys=False),
            _cut_line,
        ],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),  # a person reads these: no debug lines
    )
    return RunView(kind)


def _shown_fields(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """A progress line's names and text fields each on one line, their control characters as escapes
    (`cli/shown.py`): a field with a new line in it would start a line that reads as awf's."""
    return {shown(str(key)): shown(value) if isinstance(value, str) else value for key, value in event.items()}


def _cut_line(_logger: Any, _method: str, line: MutableMapping[str, Any] | str) -> MutableMapping[str, Any] | str:
    """A progress line, as rendered, cut at MAX_PROGRESS_LINE_CHARS: its fields, each cut, can be any
    number (a `wf.log` line of the record, which an agent can write). Never inside the renderer's own
    colour codes, and their reset after the cut."""
    if not isinstance(line, str) or len(line) <= MAX_PROGRESS_LINE_CHARS:
        return line
    kept = line[: MAX_PROGRESS_LINE_CHARS - 1]
    escape = kept.rfind("\x1b")
    if escape >= 0 and "m" not in kept[escape:]:
        kept = kept[:escape]  # a colour code cut in two: left out whole
    return kept + "…" + ("\x1b[0m" if "\x1b" in kept else "")


async def _run_with_interrupt(
    definition: WorkflowDefinition, args: Any, run_options: dict[str, Any], leave: Callable[[str], NoReturn]
) -> RunResult | None:
    """Run it; None if Ctrl-C cancelled it (its record still says how it ended).

    The signals are caught for the whole run: a second Ctrl-C while the run stops its
    agents and records its ending is told to wait, never a KeyboardInterrupt. Once the
    grace after the first is over and the run's ending is recorded, `leave(outcome)` ends
    the process, past what of the run still runs: a tool handler that shields itself from
    cancellation holds the run's teardown, and nothing in the process can end it.
    """
    result: RunResult | None = None
    run_scope = anyio.CancelScope()
    ours: list[str] = []  # the run's id once it started (a run its workflow starts in turn is not ours)
    recorded: list[str] = []  # its outcome, once its record says how it ended
    ending_recorded = anyio.Event()

    def started(run_id: str, record_dir: Path) -> None:
        if not ours:
            ours.append(run_id)

    def ended(run_id: str, outcome: str) -> None:
        if ours and run_id == ours[0] and not recorded:
            recorded.append(outcome)
            ending_recorded.set()

    async def leave_after_grace() -> None:
        await anyio.sleep(CANCEL_CLEANUP_SECONDS)
        await ending_recorded.wait()
        leave(recorded[0])

    async def watch_interrupt(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()
            async for _ in signals:
                if run_scope.cancel_called:
                    print("awf: stopping the agents and recording the run's ending; a moment", file=sys.stderr)
                else:
                    group.start_soon(leave_after_grace)
                run_scope.cancel()

    unwatch = (watch_runs(started), watch_endings(ended))
    try:
        async with anyio.create_task_group() as group:
            await group.start(watch_interrupt)
            with run_scope:
                result = await run(definition, args=args, **run_options)
            group.cancel_scope.cancel()
    finally:
        for remove in unwatch:
            remove()
    return result


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """While the workflow runs, what it prints (and what its subprocesses write to standard
    output) goes to standard error: standard output is for the run's result alone."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _run_root(options: argparse.Namespace) -> Path:
    """Where `awf run` records runs: --run-root, under --cwd when relative."""
    root = Path(options.run_root) if options.run_root else DEFAULT_RUN_ROOT
    return root if root.is_absolute() else Path(options.cwd or ".") / root


def _view_kind(options: argparse.Namespace) -> ViewKind:
    """The live view in a terminal (standard output and error both one), else plain lines."""
    return "plain" if getattr(options, "plain", False) or not (sys.stdout.isatty() and sys.stderr.isatty()) else "live"


def command_run(options: argparse.Namespace) -> int:
    options.view = _view_kind(options)
    with _stdout_to_stderr():
        result, definition = _start_run(options)
    return _ended(options, result, definition, _run_root(options))


def _ended(options: argparse.Namespace, result: RunResult | None, definition: WorkflowDefinition, root: Path) -> int:
    """Print how the run ended (its value on standard output) and return awf's exit code."""
    if result is None:
        return _interrupted(options, definition, root, "cancelled")
    if result.needs is not None:  # a look-ahead: nothing ran; what --values must give
        return _print_needs(options, result)
    if options.json:
        record = {
            "outcome": result.outcome,
            "reason": result.reason,
            "where": result.where,
            "value": result.value,
            "run_id": result.run_id,
            "run_dir": str(result.run_dir),
            "worktrees": worktrees.as_json(result.worktrees),
        }
        sys.stdout.write(shown_json(record, formatted=True) + "\n")
    elif result.completed:
        sys.stdout.write(shown_json(result.value, formatted=True) + "\n")
    sys.stdout.flush()
    first, *more = shown_lines(result.reason) if result.reason is not None else [""]  # it quotes agents' stderr
    ending = result.outcome if result.reason is None else f"{result.outcome}: {first}"
    replayed = f" (a replay of {options.replay}: no tool handler ran)" if getattr(options, "replay", None) else ""
    attempt = f" (attempt {result.attempt})" if result.attempt > 1 else ""
    print(f"awf: {shown(definition.name)} {ending}{shown(attempt + replayed)}", file=sys.stderr)
    for line in more:
        print(BODY_INDENT + line, file=sys.stderr)
    if result.where:
        print(shown(f"awf:   at {result.where}  (the traceback: awf logs {result.run_id})"), file=sys.stderr)
    for line in worktrees.closing_lines(result.worktrees):
        print(line, file=sys.stderr)
    for line in _kept_pane_lines(root, result.run_id):
        print(line, file=sys.stderr)
    print(f"awf: record {result.run_dir}  (awf logs {result.run_id})", file=sys.stderr)
    if result.outcome != "completed":
        if fixed_first(result.reason):
            print(f"awf: fix that, then run it again: {_run_again(options, result.run_dir)}", file=sys.stderr)
        else:
            print(f"awf: go on with: {_go_on(options, result.run_dir)}", file=sys.stderr)
    return EXIT_BY_OUTCOME[result.outcome]


FIXED_FIRST = ("DefinitionError:", "HarnessError:")  # a workflow's mistake or a missing CLI: going on meets it again


def fixed_first(reason: str | None) -> bool:
    """Whether the run failed for what must be fixed before anything else (a definition that can't
    hold, a CLI not installed): there `awf continue` would only fail the same way."""
    return reason is not None and reason.startswith(FIXED_FIRST)


def _run_again(options: argparse.Namespace, run_dir: Path) -> str:
    """The command run again: `awf continue` where this was one, else `awf run` of the same file."""
    if options.handler is command_continue:
        return _go_on(options, run_dir)
    which = getattr(options, "workflow", None)
    return shlex.join(["awf", "run", str(options.file), *(["--workflow", which] if which else [])])


def _interrupted(options: argparse.Namespace, definition: WorkflowDefinition, root: Path, outcome: str) -> int:
    """Print how an interrupted run ended (`outcome`, as its record says) and where its record is; exit 130."""
    print(f"awf: interrupted; the run {'was cancelled' if outcome == 'cancelled' else f'had ended {outcome}'}", file=sys.stderr)
    runs = sorted((root / definition.name).glob("*/run.json"), key=lambda path: path.stat().st_mtime_ns)
    if runs:
        print(f"awf: record {runs[-1].parent.resolve()}  (awf logs {runs[-1].parent.name})", file=sys.stderr)
        print(f"awf: go on with: {_go_on(options, runs[-1].parent)}", file=sys.stderr)
    return EXIT_INTERRUPTED


def _kept_pane_lines(root: Path, run_id: str) -> list[str]:
    """The run's panes kept after it (`keep_pane`), as `awf ls` lists them: how to reach and close each."""
    try:
        kept = find_kept(root, run_id, None)
    except AttachFailure:
        return []  # none kept
    return [
        shown(
            f"awf: kept pane of {pane.agent} ({pane.harness}, released from the run): awf attach {run_id} {pane.agent}; "
            f"close: awf attach --close {run_id} {pane.agent}"
        )
        for pane in kept
    ]


def _go_on(options: argparse.Namespace, run_dir: Path) -> str:
    """The command that continues the run: the workflow's file as it was given here, never the
    record's; with a larger `--budget` where the run's is spent, as a continue under it would stop."""
    root = f" --run-root {shlex.quote(str(options.run_root))}" if getattr(options, "run_root", None) else ""
    which = f" --workflow {shlex.quote(options.workflow)}" if getattr(options, "workflow", None) else ""
    more = budget_to_go_on(run_dir)
    budget = f" --budget {shlex.quote(budget_flag(more))}" if more is not None else ""
    return f"awf continue {shlex.quote(str(options.file))} {run_dir.name}{which}{root}{budget}"


def _print_needs(options: argparse.Namespace, result: RunResult) -> int:
    """A look-ahead's ending: the stage values --values must give, as JSON on standard output."""
    needs = result.needs or {}
    sys.stdout.write(shown_json(needs, formatted=True) + "\n")
    sys.stdout.flush()
    print(f"awf: a look-ahead ran nothing and recorded nothing: {result.reason}", file=sys.stderr)
    for name, schema in needs.items():
        print(f"awf:   {name}: {json_text(schema)}", file=sys.stderr)
    print(
        f"awf: give them as a JSON object by stage name: awf run {options.file} --from-stage {options.from_stage} "
        "--values values.json",
        file=sys.stderr,
    )
    return EXIT_BY_OUTCOME["stopped"]


def _start_run(options: argparse.Namespace) -> tuple[RunResult | None, WorkflowDefinition]:
    """Load the workflow, check what `awf run` was given, and run it; usage errors raise UsageFailure."""
    try:
        definition = load_workflow(options.file, options.workflow)
        run_seconds = None if options.timeout is None else to_seconds(options.timeout, what="--timeout")
        options.budget_limits = None if options.budget is None else parse_budget(options.budget)
    except DefinitionError as error:
        raise UsageFailure(str(error)) from None
    args = parse_args(definition, options.args)
    _warn_long_turns(Path(options.file), run_seconds)
    replay = None
    if options.replay is not None:
        replay = find_run(_run_root(options), options.replay)
        if replay is None:
            raise UsageFailure(f"--replay {options.replay}: no record of that run under {_run_root(options)}")
    run_options = {
        "run_root": options.run_root,
        "cwd": options.cwd,
        "timeout": options.timeout,
        "replay": replay,
        "sandbox": _sandbox(options.sandbox),
        "trace": options.trace,
        "budget": options.budget_limits,
        **temporal.engine_options(options),
    }
    if options.values is not None and options.from_stage is None:
        raise UsageFailure("--values gives the stages before --from-stage: give --from-stage too")
    if options.from_stage is not None:
        run_options.update(from_stage=options.from_stage, values=_values(options.values))
    return _go(definition, args, run_options, options, _run_root(options)), definition


def _warn_long_turns(path: Path, run_seconds: float | None) -> None:
    """Said once as the run starts (as `awf check` says it): each turn whose literal timeout the
    run's deadline will cut short."""
    try:
        warnings = long_turn_timeouts(path.read_text(), run_seconds)
    except (OSError, SyntaxError, ValueError):
        return  # it loaded; a file that can't be read again now has nothing to say
    for warning in warnings:
        print(shown(f"awf: {path}:{warning.line}: warning: {warning.problem}"), file=sys.stderr)


def _values(path: str | None) -> dict[str, Any] | None:
    """The --values file: a JSON object of stage values by stage name."""
    if path is None:
        return None
    try:
        values = msgspec.json.decode(Path(path).read_bytes())
    except OSError as error:
        raise UsageFailure(f"--values {path}: {error.strerror or error}") from None
    except msgspec.DecodeError as error:
        raise UsageFailure(f"--values {path} is not JSON: {error}") from None
    if not isinstance(values, dict):
        raise UsageFailure(f"--values {path} must hold a JSON object of stage values by stage name")
    return values


def command_continue(options: argparse.Namespace) -> int:
    """`awf continue [FILE] [RUN]`: a new attempt of the run, with its recorded args and cwd.

    Named, FILE is what loads (the safe form, which `awf run`'s closing line gives): an agent of
    the run that isn't sandboxed runs as you and can write the record. Without it, the file the
    record names loads, and awf says which before it does.
    """
    root = run_root_of(options)
    if options.file is not None and not Path(options.file).is_file():
        if find_run(root, options.file) is None:
            raise UsageFailure(f"{options.file} is neither a workflow file nor a run under {root}")
        if options.run is not None:
            raise UsageFailure(f"the file comes first: awf continue {options.run} {options.file}")
        options.file, options.run = None, options.file  # `awf continue RUN`
    try:
        if options.timeout is not None:
            to_seconds(options.timeout, what="--timeout")
        options.budget_limits = None if options.budget is None else parse_budget(options.budget)
        if options.file is not None:
            definition = load_workflow(options.file, options.workflow)
            run_dir = _continued_dir(options, definition.name).resolve()  # said in full, as awf run says it
        else:
            run_dir = run_dir_of(options, options.run).resolve()
            options.file = recorded_file(run_dir, f"awf continue FILE {run_dir.name}")
            print(shown(f"awf: loading {options.file}, the file on record (name it to be sure: awf continue FILE RUN)"),
                  file=sys.stderr)
            definition = load_workflow(options.file, options.workflow or read_json(run_dir / "run.json").get("workflow"))
    except DefinitionError as error:
        raise UsageFailure(str(error)) from None
    engine = _temporal_engine(run_dir, options) if was_on_temporal(run_dir) else {}
    unsay = _say_kept(run_dir, options)
    try:
        if options.from_turn is not None:  # a new run, forked at a turn of this one
            options.sandbox_file = _sandbox(options.sandbox)
            return _ended(options, replay.run_fork(options, definition, run_dir), definition, run_dir.parent.parent)
        if options.settings:
            raise UsageFailure("--set goes with --from KEY:N: it sets an agent's model or effort in the fork")
        run_options = {"run_root": run_dir.parent.parent, "timeout": options.timeout, "continue_from": run_dir,
                       "rerun": options.rerun, "sandbox": _sandbox(options.sandbox), "budget": options.budget_limits,
                       **engine}
        options.view = _view_kind(options)
        with _stdout_to_stderr():
            result = _go(definition, None, run_options, options, run_dir.parent.parent)
    finally:
        unsay()
    return _ended(options, result, definition, run_dir.parent.parent)


def _temporal_engine(run_dir: Path, options: argparse.Namespace) -> dict[str, Any]:
    """`engine=` that continues a run on Temporal where it ran: the frontend, namespace and task queue
    on record (said first: whoever can write the record can change them), turns here as they were."""
    for given, flag, why in (
        (options.from_turn, "--from", "a fork plays the turns before its turn from the record in this process, and a "
                                      "Temporal run's turns run on its workers"),
        (options.sandbox, "--sandbox", "a run's one sandbox is the local engine's; on Temporal an agent's "
                                       "sandbox= is opened by the worker that runs its turn"),
    ):
        if given is not None:
            raise UsageFailure(f"run {run_dir.name} ran on Temporal, where awf continue takes no {flag}: {why}")
    try:
        info = read_json(run_dir / TEMPORAL_FILE)
        address, namespace, queue = info["address"], info["namespace"], info["task_queue"]
    except (OSError, msgspec.DecodeError, KeyError, TypeError):
        raise UsageFailure(f"run {run_dir.name} ran on Temporal, and its {TEMPORAL_FILE} doesn't say where") from None
    if not all(isinstance(value, str) and value for value in (address, namespace, queue)):
        raise UsageFailure(f"run {run_dir.name} ran on Temporal, and its {TEMPORAL_FILE} doesn't say where")
    print(shown(f"awf: on Temporal at {address}, namespace {namespace}, task queue {queue} (the record's)"), file=sys.stderr)
    given = argparse.Namespace(engine="temporal", address=address, namespace=namespace, task_queue=queue,
                               no_turns_here=info.get("run_turns") is False)
    engine = temporal.engine_options(given)
    options.talked_to_temporal = True
    return engine


def _say_kept(run_dir: Path, options: argparse.Namespace) -> Callable[[], None]:
    """The sandbox and budget the continue keeps from the record, said as its attempt starts (a
    continue refused says only why): whoever can write the record can change them (none at all
    included), as `--sandbox` and `--budget` can't be. Returns the watcher's remover."""
    lines = _kept_lines(run_dir, options)  # as the record was before this attempt

    def started(run_id: str, record_dir: Path) -> None:
        for line in lines:
            print(line, file=sys.stderr)
        lines.clear()  # once: a run its workflow starts in turn is not this one

    return watch_runs(started)


def _kept_lines(run_dir: Path, options: argparse.Namespace) -> list[str]:
    try:
        attempts = read_attempts(run_dir)
    except (OSError, msgspec.DecodeError, RecordRefused):
        return []  # the continue itself says why it can't go on
    last = attempts[-1] if attempts else None
    lines = []
    for given, name, kept, unset in (
        (options.sandbox, "sandbox", last and last.sandbox, "none, its agents run unsandboxed"),
        (options.budget, "budget", last and last.budget, "none, no limit"),
    ):
        if name == "sandbox" and was_on_temporal(run_dir):
            continue  # on Temporal, only an agent's own sandbox=
        if given is None:
            said = msgspec.json.encode(kept).decode() if kept else unset
            lines.append(shown(f"awf: the {name} on record: {said} (--{name} gives another)"))  # an agent's, maybe
    return lines


def _continued_dir(options: argparse.Namespace, workflow: str) -> Path:
    """The run named, or the latest run of `workflow` under the run root."""
    if options.run is not None:
        return run_dir_of(options, options.run)
    root = run_root_of(options)
    latest = latest_run_of(root, workflow)
    if latest is None:
        raise UsageFailure(f"no record of a run of {workflow} under {root}")
    return latest


def _sandbox(path: str | None) -> RunSandboxFile | None:
    try:
        return read_run_sandbox(path) if path is not None else None
    except DefinitionError as error:
        raise UsageFailure(str(error)) from None


def _go(
    definition: WorkflowDefinition, args: Any, run_options: dict[str, Any], options: argparse.Namespace, root: Path
) -> RunResult | None:
    view = _configure_progress(options.view)
    stop_watching = watch_runs(view)

    def leave(outcome: str) -> NoReturn:
        """Ctrl-C's grace is over and the run's ending is recorded, but a part of the run still
        runs: end the process now, as `kill -9` would (its keepers and its watchdog kill
        every process of the run that is left), once its view and its closing lines are out."""
        stop_watching()
        view.close()
        print(
            f"awf: the run had not stopped {CANCEL_CLEANUP_SECONDS:g}s after Ctrl-C (a tool handler that shields "
            "itself from cancellation): its ending is recorded, and awf ends without it",
            file=sys.stderr,
        )
        code = _interrupted(options, definition, root, outcome)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    try:
        return anyio.run(_run_with_interrupt, definition, args, run_options, leave, backend=options.backend)
    except DefinitionError as error:
        raise UsageFailure(str(error)) from None
    except BaseExceptionGroup as group:  # a refusal before the run started, from inside the task group
        leaves = leaf_errors(group)
        if not all(isinstance(leaf, DefinitionError) for leaf in leaves):
            raise
        raise UsageFailure(str(leaves[0])) from None
    finally:
        stop_watching()
        view.close()


def add_parsers(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    run_parser = commands.add_parser(
        "run", help="run a workflow file", usage="awf run FILE [options] [-- args…]", epilog=RUN_EPILOG
    )
    run_parser.add_argument("file", help="a Python file that defines a @workflow")
    run_parser.add_argument("--workflow", help="which workflow, when the file defines several")
    run_parser.add_argument("--run-root", help=f"where records go (default {DEFAULT_RUN_ROOT} under --cwd)")
    run_parser.add_argument("--cwd", help="the run's working directory (default: here)")
    run_parser.add_argument("--timeout", help="the whole run's time, in seconds or e.g. 45m (default 30m)")
    run_parser.add_argument("--json", action="store_true", help="print the run's ending as JSON")
    run_parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio", help=BACKEND_HELP)
    run_parser.add_argument("--sandbox", metavar="FILE", help="put every agent in one sandbox (JSON: read, write, network)")
    run_parser.add_argument("--replay", metavar="RUN", help="answer every tool call from RUN's record; run no handler")
    run_parser.add_argument("--from-stage", metavar="STAGE", help="start at STAGE; the stages before it take --values")
    run_parser.add_argument(
        "--values", metavar="FILE", help="a JSON object of the values of the stages before --from-stage, by stage name"
    )
    run_parser.add_argument("--budget", help="cap the run's spend, e.g. '5usd,2h,200turns,1mtokens'")
    run_parser.add_argument("--plain", action="store_true", help="plain progress lines, not the live view, in a terminal")
    run_parser.add_argument("--trace", action="store_true", help="record every actor's mailbox events (awf trace --actors)")
    temporal.add_run_options(run_parser)
    run_parser.set_defaults(handler=command_run)

    continue_parser = commands.add_parser(
        "continue", help="a new attempt of a run: stages recorded complete are not run again"
    )
    continue_parser.add_argument("file", nargs="?", help="the workflow's file the run was started from (default: the record's)")
    continue_parser.add_argument("--workflow", help="which workflow, when the file defines several")
    continue_parser.add_argument(
        "run", nargs="?", help="a run id or directory (default: the latest run of FILE's workflow, or the latest run)"
    )
    continue_parser.add_argument("--rerun", metavar="STAGE", help="run STAGE again (and every stage after it)")
    continue_parser.add_argument(
        "--sandbox", metavar="FILE", help="put every agent in this sandbox (default: the one the run's last attempt ran in)"
    )
    continue_parser.add_argument("--budget", help="cap the run's spend, earlier attempts' included (default: the run's)")
    continue_parser.add_argument("--run-root", help=f"where records are (default {DEFAULT_RUN_ROOT})")
    continue_parser.add_argument("--timeout", help="this attempt's time, in seconds or e.g. 45m (default 30m)")
    continue_parser.add_argument("--json", action="store_true", help="print the run's ending as JSON")
    continue_parser.add_argument("--plain", action="store_true", help="plain progress lines, not the live view, in a terminal")
    continue_parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio", help=BACKEND_HELP)
    replay.add_fork_options(continue_parser)
    continue_parser.set_defaults(handler=command_continue)
