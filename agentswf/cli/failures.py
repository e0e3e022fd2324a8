"""How an `awf` command fails: an exception `awf` says in one line, and the status it exits with
(cli/main.py's `_handle`). Apart from the commands, so that `awf` knows them before it imports
the one command's module it runs."""

from __future__ import annotations

EXIT_REFUSED = 1  # the run refused what was asked, or answered what isn't an answer
EXIT_USAGE = 2  # what was asked can't be done as written: a usage error
EXIT_INTERRUPTED = 130  # 128 + SIGINT: a Ctrl-C


class UsageFailure(Exception):
    """What `awf` prints before exiting EXIT_USAGE."""


class Refused(Exception):
    """The run's refusal, in its words: what `awf` prints (one line) before exiting EXIT_REFUSED."""


class AttachFailure(Exception):
    """Why there is nothing to attach to; `awf` prints it and exits EXIT_USAGE."""
