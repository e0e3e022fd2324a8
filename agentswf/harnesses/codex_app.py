"""codex's app-server (`codex app-server`): the one way codex forks a thread or compacts one.

It speaks JSON-RPC over its standard streams, one JSON object a line, without the `jsonrpc`
member: `jsonrpc.Rpc(marked=False)`, driven by a `jsonrpc.Peer` over a `Channel`
(`process.open_in_group`), as ACP's is. `AppServer` keeps what is codex's own: the requests
of the server's, all refused (a fork or a compaction runs no tool and needs no approval), and
the notifications read on the way. What the server writes is read as hostile input: a line
that isn't a well-formed message is skipped.

Checked against codex 0.171.0 offline: `thread/fork` copies a thread with no model call;
`thread/compact/start` answers at once and runs the compaction as a turn of its own, ending
with `turn/completed`. The summary is never in the protocol: it is read from the thread's
rollout (the file its `path` names), its last `compacted` record, where codex can be read.
"""

from __future__ import annotations

import os
import stat
from typing import Any

import msgspec

from ..errors import HarnessError
from ..wire.nesting import too_deep
from .base import is_session_id
from .jsonrpc import CLIENT_INFO, Answer, Notice, Peer, Request, Rpc, Unanswered
from .process import Channel, ChannelClosed
from .usage import Usage

STDERR_LINES = 20  # of the server's standard error, in the reason it failed
ROLLOUT_TAIL_BYTES = 16 * 1024 * 1024  # of a rollout's end, read for its last compaction's summary
SUMMARY_AFTER = "use the information in this summary to assist with your own analysis:\n"  # codex's preamble ends so
MAX_NOTICES_WAITED = 10_000  # notifications read while waiting for one: a server that floods is given up on


class AppServerError(HarnessError):
    """The app-server answered a request with an error, or ended before answering it."""


def thread_of(notice: Notice) -> str | None:
    """The thread a notification is about, where it names one by an id of a thread's shape."""
    thread = notice.params.get("threadId")
    return thread if is_session_id(thread) else None  # a thread's id, short: notices of others are kept by it


def usage_of(notice: Notice) -> Usage | None:
    """A `thread/tokenUsage/updated`'s running totals for its thread."""
    usage = notice.params.get("tokenUsage")
    total = usage.get("total") if isinstance(usage, dict) else None
    if not isinstance(total, dict):
        return None

    def count(name: str) -> int | None:
        value = total.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    return Usage(
        input_tokens=count("inputTokens"),
        output_tokens=count("outputTokens"),
        cache_read_tokens=count("cachedInputTokens"),
        cache_write_tokens=count("cacheWriteInputTokens"),
    )


class AppServer:
    """A session with one app-server: requests answered in turn; of the notifications read on the way,
    each thread's last running totals and whether a compaction of it completed are kept."""

    def __init__(self, channel: Channel) -> None:
        self.rpc = Rpc(marked=False)
        self.peer = Peer(channel, self.rpc, self._serve)
        self.totals: dict[str, Usage] = {}
        self.compacted: set[str] = set()

    async def start(self) -> None:
        await self.call("initialize", {"clientInfo": CLIENT_INFO})
        await self.peer.notify("initialized")

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request and read until its answer; AppServerError if it fails."""
        try:
            answered = await self.peer.call(method, params, most=MAX_NOTICES_WAITED)
        except ChannelClosed:
            raise await self._ended(f"its answer to {method}") from None
        except Unanswered as flooded:
            raise AppServerError(f"codex app-server {flooded}") from None
        if not isinstance(answered, Answer):
            raise AppServerError(f"codex app-server refused {method}: {answered.message}")
        if not isinstance(answered.result, dict):
            raise AppServerError(f"codex app-server answered {method} with no object")
        return answered.result

    async def wait_for(self, method: str, thread: str) -> Notice:
        """Read until the notification `method` about `thread`."""
        for _ in range(MAX_NOTICES_WAITED):
            try:
                message = await self.peer.next()
            except ChannelClosed:
                raise await self._ended(method) from None
            if isinstance(message, Notice) and message.method == method and thread_of(message) == thread:
                return message
        raise AppServerError(f"codex app-server wrote {MAX_NOTICES_WAITED} lines without {method}")

    def _serve(self, message: Notice | Request) -> bytes | None:
        """A notification kept; a request of the server's refused."""
        if isinstance(message, Request):
            return self.rpc.refuse(message)
        self._note(message)
        return None

    async def _ended(self, awaited: str) -> AppServerError:
        """The server closed its end (it exited) before `awaited`: said with its last error lines."""
        tail = await self.peer.channel.stderr_lines(STDERR_LINES)
        return AppServerError(f"codex app-server ended before {awaited}{': ' + tail if tail else ''}")

    def _note(self, notice: Notice) -> None:
        thread = thread_of(notice)
        if thread is None:
            return
        if notice.method == "thread/tokenUsage/updated":
            usage = usage_of(notice)
            if usage is not None:
                self.totals[thread] = usage
        elif notice.method == "item/completed":
            item = notice.params.get("item")
            if isinstance(item, dict) and item.get("type") == "contextCompaction":
                self.compacted.add(thread)


def summary_in(rollout_tail: bytes) -> str | None:
    """The summary of the last compaction recorded in the end of a rollout (without codex's preamble), if any."""
    for line in reversed(rollout_tail.split(b"\n")):
        if b'"compacted"' not in line or too_deep(line):
            continue
        try:
            record = msgspec.json.decode(line)
        except msgspec.DecodeError:
            continue  # the first line of the tail, cut, or not a record
        payload = record.get("payload") if isinstance(record, dict) and record.get("type") == "compacted" else None
        message = payload.get("message") if isinstance(payload, dict) else None
        if isinstance(message, str):
            return message.split(SUMMARY_AFTER, 1)[-1].strip()
    return None


def read_tail(path: str) -> bytes:
    """The last `ROLLOUT_TAIL_BYTES` of the regular file at `path`; b"" for anything else (a FIFO never blocks)."""
    if not os.path.isabs(path) or not path.endswith(".jsonl"):
        return b""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return b""
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            return b""
        os.lseek(descriptor, max(0, info.st_size - ROLLOUT_TAIL_BYTES), os.SEEK_SET)
        chunks, left = [], ROLLOUT_TAIL_BYTES
        while left > 0 and (chunk := os.read(descriptor, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return b""
    finally:
        os.close(descriptor)
