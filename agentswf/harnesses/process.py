"""Run an agent's CLI in a process group of its own, and leave nothing of it behind.

The group, not the process, is what gets stopped: an agent's shell starts children
(builds, servers, `sleep &`) that outlive the CLI unless the whole group goes. On
cancellation the group gets SIGTERM, a grace, then SIGKILL; when the CLI exits on its
own, whatever it left in its group is killed at once.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

KILL_GRACE_SECONDS = 2.0  # between SIGTERM and SIGKILL
DRAIN_GRACE_SECONDS = 1.0  # for output pipes held open by an escaped grandchild
OUTPUT_TAIL_BYTES = 64 * 1024  # of standard output and of standard error, each
MAX_LINE_BYTES = 4 * 1024 * 1024  # a longer output line is not handed to the reader
_READ_BYTES = 65536


@dataclass(frozen=True, slots=True)
class Exited:
    """A finished CLI: its exit status (negative: killed by that signal) and output tails."""

    exit_code: int
    stdout: str
    stderr: str

    def stderr_lines(self, count: int) -> str:
        return "\n".join(self.stderr.strip().splitlines()[-count:])


LineReader = Callable[[bytes], None]


class _Tail:
    """The last bytes of an output, and, for a reader, each whole line as it comes."""

    def __init__(self, limit: int, reader: LineReader | None = None) -> None:
        self.limit = limit
        self.data = bytearray()
        self.reader = reader
        self.partial = bytearray()

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > self.limit:
            del self.data[: len(self.data) - self.limit]
        if self.reader is None:
            return
        self.partial += chunk
        *lines, rest = self.partial.split(b"\n")
        self.partial = bytearray(rest if len(rest) <= MAX_LINE_BYTES else b"")
        for line in lines:
            if line and len(line) <= MAX_LINE_BYTES:
                self.reader(bytes(line))

    def finish(self) -> None:
        if self.reader is not None and self.partial:
            self.reader(bytes(self.partial))
            self.partial = bytearray()

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


async def _feed(stream: ByteSendStream | None, data: bytes) -> None:
    if stream is None:
        return
    try:
        if data:
            await stream.send(data)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass  # the CLI did not read its input; that is its business
    finally:
        await stream.aclose()


async def _drain(stream: ByteReceiveStream | None, tail: _Tail) -> None:
    if stream is None:
        return
    try:
        while True:
            tail.add(await stream.receive(_READ_BYTES))
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        return


def _session_members(session: int) -> list[int]:
    """Processes still in the CLI's session (Linux /proc; none found elsewhere).

    A CLI may start its shell commands in process groups of their own (codex does), out of
    reach of the group's signal; they stay in the CLI's session unless they leave it.
    """
    members = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return members
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] != b"Z":  # the session id; zombies are done
            members.append(int(entry))
    return members


def _signal_group(process: Process, signum: int) -> None:
    """Signal the CLI's process group, and with SIGKILL whatever else is left in its session."""
    try:
        os.killpg(process.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
    if signum == signal.SIGKILL:
        for pid in _session_members(process.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


async def stop_group(process: Process) -> None:
    """SIGTERM to the group, a grace, then SIGKILL; returns once the CLI is reaped."""
    with anyio.CancelScope(shield=True):
        if process.returncode is None:
            _signal_group(process, signal.SIGTERM)
            with anyio.move_on_after(KILL_GRACE_SECONDS):
                await process.wait()
        _signal_group(process, signal.SIGKILL)
        await process.wait()


async def run_in_group(
    argv: Sequence[str],
    *,
    input: bytes,
    cwd: Path,
    env: Mapping[str, str],
    read_line: LineReader | None = None,
) -> Exited:
    """Run `argv` to its end with `input` on standard input; cancelling stops its group.

    `read_line` is given each line of standard output as it comes, for CLIs that report
    as they go (a session id first, usage last).
    """
    # Shielded: cancelled mid-spawn, the event loop would kill the new process alone (not its
    # group) and lose it, leaving whatever it had started already running.
    with anyio.CancelScope(shield=True):
        process = await anyio.open_process(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )
    stdout, stderr = _Tail(OUTPUT_TAIL_BYTES, read_line), _Tail(OUTPUT_TAIL_BYTES)
    try:
        async with anyio.create_task_group() as pipes:
            pipes.start_soon(_feed, process.stdin, input)
            pipes.start_soon(_drain, process.stdout, stdout)
            pipes.start_soon(_drain, process.stderr, stderr)
            await process.wait()
            _signal_group(process, signal.SIGKILL)
            pipes.cancel_scope.deadline = anyio.current_time() + DRAIN_GRACE_SECONDS
    finally:
        await stop_group(process)
        with anyio.CancelScope(shield=True):
            await process.aclose()
    stdout.finish()
    return Exited(process.returncode if process.returncode is not None else -1, stdout.text(), stderr.text())
