"""`awf`, the operator's command: run a workflow file, decide on its tool calls, read its record.

Each command group is a module that adds its commands' parsers, each with its handler
(`GROUPS`); this one assembles them, reads the words, and runs the command's handler, saying
its failures in a line. Exit codes: `cli/run.py`'s for `awf run`; 2 a usage error.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import shlex
import sys
import threading
import time

from ..__about__ import __version__
from ..engine.collector import pace_collector
from ..errors import PayloadKeyError
from ..launcher.place import sweep_dead_runs
from .failures import EXIT_INTERRUPTED, EXIT_REFUSED, EXIT_USAGE, AttachFailure, Refused, UsageFailure
from .shown import shown

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a command its reader stopped reading


GROUPS: dict[str, tuple[str, ...]] = {
    "run": ("run", "continue"),
    "approvals": ("approve", "reject", "pending"),
    "mail": ("inbox", "send", "reply"),
    "record": ("trace", "logs"),
    "replay": ("replay", "export"),
    "worktrees": ("worktrees",),
    "check": ("check",),
    "temporal": ("worker", "codec-server"),
    "doctor": ("doctor",),
    "control": ("ls", "status", "stop", "tail"),
    "attach": ("attach",),
}
"""Each command group's module (`agentswf.cli.<module>`, whose `add_parsers` adds its commands and
their handlers) with its commands, in the order `awf --help` lists them. Only the module of the
command given is imported: most import the engine, which `awf ls` would otherwise wait for (a
third of a second); `awf --help`, or a word that is no command, imports them all."""


def _parser(command: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="awf",
        description="Run workflows of coding agents.",
        epilog="Start with: awf run FILE [options] [-- workflow args…]; awf COMMAND --help gives each command's flags.",
    )
    parser.add_argument("--version", action="version", version=f"awf {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for module, names in GROUPS.items():
        if command in names or command is None:
            importlib.import_module(f"{__package__}.{module}").add_parsers(commands)
    return parser


def _command(words: list[str]) -> str | None:
    """The command of `words` (awf's own flags take no value): its first word that is no flag, or
    "" for `awf --version` alone, which needs no command's module; None, all of them: for `--help`,
    for a word that is no command (argparse lists them, and names the nearest)."""
    if words == ["--version"]:
        return ""
    word = next((word for word in words if not word.startswith("-")), None)
    return word if any(word in names for names in GROUPS.values()) else None


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


def _take_extras(parser: argparse.ArgumentParser, options: argparse.Namespace, extras: list[str]) -> None:
    """What argparse left over: the words of `awf send/reply` given after `--as KEY` are theirs;
    anything else is a usage error naming the flag it looks like (`--timout`: `--timeout`)."""
    if not extras:
        return
    if hasattr(options, "words") and not any(word.startswith("-") for word in extras):
        options.words.extend(extras)
        return
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    command = commands.choices[options.command]
    flags = [flag for action in command._actions for flag in action.option_strings if flag.startswith("--")]
    word = next((word for word in extras if word.startswith("-")), extras[0])
    listed = f"awf {options.command} --help lists them"
    after = _workflow_args_after(options, extras)
    if not word.startswith("-"):
        raise UsageFailure(f"unexpected argument {word!r} for awf {options.command}{after}")
    flag = word.split("=", 1)[0]
    like = difflib.get_close_matches(flag, flags, n=1)
    if like:
        raise UsageFailure(f"awf {options.command} has no flag {flag} (did you mean {like[0]}?); {listed}")
    raise UsageFailure(f"awf {options.command} has no flag {flag}{after or '; ' + listed}")


WORKFLOW_ARGS_COMMANDS = ("run", "check")  # the commands that take a workflow's args after --


def _workflow_args_after(options: argparse.Namespace, extras: list[str]) -> str:
    """For `awf run FILE --rounds 2` (the `--` forgotten): the command with the words after `--`."""
    if options.command not in WORKFLOW_ARGS_COMMANDS:
        return ""
    command = shlex.join(["awf", options.command, str(options.file), "--", *extras, *options.args])
    return f"; a workflow's args go after --: {command}"


def main(argv: list[str] | None = None) -> int:
    pace_collector()  # awf owns its process: its runs' collector is paced for many agents
    words = list(sys.argv[1:] if argv is None else argv)
    split = words.index("--") if "--" in words else len(words)
    parser = _parser(_command(words[:split]))
    options, extras = parser.parse_known_args(words[:split])
    options.args = words[split + 1 :]
    try:
        _take_extras(parser, options, extras)
    except UsageFailure as error:
        print(f"awf: {error}", file=sys.stderr)
        return EXIT_USAGE
    sweep_dead_runs()  # what a run killed with -9 (and its watchdog with it) left
    code = _handle(options)
    if getattr(options, "talked_to_temporal", False):  # set by what talked to it, which imported cli/temporal
        from .temporal import exit_now

        return exit_now(code)
    return _exit_past_abandoned_threads(code)


def _handle(options: argparse.Namespace) -> int:
    """The command's exit status, its failures said in a line (a Temporal command's too: it
    still exits through `temporal.exit_now`, past the SDK's threads)."""
    try:
        return int(options.handler(options))
    except (UsageFailure, AttachFailure, PayloadKeyError) as error:  # a payload key: Temporal's commands
        print(shown(f"awf: {error}"), file=sys.stderr)  # it can name what an agent wrote (a run's, a peer's name)
        return EXIT_USAGE
    except Refused as error:  # by the run (an agent's process asking), said as a refusal: one line
        print(shown(f"awf: {error}"), file=sys.stderr)
        return EXIT_REFUSED
    except KeyboardInterrupt:  # before a run's signals are caught, or after
        print("awf: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `awf logs | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the exit's flush doesn't fail again
        return EXIT_BROKEN_PIPE
