"""codex's app-server (`codex app-server`): the one way codex forks a thread or compacts one.

It speaks JSON-RPC over its standard streams, one JSON object a line, without the `jsonrpc`
member. `Rpc` is that protocol without I/O: it numbers requests, encodes them, and reads
what the server writes (answers, notifications, and requests of its own, which agentswf
refuses: a fork or a compaction runs no tool and needs no approval). `AppServer` is the
thin shell driving it over a `Channel` (`process.open_in_group`). What the server writes is
read as hostile input: a line that isn't a JSON object of a known shape is skipped.

Checked against codex 0.171.0 offline: `thread/fork` copies a thread with no model call;
`thread/compact/start` answers at once and runs the compaction as a turn of its own, ending
with `turn/completed`. The summary is never in the protocol: it is read from the thread's
rollout (the file its `path` names), its last `compacted` record, where codex can be read.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from typing import Any

import msgspec

from ..errors import HarnessError
from ..wire.nesting import too_deep
from .base import is_session_id
from .process import Channel
from .usage import Usage

CLIENT_INFO = {"name": "agentswf", "title": "agentswf", "version": "1"}
REFUSED_CODE = -32601  # JSON-RPC "method not found": what a request from the server is answered
STDERR_LINES = 20  # of the server's standard error, in the reason it failed
ROLLOUT_TAIL_BYTES = 16 * 1024 * 1024  # of a rollout's end, read for its last compaction's summary
SUMMARY_AFTER = "use the information in this summary to assist with your own analysis:\n"  # codex's preamble ends so
MAX_NOTICES_WAITED = 10_000  # notifications read while waiting for one: a server that floods is given up on


class AppServerError(HarnessError):
    """The app-server answered a request with an error, or ended before answering it."""


@dataclass(frozen=True, slots=True)
class Answer:
    id: int
    result: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Failure:
    id: int
    message: str


@dataclass(frozen=True, slots=True)
class Notice:
    method: str
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ServerRequest:
    id: int | str
    method: str


Message = Answer | Failure | Notice | ServerRequest


class Rpc:
    """The client side of the protocol, without I/O: lines to send, messages read from lines."""

    def __init__(self) -> None:
        self._last_id = 0

    def request(self, method: str, params: dict[str, Any]) -> tuple[int, bytes]:
        """A new request's id and its line."""
        self._last_id += 1
        return self._last_id, _line({"id": self._last_id, "method": method, "params": params})

    @staticmethod
    def notify(method: str) -> bytes:
        return _line({"method": method})

    @staticmethod
    def refuse(request: ServerRequest) -> bytes:
        message = f"agentswf answers no {request.method} here"
        return _line({"id": request.id, "error": {"code": REFUSED_CODE, "message": message}})

    @staticmethod
    def read(line: bytes) -> Message | None:
        """What `line` says, or None if it is no message of the protocol."""
        if too_deep(line):
            return None
        try:
            message = msgspec.json.decode(line)
        except msgspec.DecodeError:
            return None
        if not isinstance(message, dict):
            return None
        key, method = message.get("id"), message.get("method")
        if isinstance(method, str):
            if isinstance(key, int | str) and not isinstance(key, bool):
                return ServerRequest(key, method)
            params = message.get("params")
            return Notice(method, params if isinstance(params, dict) else {})
        if not isinstance(key, int) or isinstance(key, bool):
            return None
        if "error" in message:
            error = message["error"]
            text = error.get("message") if isinstance(error, dict) else None
            return Failure(key, text if isinstance(text, str) else "an error with no message")
        result = message.get("result")
        return Answer(key, result) if isinstance(result, dict) else None


def _line(message: dict[str, Any]) -> bytes:
    return msgspec.json.encode(message) + b"\n"


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
        self.channel = channel
        self.rpc = Rpc()
        self.totals: dict[str, Usage] = {}
        self.compacted: set[str] = set()

    async def start(self) -> None:
        await self.call("initialize", {"clientInfo": CLIENT_INFO})
        await self.channel.send(self.rpc.notify("initialized"))

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Send a request and read until its answer; AppServerError if it fails."""
        key, line = self.rpc.request(method, params)
        try:
            await self.channel.send(line)
        except HarnessError as closed:
            raise await self._ended(f"its answer to {method}") from closed
        for _ in range(MAX_NOTICES_WAITED):
            message = await self._next(f"its answer to {method}")
            if isinstance(message, Answer) and message.id == key:
                return message.result
            if isinstance(message, Failure) and message.id == key:
                raise AppServerError(f"codex app-server refused {method}: {message.message}")
        raise AppServerError(f"codex app-server wrote {MAX_NOTICES_WAITED} lines without answering {method}")

    async def wait_for(self, method: str, thread: str) -> Notice:
        """Read until the notification `method` about `thread`."""
        for _ in range(MAX_NOTICES_WAITED):
            message = await self._next(method)
            if isinstance(message, Notice) and message.method == method and thread_of(message) == thread:
                return message
        raise AppServerError(f"codex app-server wrote {MAX_NOTICES_WAITED} lines without {method}")

    async def _next(self, awaited: str) -> Message | None:
        """The next message (notifications kept, the server's requests refused); None for a line that is none."""
        try:
            message = Rpc.read(await self.channel.receive())
        except HarnessError as closed:
            raise await self._ended(awaited) from closed
        if isinstance(message, Notice):
            self._note(message)
        elif isinstance(message, ServerRequest):
            with contextlib.suppress(HarnessError):  # it exited: the next read says so
                await self.channel.send(Rpc.refuse(message))
        return message

    async def _ended(self, awaited: str) -> AppServerError:
        """The server closed its end (it exited) before `awaited`: said with its last error lines."""
        tail = await self.channel.stderr_lines(STDERR_LINES)
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
