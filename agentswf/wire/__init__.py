"""The `wfa` protocol, sans-IO: requests, responses, codes, limits, framing and teaching."""

from .codes import *  # noqa: F403
from .common import *  # noqa: F403
from .framing import decode_request, decode_response, encode_request, encode_response
from .messages import (
    PeersRequest,
    ReplyRequest,
    Request,
    Response,
    ResultRequest,
    SendRequest,
    ToolRequest,
    WaitingRequest,
    accepted,
    refused,
)

__all__ = [
    "PeersRequest",
    "ReplyRequest",
    "Request",
    "Response",
    "ResultRequest",
    "SendRequest",
    "ToolRequest",
    "WaitingRequest",
    "accepted",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "refused",
]
