"""One JSON line each way: the request, then half-close; the response, then close.

`decode_request` never raises: whatever bytes arrive, it returns the request or the
refusal to answer with. A line nested past MAX_NESTING_DEPTH is refused before any
decoder sees it (see `nesting`).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from .common import COMMANDS, MAX_REQUEST_BYTES, WIRE_VERSION
from .messages import Request, Response, refused
from .nesting import too_deep

_request_decoder = msgspec.json.Decoder(Request)
_response_decoder = msgspec.json.Decoder(Response)
_encoder = msgspec.json.Encoder()


class _Probe(msgspec.Struct):
    """The two fields read before the rest: which version, and which command."""

    version: Any = None
    command: Any = None


_probe_decoder = msgspec.json.Decoder(_Probe)
COMMAND_HINT_BYTES = 256  # the command field comes first in what wfa sends
_COMMAND_FIELD = re.compile(rb'"command"\s*:\s*"([a-z]+)"')


def encode_request(request: Request) -> bytes:
    return _encoder.encode(request) + b"\n"


def encode_response(response: Response) -> bytes:
    return _encoder.encode(response) + b"\n"


def decode_response(line: bytes) -> Response:
    """The response in `line`; raises msgspec.DecodeError if it isn't one."""
    return _response_decoder.decode(line)


def _command_hint(data: bytes) -> str:
    """The command a request too large or too deep to decode names, from its first bytes ("result" if none)."""
    found = _COMMAND_FIELD.search(data[:COMMAND_HINT_BYTES])
    command = found.group(1).decode() if found else "result"
    return command if command in COMMANDS else "result"


def decode_request(data: bytes) -> Request | Response:
    """The request in `data`, or the refusal to send back."""
    if len(data) > MAX_REQUEST_BYTES:
        return refused(
            _command_hint(data),
            "request-too-large",
            f"the request is {len(data)} bytes, over the run's limit of {MAX_REQUEST_BYTES}; "
            "write a long value to a file and send its path.",
        )
    if not data.endswith(b"\n") or data.count(b"\n") != 1:
        return refused("result", "invalid-request", "a request is exactly one line of JSON.")
    deep = too_deep(data)
    if deep is not None:
        return refused(_command_hint(data), "invalid-request", f"{deep}.")
    try:
        probe = _probe_decoder.decode(data)
    except msgspec.DecodeError as error:
        return refused("result", "invalid-request", f"the request is not a JSON object: {error}.")
    command = probe.command if probe.command in COMMANDS else "result"
    if probe.version != WIRE_VERSION:
        return refused(
            command,
            "unsupported-version",
            f"this wfa speaks wire version {probe.version!r} and the run speaks version "
            f"{WIRE_VERSION}; nothing was done. awf was likely installed anew while the run is live.",
        )
    try:
        return _request_decoder.decode(data)
    except msgspec.DecodeError as error:
        return refused(command, "invalid-request", f"{error}.")
