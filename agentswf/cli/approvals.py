"""`awf approve`, `awf reject` and `awf pending`: a person deciding a live run's tool calls that wait
for approval, locally over the run's operator socket or on Temporal.
"""

from __future__ import annotations

import argparse
import sys

from ..engine.operator_wire import Approve, Pending, Reject
from ..engine.record.layout import DEFAULT_RUN_ROOT
from ..engine.record.lines import ApprovalRequest
from . import temporal
from .runs import LIVE_RUN_HELP, answered, ask_live_run, pending_line, value_of
from .shown import shown


def command_decide(options: argparse.Namespace) -> int:
    on_temporal = temporal.temporal_run(options)
    if on_temporal is not None:
        return temporal.command_decide(options, on_temporal)
    kind = Approve if options.command == "approve" else Reject
    response = answered(ask_live_run(options, kind(options.call, options.reason or "", options.by)))
    print(shown(f"awf: {response.message}"))
    return 0


def command_pending(options: argparse.Namespace) -> int:
    on_temporal = temporal.temporal_run(options)
    if on_temporal is not None:
        return temporal.command_pending(options, on_temporal)
    response = ask_live_run(options, Pending())
    for request in value_of(response, list[ApprovalRequest]):
        print(pending_line(request))
    print(shown(f"awf: {response.message}"), file=sys.stderr)
    return 0


def add_parsers(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    for name, text in (("approve", "let a tool call waiting for approval run"), ("reject", "refuse a tool call waiting for approval")):
        decide_parser = commands.add_parser(name, help=text)
        decide_parser.add_argument("run", nargs="?", help=LIVE_RUN_HELP)
        decide_parser.add_argument("call", help="the tool call's id (awf pending lists them)")
        decide_parser.add_argument("--reason", required=name == "reject", help="told to the agent")
        decide_parser.add_argument("--by", default="operator", help="who decided, for the record")
        decide_parser.add_argument("--run-root", help=f"where records are (default {DEFAULT_RUN_ROOT})")
        decide_parser.set_defaults(handler=command_decide)

    pending_parser = commands.add_parser("pending", help="list a live run's tool calls waiting for approval")
    pending_parser.add_argument("run", nargs="?", help=LIVE_RUN_HELP)
    pending_parser.add_argument("--run-root", help=f"where records are (default {DEFAULT_RUN_ROOT})")
    pending_parser.set_defaults(handler=command_pending)
