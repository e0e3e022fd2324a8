"""`awf`, the operator's command: run a workflow file, decide on its tool calls, read its record.

Exit codes of `awf run`: 0 completed, 1 failed or timed out, 2 a usage error or a
refused run, 3 stopped, 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
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
from ..progress import show_progress
from ..wire.common import parse_duration
from ..wire.nesting import too_deep
from ..wire.teaching import ReadError, Taught
from ..workflow.definition import WorkflowDefinition
from ..workflow.durations import to_seconds
from ..workflow.loading import load_workflow
from ..workflow.running import RunResult, run
from .attach import AttachFailure
from .attach import add_parser as add_attach_parser
from .logs import print_run, print_trace

EXIT_BY_OUTCOME = {"completed": 0, "failed": 1, "timed-out": 1, "stopped": 3, "cancelled": 130}
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
LIVE_RUN_HELP = "the run's id or directory (default: the one live run)"
RUN_EPILOG = (
    "The words after -- are the workflow's args: --name value flags for an args Struct "
    "of simple fields, or one JSON value. Standard output holds only the run's result."
)


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
            deep = too_deep(argv[0])
            if deep is not None:
                raise ReadError(deep)
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
            structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty(), sort_keys=False),
        ],
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
    )


async def _run_with_interrupt(
    definition: WorkflowDefinition, options: argparse.Namespace, args: Any, replay: Path | None
) -> RunResult | None:
    """Run it; None if Ctrl-C cancelled it (its record still says how it ended).

    The signals are caught for the whole run: a second Ctrl-C while the run stops its
    agents and records its ending is told to wait, never a KeyboardInterrupt.
    """
    result: RunResult | None = None
    run_scope = anyio.CancelScope()

    async def watch_interrupt(*, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()
            async for _ in signals:
                if run_scope.cancel_called:
                    print("awf: stopping the agents and recording the run's ending; a moment", file=sys.stderr)
                run_scope.cancel()

    async with anyio.create_task_group() as group:
        await group.start(watch_interrupt)
        with run_scope:
            result = await run(
                definition,
                args=args,
                run_root=options.run_root,
                cwd=options.cwd,
                timeout=options.timeout,
                replay=replay,
            )
        group.cancel_scope.cancel()
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


def command_run(options: argparse.Namespace) -> int:
    with _stdout_to_stderr():
        result, definition = _start_run(options)
    if result is None:
        print("awf: interrupted; the run was cancelled", file=sys.stderr)
        runs = sorted(
            (_run_root(options) / definition.name).glob("*/run.json"), key=lambda path: path.stat().st_mtime_ns
        )
        if runs:
            print(f"awf: record {runs[-1].parent}  (awf logs {runs[-1].parent.name})", file=sys.stderr)
        return EXIT_INTERRUPTED
    if options.json:
        record = {
            "outcome": result.outcome,
            "reason": result.reason,
            "where": result.where,
            "value": result.value,
            "run_id": result.run_id,
            "run_dir": str(result.run_dir),
        }
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(record)).decode() + "\n")
    elif result.completed:
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(result.value)).decode() + "\n")
    sys.stdout.flush()
    ending = result.outcome if result.reason is None else f"{result.outcome}: {result.reason}"
    replayed = f" (a replay of {options.replay}: no tool handler ran)" if options.replay else ""
    print(f"awf: {definition.name} {ending}{replayed}", file=sys.stderr)
    if result.where:
        print(f"awf:   at {result.where}  (the traceback: awf logs {result.run_id})", file=sys.stderr)
    print(f"awf: record {result.run_dir}  (awf logs {result.run_id})", file=sys.stderr)
    return EXIT_BY_OUTCOME[result.outcome]


def _start_run(options: argparse.Namespace) -> tuple[RunResult | None, WorkflowDefinition]:
    """Load the workflow, check what `awf run` was given, and run it; usage errors raise UsageFailure."""
    try:
        definition = load_workflow(options.file, options.workflow)
        if options.timeout is not None:
            to_seconds(options.timeout, what="--timeout")
    except DefinitionError as error:
        raise UsageFailure(str(error)) from None
    args = parse_args(definition, options.args)
    replay = None
    if options.replay is not None:
        replay = find_run(_run_root(options), options.replay)
        if replay is None:
            raise UsageFailure(f"--replay {options.replay}: no record of that run under {_run_root(options)}")
    _configure_progress()
    try:
        return anyio.run(_run_with_interrupt, definition, options, args, replay, backend=options.backend), definition
    except DefinitionError as error:
        raise UsageFailure(str(error)) from None
    except BaseExceptionGroup as group:  # a refusal before the run started, from inside the task group
        leaves = leaf_errors(group)
        if not all(isinstance(leaf, DefinitionError) for leaf in leaves):
            raise
        raise UsageFailure(str(leaves[0])) from None


def _run_dir(options: argparse.Namespace, run: str | None) -> Path:
    root = Path(options.run_root) if options.run_root else DEFAULT_RUN_ROOT
    run_dir = find_run(root, run)
    if run_dir is None:
        which = f"run {run!r}" if run else "any run"
        raise UsageFailure(f"no record of {which} under {root}")
    return run_dir


def command_logs(options: argparse.Namespace) -> int:
    print_run(_run_dir(options, options.run), sys.stdout)
    return 0


def _is_live(run_dir: Path) -> bool:
    """The run has not recorded its ending, and its operator socket is there."""
    if (run_dir / "output.json").exists():
        return False
    try:
        control = read_json(run_dir / "run.json").get("control")
    except (OSError, msgspec.DecodeError, AttributeError):
        return False
    return bool(control) and Path(control).is_socket()


def _live_run_dir(options: argparse.Namespace) -> Path:
    """The run named, or else the one live run under the run root."""
    if options.run is not None:
        return _run_dir(options, options.run)
    root = Path(options.run_root) if options.run_root else DEFAULT_RUN_ROOT
    live = sorted(path.parent for path in root.glob("*/*/run.json") if _is_live(path.parent))
    if not live:
        raise UsageFailure(f"no run is live under {root} (--run-root names another place); awf logs shows the latest run")
    if len(live) > 1:
        names = ", ".join(f"{path.name} ({path.parent.name})" for path in live)
        raise UsageFailure(f"{len(live)} live runs under {root}: {names}; name one")
    return live[0]


def _ask_live_run(options: argparse.Namespace, request: OperatorRequest) -> OperatorResponse:
    run_dir = _live_run_dir(options)
    control = read_json(run_dir / "run.json").get("control")
    if (run_dir / "output.json").exists() or not control:
        raise UsageFailure(f"run {run_dir.name} has ended; only a live run can be asked (awf logs {run_dir.name} shows it)")
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


def _post_words(options: argparse.Namespace) -> None:
    """`[run] peer [message]`: two words are a run and a peer when the first names a run's record."""
    words = options.words
    if len(words) > 3:
        raise UsageFailure(f"awf {options.command} takes [run] peer [message], not {len(words)} words")
    root = Path(options.run_root) if options.run_root else DEFAULT_RUN_ROOT
    if len(words) == 3 or (len(words) == 2 and find_run(root, words[0]) is not None):
        options.run, words = words[0], words[1:]
    else:
        options.run = None
    options.peer = words[0]
    options.message = words[1] if len(words) > 1 else None


def command_post(options: argparse.Namespace) -> int:
    _post_words(options)
    text = options.message if options.message is not None else sys.stdin.read()
    text = text.removesuffix("\n")
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

    run_parser = commands.add_parser(
        "run", help="run a workflow file", usage="awf run FILE [options] [-- args…]", epilog=RUN_EPILOG
    )
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

    inbox_parser = commands.add_parser("inbox", help="read a participant's messages in a live run")
    inbox_parser.add_argument("run", nargs="?", help=LIVE_RUN_HELP)
    inbox_parser.add_argument("--as", dest="key", required=True, help="the participant's key")
    inbox_parser.add_argument("--wait", help="wait this long for a message if there is none, e.g. 10m")
    inbox_parser.add_argument("--run-root", help=f"where records are (default {DEFAULT_RUN_ROOT})")
    inbox_parser.set_defaults(handler=command_inbox)

    for name, text in (("send", "send a message as a participant"), ("reply", "answer a question as a participant")):
        post_parser = commands.add_parser(name, help=text, usage=f"awf {name} [run] peer [message] --as KEY")
        post_parser.add_argument(
            "words",
            nargs="+",
            metavar="[run] peer [message]",
            help=f"the run ({LIVE_RUN_HELP}), the agent or participant to write to, "
            "and the message (default: standard input)",
        )
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
    add_attach_parser(commands)
    return parser


ABANDONED_THREAD_JOIN_SECONDS = 0.2  # for worker threads to finish before awf exits without them


def _exit_past_abandoned_threads(code: int) -> int:
    """`code`, or exit with it now if a thread is still running: a sync tool handler the run
    abandoned, which can't be killed and would otherwise hold the process until it returned."""
    deadline = time.monotonic() + ABANDONED_THREAD_JOIN_SECONDS
    others = [thread for thread in threading.enumerate() if thread is not threading.current_thread()]
    for thread in others:
        if not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
    if any(thread.is_alive() and not thread.daemon for thread in others):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def main(argv: list[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    split = words.index("--") if "--" in words else len(words)
    options = _parser().parse_args(words[:split])
    options.args = words[split + 1 :]
    sweep_dead_runs()  # what a run killed with -9 (and its watchdog with it) left
    try:
        return _exit_past_abandoned_threads(int(options.handler(options)))
    except (UsageFailure, AttachFailure) as error:
        print(f"awf: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # before a run's signals are caught, or after
        print("awf: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
