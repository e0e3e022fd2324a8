"""JSON-RPC 2.0, a message a line, with a CLI on its standard streams: the client's side that ACP
(`acp.py`) and codex's app-server (`codex_app.py`) share, each keeping only its protocol's own.

`Rpc` is the protocol without I/O: it numbers our requests and encodes our lines, and `read`s
what the CLI writes into a `Request`, `Notice`, `Answer` or `Failure` (msgspec Structs). The
CLI's side is hostile: a line that is not a well-formed message (too deep, not JSON, the wrong
shapes) is no message, and skipped. `Peer` is the thin shell over a `Channel`
(`process.open_in_group`): a request sent and read until its answer, what the CLI sends
meanwhile handed to the protocol's `serve`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Literal

import msgspec

from ..errors import HarnessError
from ..wire.nesting import too_deep
from .process import Channel

CLIENT_INFO = {"name": "agentswf", "title": "agentswf", "version": "1"}  # who we are, to `initialize`
METHOD_NOT_FOUND = -32601  # JSON-RPC: what every request of the CLI's that we don't serve is answered
MAX_METHOD_CHARS = 80  # of a refused request's method, said back in the refusal


class Request(msgspec.Struct, frozen=True):
    """A request the CLI sent us (an ACP agent's permission, a codex approval): answered or refused."""

    id: int | str
    method: str
    params: dict[str, Any]


class Notice(msgspec.Struct, frozen=True):
    """A notification the CLI sent."""

    method: str
    params: dict[str, Any]


class Answer(msgspec.Struct, frozen=True):
    """The result of one of our requests."""

    id: int
    result: Any


class Failure(msgspec.Struct, frozen=True):
    """The error one of our requests was answered with."""

    id: int
    code: int | None  # None: the error gave none
    message: str


Message = Request | Notice | Answer | Failure


class _Wire(msgspec.Struct, frozen=True):
    """Any message as it is on the line; which one it is follows from its members. An error of another
    shape than JSON-RPC's {code, message} is still the request's failure: its caller isn't left waiting."""

    jsonrpc: Literal["2.0"] | msgspec.UnsetType = msgspec.UNSET  # codex's app-server writes none
    id: int | str | None = None
    method: str | None = None
    params: dict[str, Any] | None = None
    result: Any = msgspec.UNSET
    error: Any = None


_decoder = msgspec.json.Decoder(_Wire)


class Rpc:
    """Our side's lines (requests numbered from 1, notifications, answers, refusals), and the CLI's read.

    `marked`: each line carries `"jsonrpc": "2.0"`, ours and the CLI's (ACP); codex's app-server's carry none."""

    def __init__(self, *, marked: bool = True) -> None:
        self._last_id = 0
        self._marked = marked
        self._mark: dict[str, Any] = {"jsonrpc": "2.0"} if marked else {}

    def read(self, line: bytes) -> Message | None:
        """What `line` says, or None if it is no well-formed message."""
        if too_deep(line):
            return None
        try:
            wire = _decoder.decode(line)
        except msgspec.DecodeError:
            return None
        if self._marked and wire.jsonrpc is msgspec.UNSET:
            return None
        if wire.method is not None:
            if wire.result is not msgspec.UNSET or wire.error is not None:
                return None
            if wire.id is None:
                return Notice(wire.method, wire.params or {})
            return Request(wire.id, wire.method, wire.params or {})
        if not isinstance(wire.id, int) or (wire.result is msgspec.UNSET) == (wire.error is None):
            return None  # a response to none of ours, or one with both or neither of result and error
        if wire.error is not None:
            return _failure(wire.id, wire.error)
        return Answer(wire.id, wire.result)

    def request(self, method: str, params: dict[str, Any]) -> tuple[int, bytes]:
        """A new request's id and its line."""
        self._last_id += 1
        return self._last_id, self._line({"id": self._last_id, "method": method, "params": params})

    def notify(self, method: str, params: dict[str, Any] | None = None) -> bytes:
        return self._line({"method": method} if params is None else {"method": method, "params": params})

    def answer(self, request: Request, result: dict[str, Any]) -> bytes:
        return self._line({"id": request.id, "result": result})

    def refuse(self, request: Request) -> bytes:
        message = f"agentswf serves no {request.method[:MAX_METHOD_CHARS]}"
        return self._line({"id": request.id, "error": {"code": METHOD_NOT_FOUND, "message": message}})

    def _line(self, message: dict[str, Any]) -> bytes:
        return msgspec.json.encode({**self._mark, **message}) + b"\n"


def _failure(key: int, error: Any) -> Failure:
    code = error.get("code") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return Failure(
        key,
        code if isinstance(code, int) and not isinstance(code, bool) else None,
        message if isinstance(message, str) else "an error with no message",
    )


class Unanswered(HarnessError):
    """The CLI wrote as many lines as a call allows without answering it."""


class Peer:
    """The CLI at the other end of a `Channel`: our requests, each read until its answer; its notifications
    and requests, as they come, to `serve` (which answers a request with a line, or None to leave it).
    `ChannelClosed` (a HarnessError) when the CLI ends first: the protocol says why, with its stderr."""

    def __init__(self, channel: Channel, rpc: Rpc, serve: Callable[[Notice | Request], bytes | None]) -> None:
        self.channel = channel
        self.rpc = rpc
        self._serve = serve

    async def call(self, method: str, params: dict[str, Any], *, most: int | None = None) -> Answer | Failure:
        """Send a request and read, serving the CLI, until its answer or its failure; `Unanswered` after
        `most` lines without it (None: no bound; the attempt's deadline is)."""
        key, line = self.rpc.request(method, params)
        await self.channel.send(line)
        read = 0
        while most is None or read < most:
            message = await self.next()
            read += 1
            if isinstance(message, Answer | Failure) and message.id == key:
                return message
        raise Unanswered(f"wrote {most} lines without answering {method}")

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification; nothing if the CLI has exited (nothing to tell)."""
        with contextlib.suppress(HarnessError):
            await self.channel.send(self.rpc.notify(method, params))

    async def next(self) -> Message | None:
        """The CLI's next message, served; None for a line that is none."""
        message = await self.receive()
        await self.serve(message)
        return message

    async def receive(self) -> Message | None:
        """The CLI's next message, not yet served (cancelled while waiting, nothing is lost)."""
        return self.rpc.read(await self.channel.receive())

    async def serve(self, message: Message | None) -> None:
        """A notification or a request of the CLI's to `serve`; its answer sent, unless the CLI has exited."""
        if isinstance(message, Notice | Request):
            reply = self._serve(message)
            if reply is not None:
                with contextlib.suppress(HarnessError):  # it exited: the next read says so
                    await self.channel.send(reply)
