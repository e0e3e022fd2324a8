"""`awf check FILE [--workflow NAME] [--timeout DURATION] [-- ARGS…]`: a workflow's file checked
before anything runs.

It loads the file (a tool whose handler can't take its input, a workflow that isn't one, an import that fails), reads its args as awf run would, and checks every runtime (its CLI on PATH), sandbox, schema, timeout and budget written as a literal in its source, and the keywords of every call of an agent's method: all of its mistakes at once, each with its line, and no agent started. A turn's timeout longer than the run's (--timeout, as awf run takes it; default 30m) is warned of. Exit 0 when no mistake is found, 2 if any.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import DefinitionError
from ..workflow.checking import KINDS, Checked, check_file
from ..workflow.durations import to_seconds
from ..workflow.loading import load_workflow
from ..workflow.running import decode_args
from .failures import UsageFailure
from .run import parse_args  # the args as `awf run` reads them
from .shown import shown

EXIT_FOUND = 2
KIND_NAMES = {"runtime": ("runtime", "runtimes"), "sandbox": ("sandbox", "sandboxes"), "schema": ("schema", "schemas"),
              "timeout": ("timeout", "timeouts"), "budget": ("budget", "budgets"),
              "call": ("call of an agent's method", "calls of agents' methods")}  # fmt: skip


def add_parsers(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = commands.add_parser(
        "check", help="check a workflow's file before running it: its runtimes, schemas, tools, args",
        usage="awf check FILE [--workflow NAME] [--timeout DURATION] [-- args…]",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )  # fmt: skip
    parser.add_argument("file", help="the workflow's Python file")
    parser.add_argument("--workflow", help="which workflow, if the file defines several")
    parser.add_argument("--timeout", help="the run's timeout, as awf run takes it (default 30m)")
    parser.set_defaults(handler=command_check)


def command_check(options: argparse.Namespace) -> int:
    path = Path(options.file)
    if not path.is_file():
        raise UsageFailure(f"no such file: {options.file}")
    try:
        run_seconds = None if options.timeout is None else to_seconds(options.timeout, what="--timeout")
    except DefinitionError as error:
        raise UsageFailure(str(error)) from None
    problems: list[str] = []
    namespace: dict[str, Any] | None = None
    try:
        definition = load_workflow(path, options.workflow)
        namespace = vars(sys.modules[definition.fn.__module__])
        decode_args(definition, parse_args(definition, options.args))
    except (DefinitionError, UsageFailure) as error:
        problems.append(str(error))
    checked = check_file(path, namespace, run_seconds=run_seconds)
    problems += [f"{path}:{finding.line}: {finding.problem}" for finding in checked.findings]
    for problem in problems:
        print(shown(f"awf: {problem}"), file=sys.stderr)
    for warning in checked.warnings:
        print(shown(f"awf: {path}:{warning.line}: warning: {warning.problem}"), file=sys.stderr)
    if problems:
        print(f"awf: {len(problems)} problem(s) in {path}", file=sys.stderr)
        return EXIT_FOUND
    print(f"awf: {path}: no problem found; {checked_line(checked)}", file=sys.stderr)
    return 0


def checked_line(checked: Checked) -> str:
    """What was checked, by kind: `checked 2 runtimes, 1 schema and 1 timeout written as literals`."""
    counts = [f"{checked.checked[kind]} {KIND_NAMES[kind][checked.checked[kind] != 1]}" for kind in KINDS if checked.checked[kind]]
    later = "what the workflow computes is checked when it runs"
    if not counts:
        return f"nothing in it is written as a literal to check ({later})"
    listed = counts[0] if len(counts) == 1 else f"{', '.join(counts[:-1])} and {counts[-1]}"
    return f"checked {listed} ({later})"
