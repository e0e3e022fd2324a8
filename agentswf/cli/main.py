"""`awf`, the operator's command: run a workflow file, decide on its tool calls, read its record.

Exit codes of `awf run`: 0 completed, 1 failed or timed out, 2 a usage error or a
refused run, 3 stopped, 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import msgspec
import structlog

from ..__about__ import __version__
from ..engine.operator import (
    Approve,
    OperatorRequest,
    OperatorResponse,
    Pending,
    PostAs,
    ReadInbox,
    Reject,
    ask_run,
)
from ..engine.records import DEFAULT_RUN_ROOT, find_run, read_json
from ..errors import DefinitionError, leaf_errors
from ..launcher.place import sweep_dead_runs
from ..wire.teaching import ReadError, Taught
from ..workflow.definition import WorkflowDefinition
from ..workflow.durations import to_seconds
from ..workflow.loading import load_workflow
from ..workflow.running import RunResult, run
from ..progress import show_progress
from ..wire.common import parse_duration
from .logs import print_run, print_trace

EXIT_BY_OUTCOME = {"completed": 0, "failed": 1, "timed-out": 1, "stopped": 3, "cancelled": 130}
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class UsageFailure(Exception):
    """What `awf` prints before exiting 2."""


def parse_args(definition: WorkflowDefinition, argv: list[str]) -> Any:
    """The workflow's args from the words after `--`: flags by its args type, or one JSON value."""
    if not definition.takes_args:
        if argv:
            raise UsageFailure(f"workflow {definition.name} takes no args, but was given {argv}")
        return None
    args_type = definition.args_type
    if args_type in (list[str], tuple[str, ...]):
        return list(argv)
    try:
        taught = Taught(args_type)
        if taught.form != "json" or not argv:
            return taught.read(argv, None if argv else "{}")
        if len(argv) == 1:
            return msgspec.json.decode(argv[0], type=args_type)
    except (ReadError, msgspec.DecodeError) as error:
        raise UsageFailure(f"workflow {definition.name}'s args: {error}") from None
    raise UsageFailure(f"workflow {definition.name} takes its args as one JSON value after --")


def json_text(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def _configure_progress() -> None:
    show_progress()
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="%H:%M:%S"),
            structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()),
        ],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


async def _run_with_interrupt(definition: WorkflowDefinition, options: argparse.Namespace, args: Any) -> RunResult | None:
    """Run it; None if Ctrl-C cancelled it (its record still says how it ended)."""
    result: RunResult | None = None
    async with anyio.create_task_group() as group:

        async def watch_interrupt() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    group.cancel_scope.cancel()
                    return

        group.start_soon(watch_interrupt)
        result = await run(
            definition,
            args=args,
            run_root=options.run_root,
            cwd=options.cwd,
            timeout=options.timeout,
            replay=_replayed_run(options),
        )
        group.cancel_scope.cancel()
    return result


def command_run(options: argparse.Namespace) -> int:
    try:
        definition = load_workflow(options.file, options.workflow)
    except DefinitionError as error:
        raise UsageFailure(str(error)) from None
    args = parse_args(definition, options.args)
    _configure_progress()
    if options.timeout is not None:
        try:
            to_seconds(options.timeout, what="--timeout")
        except DefinitionError as error:
            raise UsageFailure(str(error)) from None
    try:
        result = anyio.run(_run_with_interrupt, definition, options, args, backend=options.backend)
    except DefinitionError as error:
        raise UsageFailure(str(error)) from None
    except BaseExceptionGroup as group:  # a refusal before the run started, from inside the task group
        leaves = leaf_errors(group)
        if not all(isinstance(leaf, DefinitionError) for leaf in leaves):
            raise
        raise UsageFailure(str(leaves[0])) from None
    if result is None:
        print("awf: interrupted; the run was cancelled", file=sys.stderr)
        root = Path(options.cwd or ".") / (options.run_root or DEFAULT_RUN_ROOT)
        runs = sorted((root / definition.name).glob("*/run.json"), key=lambda path: path.stat().st_mtime_ns)
        if runs:
            print(f"awf: record {runs[-1].parent}  (awf logs {runs[-1].parent.name})", file=sys.stderr)
        return EXIT_INTERRUPTED
    if options.json:
        record = {
            "outcome": result.outcome,
            "reason": result.reason,
            "value": result.value,
            "run_id": result.run_id,
            "run_dir": str(result.run_dir),
        }
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(record)).decode() + "\n")
    elif result.completed:
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(result.value)).decode() + "\n")
    ending = result.outcome if result.reason is None else f"{result.outcome}: {result.reason}"
    print(f"awf: {definition.name} {ending}", file=sys.stderr)
    print(f"awf: record {result.run_dir}  (awf logs {result.run_id})", file=sys.stderr)
    return EXIT_BY_OUTCOME[result.outcome]


def _run_dir(options: argparse.Namespace, run: str | None) -> Path:
    root = Path(options.run_root) if options.run_root else DEFAULT_RUN_ROOT
    run_dir = find_run(root, run)
    if run_dir is None:
        which = f"run {run!r}" if run else "any run"
        raise UsageFailure(f"no record of {which} under {root}")
    return run_dir


def _replayed_run(options: argparse.Namespace) -> Path | None:
    return None if options.replay is None else _run_dir(options, options.replay)


def command_logs(options: argparse.Namespace) -> int:
    print_run(_run_dir(options, options.run), sys.stdout)
    return 0


def _ask_live_run(options: argparse.Namespace, request: OperatorRequest) -> OperatorResponse:
    run_dir = _run_dir(options, options.run)
    control = read_json(run_dir / "run.json").get("control")
    if (run_dir / "output.json").exists() or not control:
        raise UsageFailure(f"run {run_dir.name} has ended; there is nothing to decide")
    try:
        return ask_run(control, request)
    except OSError as error:
        raise UsageFailure(f"run {run_dir.name} isn't answering ({error}); it may have ended") from None


def command_decide(options: argparse.Namespace) -> int:
    kind = Approve if options.command == "approve" else Reject
    response = _ask_live_run(options, kind(options.call, options.reason or "", options.by))
    print(f"awf: {response.message}", file=sys.stderr if not response.ok else sys.stdout)
    return 0 if response.ok else 1


def command_inbox(options: argparse.Namespace) -> int:
    wait = 0.0
    if options.wait is not None:
        wait = parse_duration(options.wait) or 0.0
        if wait <= 0:
            raise UsageFailure(f"--wait takes a duration like 30s or 10m, not {options.wait!r}")
    response = _ask_live_run(options, ReadInbox(options.key, int(wait * 1000)))
    if not response.ok:
        print(f"awf: {response.message}", file=sys.stderr)
        return 1
    for mail in response.value or []:
        kind = {"question": " (a question: awf reply … {s})", "reply": " (a reply)"}.get(mail["kind"], "")
        print(f"from {mail['sender']}{kind.format(s=mail['sender'])}:\n{mail['text']}\n")
    if not response.value:
        print("awf: no messages" + (f" within {options.wait}" if options.wait else ""), file=sys.stderr)
        return 1 if options.wait else 0
    return 0


def command_post(options: argparse.Namespace) -> int:
    text = options.message if options.message is not None else sys.stdin.read()
    if text.endswith("\n"):
        text = text[:-1]
    if not text:
        raise UsageFailure("the message is empty: give it as an argument or on standard input")
    response = _ask_live_run(options, PostAs(options.key, options.peer, text, options.command == "reply"))
    print(f"awf: {response.message}", file=sys.stdout if response.ok else sys.stderr)
    return 0 if response.ok else 1


def command_trace(options: argparse.Namespace) -> int:
    print_trace(_run_dir(options, options.run), sys.stdout)
    return 0


def command_pending(options: argparse.Namespace) -> int:
    response = _ask_live_run(options, Pending())
    for request in response.value or []:
        why = f"  ({request['reason']})" if request.get("reason") else ""
        print(f"{request['call_id']}  {request['agent']} → {request['tool']}  {json_text(request['input'])}{why}")
    print(f"awf: {response.message}", file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="awf",
        description="Run workflows of coding agents.",
        epilog="awf run FILE [options] [-- workflow args…]",
    )
    parser.add_argument("--version", action="version", version=f"awf {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    run_parser = commands.add_parser("run", help="run a workflow file")
    run_parser.add_argument("file", help="a Python file that defines a @workflow")
    run_parser.add_argument("--workflow", help="which workflow, when the file defines several")
    run_parser.add_argument("--run-root", help=f"where records go (default {DEFAULT_RUN_ROOT} under --cwd)")
    run_parser.add_argument("--cwd", help="the run's working directory (default: here)")
    run_parser.add_argument("--timeout", help="the whole run's time, e.g. 45m (default 30m)")
    run_parser.add_argument("--json", action="store_true", help="print the run's ending as JSON")
    run_parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    run_parser.set_defaults(handler=command_run)

    run_parser.add_argument("--replay", metavar="RUN", help="answer every tool call from RUN's record; run no handler")

    for name, text in (("approve", "let a tool call waiting for approval run"), ("reject", "refuse a tool call waiting for approval")):
        decide_parser = commands.add_parser(name, help=text)
        decide_parser.add_argument("run", help="the run's id or directory")
        decide_parser.add_argument("call", help="the tool call's id (awf pending lists them)")
        decide_parser.add_argument("--reason", required=name == "reject", help="told to the agent")
        decide_parser.add_argument("--by", default="operator", help="who decided, for the record")
        decide_parser.add_argument("--run-root", help=f"where records are (default {DEFAULT_RUN_ROOT})")
        decide_parser.set_defaults(handler=command_decide)

    pending_parser = commands.add_parser("pending", help="list a live run's tool calls waiting for approval")
    pending_parser.add_argument("run", nargs="?", help="a run id or directory (default: the latest)")
    pending_parser.add_argument("--run-root", help=f"where records are (default {DEFAULT_RUN_ROOT})")
    pending_parser.set_defaults(handler=command_pending)

    inbox_parser = commands.add_parser("inbox", help="read a participant's messages in a live run")
    inbox_parser.add_argument("run", help="the run's id or directory")
    inbox_parser.add_argument("--as", dest="key", required=True, help="the participant's key")
    inbox_parser.add_argument("--wait", help="wait this long for a message if there is none, e.g. 10m")
    inbox_parser.add_argument("--run-root", help=f"where records are (default {DEFAULT_RUN_ROOT})")
    inbox_parser.set_defaults(handler=command_inbox)

    for name, text in (("send", "send a message as a participant"), ("reply", "answer a question as a participant")):
        post_parser = commands.add_parser(name, help=text)
        post_parser.add_argument("run", help="the run's id or directory")
        post_parser.add_argument("peer", help="the agent (or participant) to write to")
        post_parser.add_argument("message", nargs="?", help="the message (default: standard input)")
        post_parser.add_argument("--as", dest="key", required=True, help="the participant's key")
        post_parser.add_argument("--run-root", help=f"where records are (default {DEFAULT_RUN_ROOT})")
        post_parser.set_defaults(handler=command_post)

    trace_parser = commands.add_parser("trace", help="who sent what to whom, when it was read, how long it waited")
    trace_parser.add_argument("run", nargs="?", help="a run id or directory (default: the latest)")
    trace_parser.add_argument("--run-root", help=f"where records are (default {DEFAULT_RUN_ROOT})")
    trace_parser.set_defaults(handler=command_trace)

    logs_parser = commands.add_parser("logs", help="print a run's turns and answers")
    logs_parser.add_argument("run", nargs="?", help="a run id or directory (default: the latest)")
    logs_parser.add_argument("--run-root", help=f"where records are (default {DEFAULT_RUN_ROOT})")
    logs_parser.set_defaults(handler=command_logs)
    return parser


def main(argv: list[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    split = words.index("--") if "--" in words else len(words)
    options = _parser().parse_args(words[:split])
    options.args = words[split + 1 :]
    sweep_dead_runs()  # what a run killed with -9 (and its watchdog with it) left
    try:
        return int(options.handler(options))
    except UsageFailure as error:
        print(f"awf: {error}", file=sys.stderr)
        return EXIT_USAGE
