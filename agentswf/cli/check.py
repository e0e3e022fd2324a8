"""`awf check FILE [--workflow NAME] [-- ARGS…]`: a workflow's file checked before anything runs.

It loads the file (a tool whose handler can't take its input, a workflow that isn't one, an
import that fails), reads its args as `awf run` would, and checks every literal runtime (its CLI
on PATH), sandbox, schema, timeout and budget in its source (`workflow/checking.py`): all of its
mistakes at once, each with its line, and no agent started. Exit 0 when none is found, 2 if any.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import DefinitionError
from ..workflow.checking import check_file
from ..workflow.loading import load_workflow
from ..workflow.running import decode_args
from .run import parse_args  # the args as `awf run` reads them
from .runs import UsageFailure
from .shown import shown

EXIT_FOUND = 2


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = commands.add_parser(
        "check", help="check a workflow's file before running it: its runtimes, schemas, tools, args",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )  # fmt: skip
    parser.add_argument("file", help="the workflow's Python file")
    parser.add_argument("--workflow", help="which workflow, if the file defines several")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the workflow's args after --, as awf run takes them")
    parser.set_defaults(handler=command_check)


def command_check(options: argparse.Namespace) -> int:
    path = Path(options.file)
    if not path.is_file():
        raise UsageFailure(f"no such file: {options.file}")
    problems: list[str] = []
    namespace: dict[str, Any] | None = None
    try:
        definition = load_workflow(path, options.workflow)
        namespace = vars(sys.modules[definition.fn.__module__])
        words = options.args[1:] if options.args[:1] == ["--"] else options.args
        decode_args(definition, parse_args(definition, words))
    except (DefinitionError, UsageFailure) as error:
        problems.append(str(error))
    checked = check_file(path, namespace)
    problems += [f"{path}:{finding.line}: {finding.problem}" for finding in checked.findings]
    for problem in problems:
        print(shown(f"awf: {problem}"), file=sys.stderr)
    if problems:
        print(f"awf: {len(problems)} problem(s) in {path}", file=sys.stderr)
        return EXIT_FOUND
    print(
        f"awf: {path}: no problem found ({checked.checked} literal runtimes, sandboxes, schemas, timeouts and "
        "budgets checked; what the workflow computes as it runs is checked when it runs)",
        file=sys.stderr,
    )
    return 0
