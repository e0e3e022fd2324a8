"""What a person's command and a run's operator socket say to each other: the requests, the
response, and `ask_run`, the command's side (blocking, one JSON line each way).

Apart from the socket's server (engine/operator.py, the run's side: its actors, its listener, its
logging) so that `awf status` or `awf approve` asks a live run without importing the run.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import msgspec

OPERATOR_SOCKET_NAME = "op.sock"
OPERATOR_TIMEOUT_SECONDS = 30.0
MAX_INBOX_WAIT_SECONDS = 3600.0  # awf inbox --wait and a wait for a call to approve, the long requests


class _Operator(msgspec.Struct, tag_field="command", forbid_unknown_fields=True, frozen=True):
    pass


class Approve(_Operator, tag="approve", frozen=True):
    call_id: str
    reason: str = ""
    by: str = "operator"


class Reject(_Operator, tag="reject", frozen=True):
    call_id: str
    reason: str = ""
    by: str = "operator"


class Pending(_Operator, tag="pending", frozen=True):
    """The calls waiting for approval; with `wait_ms`, wait that long for one `known` doesn't name."""

    wait_ms: int = 0
    known: tuple[str, ...] = ()


class ReadInbox(_Operator, tag="inbox", frozen=True):
    """A participant's unread messages; with `wait_ms`, wait that long for one if there are none."""

    key: str
    wait_ms: int = 0


class PostAs(_Operator, tag="post", frozen=True):
    """A participant sends (or replies to) `peer`."""

    key: str
    peer: str
    text: str
    reply: bool = False


class Status(_Operator, tag="status", frozen=True):
    """How the live run stands: its agents, which are in a turn now, what each owes or awaits."""


class Stop(_Operator, tag="stop", frozen=True):
    """End the run `stopped`: the workflow is cancelled, its agents stopped, the record closed."""

    reason: str = ""
    by: str = "operator"


OperatorRequest = Approve | Reject | Pending | ReadInbox | PostAs | Status | Stop


class OperatorResponse(msgspec.Struct, frozen=True):
    ok: bool
    message: str
    value: Any = None


NOT_A_PARTICIPANT = "not-a-participant"  # the code of a `--as KEY` that names no participant


def ask_run(socket_path: str | Path, request: OperatorRequest, *, timeout: float | None = None) -> OperatorResponse:
    """Send one operator request to a live run (blocking); raises OSError if it isn't live, or
    doesn't answer within `timeout` (by default the run's own bound on its answer)."""
    wait = request.wait_ms / 1000 if isinstance(request, ReadInbox | Pending) else 0.0
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(OPERATOR_TIMEOUT_SECONDS + wait if timeout is None else timeout)
        connection.connect(str(socket_path))
        try:
            connection.sendall(msgspec.json.encode(request) + b"\n")
            connection.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before it was read (over the budget): the answer says why
        data = b""
        while not data.endswith(b"\n"):
            chunk = connection.recv(65536)
            if not chunk:
                break
            data += chunk
    try:
        return msgspec.json.decode(data, type=OperatorResponse)
    except msgspec.DecodeError:
        raise ConnectionError("the run closed the connection without answering") from None
