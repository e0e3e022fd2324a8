"""`awf logs` and `awf trace`: a run's record read back, its turns and answers, or who sent what to
whom (`--actors`: each actor's mailbox figures).
"""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import msgspec

from ..engine.record.layout import DEFAULT_RUN_ROOT
from . import temporal
from .actors import print_actors
from .failures import UsageFailure
from .logs import ATTEMPT_LINES_SHOWN, print_run, print_trace
from .runs import run_dir_of


def command_logs(options: argparse.Namespace) -> int:
    temporal.settle_record(options)  # a Temporal run whose host died: its record, from Temporal
    run_dir = run_dir_of(options, options.run)
    shown = None if options.output else ATTEMPT_LINES_SHOWN
    _print_whole(run_dir, lambda run_dir, out: print_run(run_dir, out, shown))
    return 0


def command_trace(options: argparse.Namespace) -> int:
    run_dir = run_dir_of(options, options.run)
    _print_whole(run_dir, print_actors if options.actors else print_trace)
    return 0


def _print_whole(run_dir: Path, printer: Callable[[Path, TextIO], None]) -> None:
    """The record as `printer` prints it, whole, or what can't be read of it in a line (`UsageFailure`)."""
    text = io.StringIO()
    try:
        printer(run_dir, text)
    except (OSError, msgspec.DecodeError) as error:  # a record file torn, or not a file (a FIFO an agent put there)
        raise UsageFailure(f"run {run_dir.name}'s record can't be read: {error}") from None
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as error:  # a line an agent wrote in another shape
        raise UsageFailure(f"run {run_dir.name}'s record can't be read: a line of it isn't of the record's shape ({error!r})") from None
    sys.stdout.write(text.getvalue())  # `awf logs | head` may leave: BrokenPipeError, not the record's fault


def add_parsers(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    trace_parser = commands.add_parser("trace", help="who sent what to whom, when it was read, how long it waited")
    trace_parser.add_argument("run", nargs="?", help="a run id or directory (default: the latest)")
    trace_parser.add_argument("--actors", action="store_true", help="each actor's mailbox figures, of a run traced with --trace")
    trace_parser.add_argument("--run-root", help=f"where records are (default {DEFAULT_RUN_ROOT})")
    trace_parser.set_defaults(handler=command_trace)

    logs_parser = commands.add_parser(
        "logs", help="print a run's turns and answers",
        description="Print a run's record as a story: its attempts, each turn's prompt, answer and outcome, tool calls, "
                    "messages and log lines, and how it ended. RUN is a run's id or directory, or a workflow's name "
                    "for its latest run.",
    )  # fmt: skip
    logs_parser.add_argument("run", nargs="?", help="a run id or directory (default: the latest)")
    logs_parser.add_argument(
        "--output", action="store_true",
        help=f"each attempt's output as the record keeps it, not only its last {ATTEMPT_LINES_SHOWN} lines",
    )
    logs_parser.add_argument("--run-root", help=f"where records are (default {DEFAULT_RUN_ROOT})")
    logs_parser.set_defaults(handler=command_logs)
