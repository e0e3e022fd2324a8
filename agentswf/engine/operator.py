"""The run's operator socket: how `awf approve` and `awf reject` reach a live run.

One socket per run, beside the agents' sockets, answering one JSON line with one JSON
line. Its path is in the run's record (run.json `control`), so a person finds it by
run id.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any, Union

import anyio
import msgspec
from anyio.abc import SocketListener, SocketStream

from ..actors import ActorRef
from ..launcher.listener import read_request
from .approvals import ApprovalDecision, Decide, ListPending

OPERATOR_SOCKET_NAME = "op.sock"
MAX_OPERATOR_REQUEST_BYTES = 64 * 1024
OPERATOR_TIMEOUT_SECONDS = 30.0


class _Operator(msgspec.Struct, tag_field="command", forbid_unknown_fields=True, frozen=True):
    pass


class Approve(_Operator, tag="approve"):
    call_id: str
    reason: str = ""
    by: str = "operator"


class Reject(_Operator, tag="reject"):
    call_id: str
    reason: str = ""
    by: str = "operator"


class Pending(_Operator, tag="pending"):
    pass


OperatorRequest = Union[Approve, Reject, Pending]


class OperatorResponse(msgspec.Struct, frozen=True):
    ok: bool
    message: str
    value: Any = None


_decoder = msgspec.json.Decoder(OperatorRequest)


async def _handle(request: OperatorRequest, desk: ActorRef) -> OperatorResponse:
    if isinstance(request, Pending):
        pending = await desk.ask(ListPending())
        return OperatorResponse(True, f"{len(pending)} call(s) waiting for approval", msgspec.to_builtins(pending))
    approved = isinstance(request, Approve)
    decided = await desk.ask(Decide(request.call_id, ApprovalDecision(approved, request.reason, request.by)))
    verb = "approved" if approved else "rejected"
    if decided:
        return OperatorResponse(True, f"call {request.call_id} {verb}")
    return OperatorResponse(False, f"no call {request.call_id} is waiting for approval")


async def _answer(stream: SocketStream, desk: ActorRef) -> None:
    async with stream:
        with anyio.move_on_after(OPERATOR_TIMEOUT_SECONDS):
            data = await read_request(stream, MAX_OPERATOR_REQUEST_BYTES)
            try:
                response = await _handle(_decoder.decode(data), desk)
            except msgspec.DecodeError as error:
                response = OperatorResponse(False, f"not an operator request: {error}")
            await stream.send(msgspec.json.encode(response) + b"\n")


async def serve_operator(listener: SocketListener, desk: ActorRef) -> None:
    async with listener, anyio.create_task_group() as connections:
        while True:
            connections.start_soon(_answer, await listener.accept(), desk)


def ask_run(socket_path: str | Path, request: OperatorRequest) -> OperatorResponse:
    """Send one operator request to a live run (blocking); raises OSError if it isn't live."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(OPERATOR_TIMEOUT_SECONDS)
        connection.connect(str(socket_path))
        connection.sendall(msgspec.json.encode(request) + b"\n")
        connection.shutdown(socket.SHUT_WR)
        data = b""
        while not data.endswith(b"\n"):
            chunk = connection.recv(65536)
            if not chunk:
                break
            data += chunk
    return msgspec.json.decode(data, type=OperatorResponse)
