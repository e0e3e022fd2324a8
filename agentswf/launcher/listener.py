"""The per-agent listener: one connection, one request line, one response line.

The socket a connection arrives on says which agent is calling; the request only says
what it asks. Every connection is answered, even one over the run's connection budget
(a silent close would look like a crashed run), except one that dawdles past its
lifetime, which is closed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import structlog
from anyio.abc import SocketListener, SocketStream

from .peer import peer_pid
from ..wire import (
    CONNECTION_LIFETIME_SECONDS,
    MAX_OPEN_CONNECTIONS,
    MAX_REQUEST_BYTES,
    Request,
    Response,
    decode_request,
    encode_response,
    refused,
)

Handler = Callable[[Request], Awaitable[Response]]
Admit = Callable[[int | None], Awaitable[str | None]]
"""Given the connecting process's pid (None where unknown): None to admit it, or why not
(awaited, so that a refusal can be recorded before it is answered)."""
_log = structlog.get_logger("agentswf.launcher")
_READ_CHUNK_BYTES = 65536


class ConnectionBudget:
    """How many connections are open across a whole run, against a fixed limit."""

    def __init__(self, limit: int = MAX_OPEN_CONNECTIONS) -> None:
        self.limit = limit
        self.open = 0
        self.refused = 0

    def statistics(self) -> dict[str, int]:
        return {"open": self.open, "limit": self.limit, "refused": self.refused}


async def read_request(stream: SocketStream, limit: int = MAX_REQUEST_BYTES) -> bytes:
    """Bytes until the client half-closes, stopping one past `limit`."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        try:
            chunk = await stream.receive(_READ_CHUNK_BYTES)
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _command_of(request: Request | Response) -> str:
    return "result" if isinstance(request, Response) else type(request).__struct_config__.tag  # type: ignore[return-value]


async def _answer(stream: SocketStream, handle: Handler, budget: ConnectionBudget, admit: Admit | None) -> None:
    over_budget = budget.open >= budget.limit
    budget.open += 1
    try:
        with anyio.move_on_after(CONNECTION_LIFETIME_SECONDS) as lifetime:
            data = await read_request(stream)
        if lifetime.cancelled_caught:
            return
        request = decode_request(data)
        refusal = None if admit is None or isinstance(request, Response) else await admit(peer_pid(stream))
        if isinstance(request, Response):
            response = request
        elif refusal is not None:
            response = refused(_command_of(request), "wrong-agent", refusal)
        elif over_budget:
            budget.refused += 1
            response = refused(
                _command_of(request),
                "internal-error",
                f"the run has {budget.limit} connections open, its limit; nothing was done. "
                "Run the command again in a moment.",
            )
        else:
            try:
                response = await handle(request)
            except Exception as error:  # the agent must get an answer, never a dropped line
                _log.exception("wfa request failed", command=_command_of(request))
                response = refused(
                    _command_of(request),
                    "internal-error",
                    f"the run could not answer ({type(error).__name__}); try again later.",
                )
        try:
            await stream.send(encode_response(response))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            _log.warning("wfa client went away before its answer", code=response.code)
    finally:
        budget.open -= 1
        await stream.aclose()


async def listen(socket_path: Path) -> SocketListener:
    """Bind one agent's socket, readable and writable by its owner only."""
    listener = await anyio.create_unix_listener(socket_path)
    socket_path.chmod(0o600)
    return listener


async def serve(listener: SocketListener, handle: Handler, budget: ConnectionBudget, admit: Admit | None = None) -> None:
    """Answer each connection to `listener` until cancelled; `handle` answers each request
    that `admit` lets through (every request, without one)."""
    async with listener, anyio.create_task_group() as connections:
        while True:
            stream = await listener.accept()
            connections.start_soon(_answer, stream, handle, budget, admit)
