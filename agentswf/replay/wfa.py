"""`wfa` spoken in the event loop, as an agent's CLI would speak it: what a scripted agent's
script and a played agent of a replay or a fork answer through.

Every request goes through the `wfa` client's own wire code (its encoder and decoder, the same
bytes both ways), over the agent's real socket, to the real AgentActor, in the event loop and not
in a thread: no number of such agents can starve the engine of worker threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import anyio
import msgspec
from anyio.abc import SocketAttribute

from ..errors import TestScriptError
from ..harnesses.base import Attempt
from ..launcher import client
from ..launcher.place import SOCKET_NAME
from ..wire import MAX_RESPONSE_BYTES, REQUEST_LINE_TIMEOUT_SECONDS, TOOL_FAILURES, WIRE_VERSION, Response

_RECEIVE_BYTES = 262144  # as the client reads


class ToolResult(msgspec.Struct, frozen=True, kw_only=True):
    """The handler returned; `output` is its result as the agent reads it (JSON values)."""

    kind: Literal["result"] = "result"
    output: Any = None


class ToolFailed(msgspec.Struct, frozen=True, kw_only=True):
    """The handler raised (`failed`) or ran out of time (`timed-out`); `error` is the message."""

    kind: Literal["failed"] = "failed"
    outcome: Literal["failed", "timed-out"]
    error: str


class ToolRefused(msgspec.Struct, frozen=True, kw_only=True):
    """The call was refused before the handler ran, with `code`."""

    kind: Literal["refused"] = "refused"
    code: str
    error: str


ToolAnswer = ToolResult | ToolFailed | ToolRefused


async def exchange(socket_path: str, request: bytes) -> dict[str, Any]:
    """One `wfa` round trip in the event loop, as `client.call` makes it in a process.

    The same bytes both ways (the client's own `encode_request` and `decode_response`),
    connect, send, half-close, read one line; but no thread: scripted agents must never
    wait on a pool the engine (or anything else in the process) also waits on.
    Raises `client.Unreached` or `client.Lost` as `client.call` does.
    """
    try:
        stream = await anyio.connect_unix(socket_path)
    except OSError as error:
        raise client.Unreached(f"could not connect: {error.strerror or error}") from None
    async with stream:
        with anyio.move_on_after(REQUEST_LINE_TIMEOUT_SECONDS) as sending:
            try:
                await stream.send(request)
                await stream.send_eof()
            except (OSError, anyio.BrokenResourceError) as error:
                raise client.Unreached(f"the request did not get through: {error}") from None
        if sending.cancelled_caught:
            raise client.Unreached("the run did not take the request within REQUEST_LINE_TIMEOUT_SECONDS")
        buffer = b""
        raw = stream.extra(SocketAttribute.raw_socket)
        while b"\n" not in buffer:
            try:  # read on the raw socket: anyio's stream on asyncio sets a cancelled read's future
                chunk = raw.recv(_RECEIVE_BYTES)  # when the answer comes as the turn ends (InvalidStateError)
            except BlockingIOError:
                await anyio.wait_readable(raw)
                continue
            except OSError as error:
                raise client.Lost(f"the connection failed: {error}") from None
            if not chunk:
                raise client.Lost("the connection closed before the answer came")
            buffer += chunk
            if len(buffer) > MAX_RESPONSE_BYTES:
                raise client.Lost(f"the answer is over {MAX_RESPONSE_BYTES} bytes")
    try:
        return client.decode_response(buffer)
    except ValueError as error:
        raise client.Lost(str(error)) from None


class ScriptedTurn:
    """What a script function is given: the attempt's prompt, and `wfa` as calls."""

    def __init__(self, attempt: Attempt) -> None:
        self.agent = attempt.agent
        self.prompt = attempt.prompt
        self.call_id = attempt.call_id
        self.n = attempt.turn
        self.nudge = attempt.nudge
        self.launcher = attempt.launcher
        self.started_by = attempt.started_by
        self._socket = str(attempt.launcher.with_name(SOCKET_NAME))
        self.answered = False

    async def request(self, command: str, **fields: Any) -> Response:
        """Send one `wfa` request, as the client would, and return the run's response."""
        line = {"command": command, "version": WIRE_VERSION, **fields}
        try:
            answer = await exchange(self._socket, client.encode_request(line))
        except (client.Unreached, client.Lost) as error:
            raise TestScriptError(f"agent {self.agent} turn {self.n}: wfa {command} got no answer: {error}") from None
        return msgspec.convert(answer, Response)

    async def result(self, value: Any = None, *, args: Sequence[str] | None = None) -> Response:
        """`wfa result` with `value` as JSON on standard input, or with `args` as flags."""
        if args is not None:
            response = await self.request("result", call_id=self.call_id, args=list(args), input=None)
        else:
            text = "" if value is None else msgspec.json.encode(value).decode()
            response = await self.request("result", call_id=self.call_id, args=[], input=text)
        self.answered = self.answered or response.ok
        return response

    async def tool(self, name: str, input: Any = None, *, args: Sequence[str] | None = None) -> ToolAnswer:
        """`wfa tool name` with `input` as JSON (or `args` as flags), through the same checks a real call meets."""
        if args is not None:
            response = await self.request("tool", name=name, args=list(args), input=None)
        else:
            text = "" if input is None else msgspec.json.encode(input).decode()
            response = await self.request("tool", name=name, args=[], input=text)
        if response.ok:
            return ToolResult(output=response.value)
        if response.code in TOOL_FAILURES:
            return ToolFailed(outcome=response.code, error=response.error)  # type: ignore[arg-type]
        return ToolRefused(code=response.code or "", error=response.error)

    async def peers(self) -> dict[str, Any]:
        """`wfa peers --json`: the routes, the peers' states, and what this agent owes."""
        return (await self.request("peers", json=True)).value

    async def send(
        self, peer: str, text: str, *, await_reply: bool = False, timeout_seconds: float | None = None
    ) -> Response:
        """`wfa send [--await-reply [--timeout …]] peer`; the response carries the refusal code if refused."""
        return await self._message("send", peer, text, await_reply, timeout_seconds)

    async def reply(
        self, peer: str, text: str, *, await_reply: bool = False, timeout_seconds: float | None = None
    ) -> Response:
        """`wfa reply peer`: answer the question `peer` asked."""
        return await self._message("reply", peer, text, await_reply, timeout_seconds)

    async def _message(
        self, command: str, peer: str, text: str, await_reply: bool, timeout_seconds: float | None
    ) -> Response:
        timeout_ms = None if timeout_seconds is None else max(1, int(timeout_seconds * 1000))
        return await self.request(command, peer=peer, message=text, await_reply=await_reply, timeout_ms=timeout_ms)

    async def waiting(self, reason: str, *, timeout_seconds: float | None = None) -> Response:
        """`wfa waiting` for this turn."""
        timeout_ms = None if timeout_seconds is None else int(timeout_seconds * 1000)
        return await self.request("waiting", call_id=self.call_id, reason=reason, timeout_ms=timeout_ms)
