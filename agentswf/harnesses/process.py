"""Run an agent's CLI under a keeper of its own, and leave nothing of it behind.

An agent's shell starts children (builds, servers, `sleep &`, `setsid` daemons, double
forks) that outlive the CLI unless something outlives them. So the run starts a keeper
(`keeper.py`, a child subreaper in a session of its own) that starts the CLI and, when the
CLI ends, kills every process left under it. On cancellation the keeper gets SIGTERM and
passes it on: a grace for the CLI, then SIGKILL to all. If the run dies, its end of the
lifeline pipe every keeper holds closes, and each keeper kills its tree. Every agent
process carries `MARK_VARIABLE` (the run's mark and the attempt's), and at the attempt's
end whatever still carries it is killed too: a second net, for what escaped a keeper.

`run_in_group` runs a CLI to its end with its input given at once; `open_in_group` keeps its
input open for a session of lines (codex's app-server, pi's rpc mode), with the same keeper.

An attempt outside a sandbox gets a TMPDIR of its own (`SCRATCH_PREFIX`), removed at its end by
its keeper (a dead run's too) and by the run: the CLIs leave files there (claude its
`claude-<uid>` directory and `cc-socks/<pid>.sock`, opencode `opencode/`), and /tmp is everyone's.
A sandboxed attempt has the sandbox's own /tmp.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..errors import HarnessError
from .base import Confine
from .keeper import MARK_VARIABLE, SCRATCH_PREFIX, keep_command, kill_marked, remove_tree
from .said import Said

KILL_GRACE_SECONDS = 2.0  # between SIGTERM and SIGKILL
KEEPER_GRACE_SECONDS = 1.0  # past KILL_GRACE_SECONDS, for a keeper to kill and reap its tree
DRAIN_GRACE_SECONDS = 1.0  # for output pipes held open by an escaped grandchild
OUTPUT_TAIL_BYTES = 64 * 1024  # of standard output and of standard error, each
SESSION_EXIT_SECONDS = 2.0  # for a session CLI to end once its standard input is closed
LINES_WAITING = 64  # lines of a session CLI's output read ahead of its client
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


class ChannelClosed(HarnessError):
    """A session CLI closed its end: its input, or its output (it exited)."""


class _Tail:
    """The last bytes of an output, and, for a reader, each whole line as it comes."""

    def __init__(self, limit: int, reader: LineReader | None = None, heard: Callable[[bytes], None] | None = None) -> None:
        self.limit = limit
        self.data = bytearray()
        self.reader = reader
        self.heard = heard  # told each chunk as it comes: the attempt's `Said`
        self.partial = bytearray()
        self.ended = anyio.Event()  # set by the reader that drains it, at the output's end

    def add(self, chunk: bytes) -> None:
        if self.heard is not None:
            self.heard(chunk)
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
    try:
        while stream is not None:
            tail.add(await stream.receive(_READ_BYTES))
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        return
    finally:
        tail.ended.set()


_lifeline: list[int] = []


def lifeline() -> int:
    """The read end of this process's lifeline, which every keeper holds: it reads end-of-file
    only once this process is gone, since the write end (not inherited) is never closed."""
    if not _lifeline:
        read, _write = os.pipe()
        _lifeline.append(read)
    return _lifeline[0]


def attempt_mark(env: Mapping[str, str]) -> str:
    """The attempt's mark: the run's (when the run set one) and a new suffix of its own."""
    return f"{env.get(MARK_VARIABLE) or 'awf'}/{secrets.token_hex(6)}"


def _session_members(session: int) -> list[int]:
    """Processes still in the CLI's session (Linux /proc; none found elsewhere).

    A CLI may start its shell commands in process groups of their own (codex does), out of
    reach of the group's signal; they stay in the CLI's session unless they leave it.
    """
    members: list[int] = []
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
    """SIGTERM to the keeper, which stops its tree within its grace; SIGKILL to its group and
    session past that. Returns once the keeper is reaped."""
    with anyio.CancelScope(shield=True):
        if process.returncode is None:
            try:
                process.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            with anyio.move_on_after(KILL_GRACE_SECONDS + KEEPER_GRACE_SECONDS):
                await process.wait()
        _signal_group(process, signal.SIGKILL)  # a keeper past its grace, or killed: its session
        await process.wait()


def _confined(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], confine: Confine | None
) -> tuple[Sequence[str], Mapping[str, str], str | None]:
    """The command and environment an attempt runs with: in its sandbox, or with a TMPDIR of its own (made here)."""
    if confine is not None:
        return (*confine(argv, cwd, env), None)
    scratch = scratch_directory(env)
    return argv, {**env, "TMPDIR": scratch}, scratch


def scratch_directory(env: Mapping[str, str]) -> str:
    """A new TMPDIR for an attempt whose environment is `env`, named with its run's mark, so that
    the run's watchdog removes it too should the run die (`kill -9`) with its keeper."""
    run = env.get(MARK_VARIABLE, "").split("/")[0]
    named = run if run and all(char.isalnum() or char in "-_" for char in run) else ""
    return tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{named}-" if named else SCRATCH_PREFIX)


async def _spawn(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], mark: str, started: Callable[[int], None] | None,
    scratch: str | None,
) -> Process:
    """The keeper of `argv`, in a session of its own, holding the lifeline."""
    # Shielded: cancelled mid-spawn, the event loop would kill the new process alone (not its
    # group) and lose it, leaving whatever it had started already running.
    with anyio.CancelScope(shield=True):
        process = await anyio.open_process(
            keep_command(sys.executable, lifeline(), KILL_GRACE_SECONDS, scratch, list(argv)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env={**env, MARK_VARIABLE: mark},
            start_new_session=True,
            pass_fds=(lifeline(),),
        )
        if started is not None:
            started(process.pid)
    return process


async def _gone(process: Process | None, mark: str, scratch: str | None) -> None:
    """Stop the keeper and its tree, then whatever still carries the attempt's mark; remove its
    scratch directory (its keeper has, unless it was killed first)."""
    if process is not None:
        await stop_group(process)
    with anyio.CancelScope(shield=True):
        if process is not None:
            await process.aclose()
            await anyio.to_thread.run_sync(kill_marked, mark)
        if scratch is not None:
            await anyio.to_thread.run_sync(remove_tree, scratch)


async def run_in_group(
    argv: Sequence[str],
    *,
    input: bytes,
    cwd: Path,
    env: Mapping[str, str],
    read_line: LineReader | None = None,
    started: Callable[[int], None] | None = None,
    confine: Confine | None = None,
    said: Said | None = None,
    stdout_said: bool = False,
) -> Exited:
    """Run `argv` to its end with `input` on standard input; cancelling stops it and all it started.

    `read_line` is given each line of standard output as it comes, for CLIs that report
    as they go (a session id first, usage last). `started` is told the keeper's pid as soon
    as it runs: every process of the attempt descends from it. `confine` wraps the command
    the keeper runs (a sandbox's: the keeper stays outside, the sandbox is its child).
    `said` is given standard error as it comes, and standard output too where `stdout_said`
    (a shell agent's, which is text for a person; an agent CLI's is its JSON events).
    """
    argv, env, scratch = _confined(argv, cwd, env, confine)
    mark = attempt_mark(env)
    process = None
    stdout = _Tail(OUTPUT_TAIL_BYTES, read_line, said.heard_stdout if said is not None and stdout_said else None)
    stderr = _Tail(OUTPUT_TAIL_BYTES, heard=said.heard_stderr if said is not None else None)
    try:
        process = await _spawn(argv, cwd, env, mark, started, scratch)
        async with anyio.create_task_group() as pipes:
            pipes.start_soon(_feed, process.stdin, input)
            pipes.start_soon(_drain, process.stdout, stdout)
            pipes.start_soon(_drain, process.stderr, stderr)
            await process.wait()  # the keeper has killed what the CLI left
            pipes.cancel_scope.deadline = anyio.current_time() + DRAIN_GRACE_SECONDS
    finally:
        await _gone(process, mark, scratch)
    stdout.finish()
    return Exited(process.returncode if process.returncode is not None else -1, stdout.text(), stderr.text())


class Channel:
    """A CLI whose standard input stays open (a JSON-RPC or rpc-mode session): lines to it, lines from it."""

    def __init__(self, process: Process, lines: MemoryObjectReceiveStream[bytes], stderr: _Tail, env: Mapping[str, str]) -> None:
        self.env = env  # what the CLI runs with: its sandbox's, or with its own TMPDIR
        self._process = process
        self._lines = lines
        self._stderr = stderr

    async def send(self, data: bytes) -> None:
        """Write `data` to the CLI's standard input; ChannelClosed if it closed it (or exited)."""
        if self._process.stdin is None:
            raise ChannelClosed("the CLI's standard input is closed")
        try:
            await self._process.stdin.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise ChannelClosed("the CLI closed its standard input") from None

    async def receive(self) -> bytes:
        """The CLI's next line of standard output; ChannelClosed once its output has ended."""
        try:
            return await self._lines.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise ChannelClosed("the CLI's output ended") from None

    async def close_input(self) -> None:
        """End the CLI's standard input: a session CLI takes that as the end of the session."""
        if self._process.stdin is not None:
            with anyio.CancelScope(shield=True):
                try:
                    await self._process.stdin.aclose()
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass

    async def stderr_lines(self, count: int) -> str:
        """The last `count` lines of the CLI's standard error, once it has ended (waiting at most
        DRAIN_GRACE_SECONDS): a CLI that exits at once is seen closed before its error is read."""
        with anyio.move_on_after(DRAIN_GRACE_SECONDS):
            await self._stderr.ended.wait()
        return "\n".join(self._stderr.text().strip().splitlines()[-count:])


async def _pump(stream: ByteReceiveStream | None, lines: MemoryObjectSendStream[bytes]) -> None:
    """Each whole line of `stream` to `lines`, waiting for room (the CLI waits with it); `lines` closed at its end.

    Lines nobody reads any more (the client is done) are dropped; the stream is still drained."""
    ready: list[bytes] = []
    tail = _Tail(OUTPUT_TAIL_BYTES, ready.append)
    async with lines:
        while stream is not None:
            try:
                tail.add(await stream.receive(_READ_BYTES))
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                tail.finish()
                stream = None
            for line in ready:
                try:
                    await lines.send(line)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass
            ready.clear()


@asynccontextmanager
async def open_in_group(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    started: Callable[[int], None] | None = None,
    confine: Confine | None = None,
    said: Said | None = None,
) -> AsyncIterator[Channel]:
    """Run `argv` under a keeper as `run_in_group` does, with its standard input held open for the block.

    When the block ends, the CLI's input is closed and it gets `SESSION_EXIT_SECONDS` to end
    on its own; then it and everything it started are stopped, as a cancelled attempt is.
    Cancelling the block stops them at once. `started`, `confine` and `said` (given standard
    error as it comes) are as `run_in_group`'s.
    """
    argv, env, scratch = _confined(argv, cwd, env, confine)
    mark = attempt_mark(env)
    try:
        process = await _spawn(argv, cwd, env, mark, started, scratch)
    except BaseException:
        await _gone(None, mark, scratch)
        raise
    stderr = _Tail(OUTPUT_TAIL_BYTES, heard=said.heard_stderr if said is not None else None)
    send_lines, receive_lines = anyio.create_memory_object_stream[bytes](LINES_WAITING)
    channel = Channel(process, receive_lines, stderr, env)
    failure: Exception | None = None
    try:
        async with anyio.create_task_group() as pipes:
            pipes.start_soon(_pump, process.stdout, send_lines)
            pipes.start_soon(_drain, process.stderr, stderr)
            try:
                yield channel
                await channel.close_input()
                with anyio.move_on_after(SESSION_EXIT_SECONDS):
                    await process.wait()
            except Exception as error:  # the block's own: raised as it is, not in the pipes' exception group
                failure = error
            finally:
                receive_lines.close()
                pipes.cancel_scope.cancel()
    finally:
        await _gone(process, mark, scratch)
    if failure is not None:
        raise failure


