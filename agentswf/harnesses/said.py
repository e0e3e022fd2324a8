"""What an attempt's processes say for a person to read, kept as they say it: the last bytes of
its standard error (and of a shell agent's standard output), and when it last said anything.

The harness feeds it as the output comes (`process.run_in_group`; an agent CLI's reader adds the
errors its CLI reports on its JSON output, `note`); the run reads it while the attempt runs (`awf
status`: its latest line, and when), as a stopped turn settles (a timed-out turn's reason: its last
lines) and as the attempt ends (the record: `calls/<id>/attempts.jsonl`). Every byte is the
agent's: kept bounded here, and printed to a person only through `cli/shown.py`.
"""

from __future__ import annotations

import time
from typing import Literal

SAID_TAIL_BYTES = 16 * 1024  # of each stream, per attempt: held while it runs, then in the record
LAST_LINES = 5  # of an attempt's output, in the reason of a turn it was stopped in
LINE_CHARS = 300  # of one line, in a reason or `awf status`: the record keeps the line whole

Stream = Literal["stdout", "stderr"]


class Said:
    """One attempt's output tails, fed as the output comes; read between two chunks on the run's loop."""

    def __init__(self) -> None:
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.at: float | None = None  # when it last said something (Unix seconds), not only blanks
        self.latest: Stream = "stderr"  # the stream that did

    def heard(self, stream: Stream, chunk: bytes) -> None:
        kept = self.stderr if stream == "stderr" else self.stdout
        if len(chunk) >= SAID_TAIL_BYTES:  # a flood: its end is all that is kept
            kept[:] = chunk[-SAID_TAIL_BYTES:]
        else:
            kept += chunk
            if len(kept) > SAID_TAIL_BYTES:
                del kept[: len(kept) - SAID_TAIL_BYTES]
        if chunk and not chunk.isspace():
            self.at, self.latest = time.time(), stream

    def heard_stdout(self, chunk: bytes) -> None:
        self.heard("stdout", chunk)

    def heard_stderr(self, chunk: bytes) -> None:
        self.heard("stderr", chunk)

    def note(self, text: str) -> None:
        """A line its CLI reported on its JSON output for a person (codex's `Reconnecting...`): kept
        with its standard error, where a CLI that prints text says the same."""
        self.heard("stderr", text.encode(errors="replace") + b"\n")

    def text(self, stream: Stream) -> str:
        return (self.stderr if stream == "stderr" else self.stdout).decode(errors="replace")

    def latest_line(self) -> str | None:
        """The last line it said, cut at LINE_CHARS; None if it said nothing yet."""
        lines = said_lines(self.text(self.latest), 1)
        return lines[0] if self.at is not None and lines else None

    def let_go(self) -> None:
        """Its attempt is over and recorded: keep only its latest line, which `awf status` may still
        show (a run of many agents holds a line of each, not their tails)."""
        kept = bytearray((self.latest_line() or "").encode())
        self.stdout, self.stderr = (bytearray(), kept) if self.latest == "stderr" else (kept, bytearray())

    def last_lines(self, count: int = LAST_LINES) -> list[str]:
        """Its standard error's last `count` lines, or its standard output's where it wrote no error."""
        return said_lines(self.text("stderr"), count) or said_lines(self.text("stdout"), count)


def said_lines(text: str, count: int) -> list[str]:
    """The last `count` lines of `text` that aren't blank, each cut at LINE_CHARS (a carriage return
    ends a line: a progress bar's last state is a line of its own)."""
    lines = [line for line in text.splitlines() if line.strip()][-count:] if count > 0 else []
    return [line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…" for line in lines]
