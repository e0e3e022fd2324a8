"""`awf replay RUN [FILE]` and `awf export RUN DIR`: a record played again, and a record fit to check in.

`awf replay` is `agentswf.testing.replay` from the command line: the workflow's code runs again
with its agents played from the record (no CLI process, no model), and exits 0 when it replays to
the recorded value, 1 with the first divergence. Without FILE it loads the workflow file a live
record names, saying so (as `awf continue` does); an exported record names none, since a file of
another machine is no file to load: FILE is given.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

import anyio

from ..errors import DefinitionError
from ..replay.played import ReplayDiverged
from ..replay.recorded import EXPORT_FILE, RecordUnreadable
from ..testing.export import export_record
from ..testing.replay import replay
from ..testing.runs import TestRun
from ..workflow.definition import WorkflowDefinition
from ..workflow.forking import ContinueFrom, parse_turn
from ..workflow.loading import load_workflow
from ..workflow.running import RunResult, run
from .failures import UsageFailure
from .runs import recorded_file, run_dir_of
from .shown import quoted, shown

EXIT_DIVERGED = 1  # the workflow did something the record doesn't have


def command_replay(options: argparse.Namespace) -> int:
    run_dir = run_dir_of(options, options.run).resolve()
    file = options.file
    if file is None:
        if (run_dir / EXPORT_FILE).exists():
            raise UsageFailure(f"{run_dir} is an exported record, which names no file to load: awf replay {options.run} FILE")
        file = recorded_file(run_dir, f"awf replay {run_dir.name} FILE")
        print(shown(f"awf: loading {file}, the file on record (name it to be sure: awf replay RUN FILE)"), file=sys.stderr)
    scratch = Path(tempfile.mkdtemp(prefix="awf-replay-"))
    try:
        definition = load_workflow(file, options.workflow)
        run = anyio.run(_replay, definition, run_dir, options, scratch, backend=options.backend)
    except ReplayDiverged as diverged:
        print(shown(f"awf: run {run_dir.name} diverged from its record:"), file=sys.stderr)
        sys.stderr.write(quoted(str(diverged)))
        return EXIT_DIVERGED
    except DefinitionError as error:  # RecordUnreadable too: the record, or the file, can't be replayed
        raise UsageFailure(str(error)) from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for note in run.notes:
        print(shown(f"awf: {note}"), file=sys.stderr)
    print(shown(f"awf: run {run_dir.name} replayed to its recorded ending ({run.outcome}), with no agent CLI"), file=sys.stderr)
    return 0


async def _replay(definition: WorkflowDefinition, run_dir: Path, options: argparse.Namespace, scratch: Path) -> TestRun:
    return await replay(definition, run_dir, tools=options.tools, strict=not options.not_strict, run_root=scratch)


def parse_settings(words: list[str] | None) -> dict[str, dict[str, str]]:
    """`--set KEY:model=M,effort=E` (each flag one agent's) as {key: {"model": M, "effort": E}}."""
    found: dict[str, dict[str, str]] = {}
    for word in words or []:
        key, _, given = word.partition(":")
        pairs = [pair.partition("=") for pair in given.split(",") if pair]
        if not key or not pairs or any(not sep or name not in ("model", "effort") or not value for name, sep, value in pairs):
            raise UsageFailure(f"--set {word}: give KEY:model=NAME,effort=LEVEL (either or both)")
        found.setdefault(key, {}).update({name: value for name, _, value in pairs})
    return found


def run_fork(options: argparse.Namespace, definition: WorkflowDefinition, run_dir: Path) -> RunResult:
    """`awf continue RUN --from KEY:N [--set …]`: a new run forked from RUN at agent KEY's turn N."""
    if options.rerun is not None:
        raise UsageFailure("--from forks a new run at a turn; --rerun goes on with the same run: give one of them")
    settings = parse_settings(options.settings)
    try:
        key, n = parse_turn(options.from_turn)
    except DefinitionError as error:
        raise UsageFailure(str(error)) from None
    fork = ContinueFrom(run_dir, key, n, settings=settings)
    print(shown(f"awf: forking run {run_dir.name} at {options.from_turn}: what came before it is played from the record"),
          file=sys.stderr)  # fmt: skip
    try:
        return anyio.run(_fork, definition, fork, options, backend=options.backend)
    except ReplayDiverged as diverged:
        print(shown(f"awf: the workflow diverged from run {run_dir.name}'s record before {options.from_turn}:"), file=sys.stderr)
        sys.stderr.write(quoted(str(diverged)))
        raise UsageFailure("no fork: make the workflow do what it did up to that turn, or fork at an earlier one") from None
    except DefinitionError as error:
        raise UsageFailure(str(error)) from None


async def _fork(definition: WorkflowDefinition, fork: ContinueFrom, options: argparse.Namespace) -> RunResult:
    return await run(definition, continue_from=fork, timeout=options.timeout, sandbox=options.sandbox_file,
                     budget=options.budget_limits)  # fmt: skip


def add_fork_options(parser: argparse.ArgumentParser) -> None:
    """`awf continue`'s `--from KEY:N` and `--set KEY:model=…,effort=…`."""
    parser.add_argument("--from", dest="from_turn", metavar="KEY:N",
                        help="fork a new run at agent KEY's turn N: what came before it is played from the record")  # fmt: skip
    parser.add_argument("--set", dest="settings", action="append", metavar="KEY:model=M,effort=E",
                        help="with --from: agent KEY's model and/or effort from the fork's turn on (repeatable)")  # fmt: skip


def command_export(options: argparse.Namespace) -> int:
    run_dir = run_dir_of(options, options.run).resolve()
    try:
        exported = export_record(run_dir, Path(options.directory))
    except RecordUnreadable as error:
        raise UsageFailure(str(error)) from None
    except FileExistsError as error:
        raise UsageFailure(str(error)) from None
    print(shown(f"awf: exported run {run_dir.name} to {exported.directory} ({len(exported.files)} files)"), file=sys.stderr)
    if exported.paths:
        print(shown(f"awf: {len(exported.paths)} strings still name a path of this machine; the first: {exported.paths[0]}"),
              file=sys.stderr)  # fmt: skip
    return 0


def add_parsers(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    replay_parser = commands.add_parser(
        "replay", help="run a workflow again with its agents played from a record: no agent CLI, no model"
    )
    replay_parser.add_argument("run", help="a run id or a record's directory (an exported one too)")
    replay_parser.add_argument("file", nargs="?", help="the workflow's file (default: the one a live record names)")
    replay_parser.add_argument("--workflow", help="which workflow, when the file defines several")
    replay_parser.add_argument("--tools", choices=["handlers", "record"], default="handlers",
                               help="run the tool handlers again (default), or answer tool calls from the record")  # fmt: skip
    replay_parser.add_argument("--not-strict", action="store_true", help="let a turn's prompt text differ")
    replay_parser.add_argument("--run-root", help="where records are (default .awf/runs)")
    replay_parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    replay_parser.set_defaults(handler=command_replay)

    export_parser = commands.add_parser("export", help="copy a run's record to check in: no path, socket or environment of this machine")
    export_parser.add_argument("run", help="a run id or directory")
    export_parser.add_argument("directory", help="where the copy goes (new, or empty)")
    export_parser.add_argument("--run-root", help="where records are (default .awf/runs)")
    export_parser.set_defaults(handler=command_export)

