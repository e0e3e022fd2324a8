"""`awf`'s entry point ([project.scripts]), outside the agentswf package so that nothing of it is
imported before it runs: importing agentswf and awf's commands takes a second or more, and a
Ctrl-C in that time is said in a line, `awf: interrupted` (exit 130), not as a traceback."""

from __future__ import annotations

import sys

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as `awf run` exits on Ctrl-C


def main() -> int:
    try:
        from agentswf.cli.main import main as awf

        return awf()
    except KeyboardInterrupt:  # before awf's own handling of it (imports, parsing), or after
        print("awf: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
