"""`awf inbox`, `awf send` and `awf reply`: a person as a participant of a live run, reading and
writing its messages.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from ..engine.mail.words import Mail
from ..engine.operator_wire import PostAs, ReadInbox
from ..engine.record.layout import DEFAULT_RUN_ROOT, find_run
from ..errors import DefinitionError
from ..workflow.durations import to_seconds
from . import temporal
from .failures import UsageFailure
from .runs import LIVE_RUN_HELP, answered, ask_live_run, value_of
from .shown import quoted, shown


def mail_text(mail: Mail, key: str) -> str:
    """One message as `awf inbox` prints it: awf's header at the margin, then the body, which an
    agent may have written, `quoted` line by line under it, so no line of it reads as a header."""
    reply = f"awf reply {shlex.quote(mail.sender)} --as {shlex.quote(key)}"
    kind = {"question": f" (a question: {reply})", "reply": " (a reply)"}.get(mail.kind, "")
    return shown(f"from {mail.sender}{kind}:") + "\n" + quoted(mail.text) + "\n"


def command_inbox(options: argparse.Namespace) -> int:
    wait = 0.0
    if options.wait is not None:
        try:
            wait = to_seconds(options.wait, what="--wait")
        except DefinitionError as error:
            raise UsageFailure(str(error)) from None
    read = ReadInbox(options.key, int(wait * 1000))
    mail = value_of(temporal.ask_person(options, read) or ask_live_run(options, read), list[Mail])
    for one in mail:
        sys.stdout.write(mail_text(one, options.key))
    if not mail:
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
    post = PostAs(options.key, options.peer, text, options.command == "reply")
    response = answered(temporal.ask_person(options, post) or ask_live_run(options, post))
    print(shown(f"awf: {response.message}"))
    return 0


def add_parsers(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
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
            help="the run's id or directory (default: the one live run), the agent or participant to write to, "
            "and the message (default: standard input)",
        )
        post_parser.add_argument("--as", dest="key", required=True, help="the participant's key")
        post_parser.add_argument("--run-root", help=f"where records are (default {DEFAULT_RUN_ROOT})")
        post_parser.set_defaults(handler=command_post)
