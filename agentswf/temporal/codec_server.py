"""`awf codec-server`: Temporal's remote codec protocol over HTTP, so a person who holds the payload
key reads a run's history decrypted in Temporal's Web UI or with `temporal workflow show
--codec-endpoint`.

POST `/decode` (and `/encode`) takes `{"payloads": [...]}`, Temporal's Payloads in protobuf's
JSON, and answers the same shape, each payload decrypted (encrypted) with the held keys (codec.py).
A path may carry a prefix (`/default/decode`, a namespace), as Temporal's tools allow. The Web UI
calls from its own origin: the origins given are answered with CORS headers (the preflight
OPTIONS too); a request from another origin, or through a Host name other than loopback's (a
DNS-rebinding page), is refused. It listens on 127.0.0.1 only: whoever reaches it reads what
the key protects.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from ..errors import PayloadKeyError
from .codec import PayloadKeys

LOOPBACK = "127.0.0.1"
LOOPBACK_NAMES = ("127.0.0.1", "localhost")  # the Host names a request may come through
MAX_REQUEST_BYTES = 64 * 1024 * 1024  # a page of history's payloads, bounded
ALLOWED_HEADERS = "content-type,x-namespace,authorization"
REQUEST_TIMEOUT_SECONDS = 30.0  # a connection's wait for a request's next bytes


def codec_server(keys: PayloadKeys, *, port: int, origins: Sequence[str]) -> ThreadingHTTPServer:
    """The server, bound on 127.0.0.1:`port` (0: a free one; `server.server_port` says which), answering
    the Web UI at `origins` with CORS headers; serve it with `serve_forever()`."""
    actions: dict[str, Callable[[Payload], Payload]] = {"decode": keys.decrypt, "encode": keys.encrypt}
    allowed = frozenset(origins)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = REQUEST_TIMEOUT_SECONDS
        server_version = "awf-codec-server"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: a request's line says nothing a person needs, and a payload is never logged."""

        def do_OPTIONS(self) -> None:  # the Web UI's preflight
            if self._refused():
                return
            self._answer(HTTPStatus.NO_CONTENT, b"", "text/plain")

        def do_POST(self) -> None:
            if self._refused():
                return
            action = actions.get(self.path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1])
            if action is None:
                self._answer(HTTPStatus.NOT_FOUND, b"POST /encode or /decode", "text/plain")
                return
            length = _length(self.headers.get("Content-Length"))
            if length is None:
                self.close_connection = True
                self._answer(HTTPStatus.BAD_REQUEST, b"a Content-Length of whole bytes", "text/plain")
                return
            if length > MAX_REQUEST_BYTES:
                self.close_connection = True
                self._answer(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"a Content-Length of at most {MAX_REQUEST_BYTES} bytes"
                             .encode(), "text/plain")
                return
            try:
                given = json_format.Parse(self.rfile.read(length), Payloads())
                done = Payloads(payloads=[action(payload) for payload in given.payloads])
            except (json_format.ParseError, UnicodeDecodeError, PayloadKeyError) as error:
                self._answer(HTTPStatus.BAD_REQUEST, str(error).encode(), "text/plain")
                return
            self._answer(HTTPStatus.OK, json_format.MessageToJson(done).encode(), "application/json")

        def _refused(self) -> bool:
            """Answered 403 when it comes through a name other than loopback's, or from an origin not given."""
            host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]")
            origin = self.headers.get("Origin")
            if host not in LOOPBACK_NAMES or (origin is not None and origin not in allowed):
                self.close_connection = True
                self._answer(HTTPStatus.FORBIDDEN, b"refused: not a loopback name, or not an allowed origin", "text/plain")
                return True
            return False

        def _answer(self, status: HTTPStatus, body: bytes, kind: str) -> None:
            self.send_response(status)
            origin = self.headers.get("Origin")
            if origin in allowed:
                self.send_header("Access-Control-Allow-Origin", origin)
                self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
                self.send_header("Access-Control-Allow-Headers", ALLOWED_HEADERS)
                self.send_header("Access-Control-Allow-Credentials", "true")
                self.send_header("Vary", "Origin")
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer((LOOPBACK, port), Handler)
    server.daemon_threads = True
    return server


def _length(header: str | None) -> int | None:
    """The Content-Length a request gave, or None if it isn't a whole number of bytes."""
    if header is None:
        return 0
    return int(header) if header.strip().isdigit() else None
