"""A minimal, bounded HTTP/1.1 server side: one request per connection, then close.

The CLIs under test send ordinary requests (Content-Length or chunked bodies, sometimes
gzip) and all of them accept a close-delimited response, so keep-alive, pipelining and
response encodings are left out. Every read is bounded, so a stray or hostile client
can't pin memory or a task.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus

import anyio
from anyio.abc import ByteStream
from anyio.streams.buffered import BufferedByteReceiveStream

MAX_LINE_BYTES = 16 * 1024  # the request line, one header line, or one chunk-size line
MAX_HEADER_COUNT = 128
MAX_BODY_BYTES = 32 * 1024 * 1024  # as sent; a long claude conversation is about 1 MB
MAX_DECODED_BODY_BYTES = 64 * 1024 * 1024  # after gzip, so a small bomb can't expand past it
REQUEST_TIMEOUT_SECONDS = 30.0  # to receive one whole request, headers and body
_GZIP_WBITS = 16 + zlib.MAX_WBITS  # zlib's way of saying "gzip header and trailer"


class BadRequest(Exception):
    """The request can't be read; answered with `status` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class HTTPRequest:
    """One request as read: header names lower-cased, the body decoded (gzip undone)."""

    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: bytes


async def read_request(stream: ByteStream) -> HTTPRequest:
    """Read one request from `stream`; raises BadRequest when it can't be read in bounds."""
    reader = BufferedByteReceiveStream(stream)
    try:
        with anyio.fail_after(REQUEST_TIMEOUT_SECONDS):
            method, path, query = _request_line(await _line(reader))
            headers = await _headers(reader)
            if headers.get("expect", "").lower() == "100-continue":
                await stream.send(b"HTTP/1.1 100 Continue\r\n\r\n")
            body = await _body(reader, headers)
    except TimeoutError:
        raise BadRequest(408, f"the request took over {REQUEST_TIMEOUT_SECONDS:g} s to arrive") from None
    except anyio.IncompleteRead:
        raise BadRequest(400, "the connection closed in the middle of the request") from None
    return HTTPRequest(method, path, query, headers, _decoded(body, headers.get("content-encoding", "")))


async def _line(reader: BufferedByteReceiveStream) -> bytes:
    try:
        line = await reader.receive_until(b"\r\n", MAX_LINE_BYTES)
    except anyio.DelimiterNotFound:
        line = None
    if line is None or len(line) > MAX_LINE_BYTES:  # receive_until only bounds what it hasn't found
        raise BadRequest(431, f"a line of the request is over {MAX_LINE_BYTES} bytes")
    return line


def _request_line(line: bytes) -> tuple[str, str, str]:
    parts = line.decode("latin-1").split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise BadRequest(400, f"not an HTTP/1.x request line: {line[:80]!r}")
    path, _, query = parts[1].partition("?")
    return parts[0].upper(), path, query


async def _headers(reader: BufferedByteReceiveStream) -> dict[str, str]:
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADER_COUNT + 1):
        line = await _line(reader)
        if not line:
            return headers
        name, colon, value = line.decode("latin-1").partition(":")
        if not colon or not name or name != name.strip():
            raise BadRequest(400, f"malformed header line: {line[:80]!r}")
        name, value = name.lower(), value.strip()
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    raise BadRequest(431, f"the request has over {MAX_HEADER_COUNT} headers")


async def _body(reader: BufferedByteReceiveStream, headers: Mapping[str, str]) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return await _chunked(reader)
    length = headers.get("content-length", "0")
    if not length.isdigit():
        raise BadRequest(400, f"bad Content-Length: {length!r}")
    if int(length) > MAX_BODY_BYTES:
        raise BadRequest(413, f"the body is {length} bytes, over the {MAX_BODY_BYTES} limit")
    return await reader.receive_exactly(int(length)) if int(length) else b""


async def _chunked(reader: BufferedByteReceiveStream) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        size_line = (await _line(reader)).split(b";", 1)[0].strip()
        try:
            chunk_size = int(size_line, 16)
        except ValueError:
            raise BadRequest(400, f"bad chunk size: {size_line[:20]!r}") from None
        if chunk_size == 0:
            while await _line(reader):  # trailers, ignored
                pass
            return b"".join(chunks)
        size += chunk_size
        if size > MAX_BODY_BYTES:
            raise BadRequest(413, f"the chunked body is over the {MAX_BODY_BYTES} byte limit")
        chunks.append(await reader.receive_exactly(chunk_size))
        if await reader.receive_exactly(2) != b"\r\n":
            raise BadRequest(400, "a chunk does not end with CRLF")


def _decoded(body: bytes, encoding: str) -> bytes:
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding not in ("gzip", "x-gzip"):
        raise BadRequest(415, f"Content-Encoding {encoding!r} is not supported (only gzip)")
    inflater = zlib.decompressobj(_GZIP_WBITS)
    try:
        decoded = inflater.decompress(body, MAX_DECODED_BODY_BYTES)
    except zlib.error as error:
        raise BadRequest(400, f"the gzip body is corrupt: {error}") from None
    if inflater.unconsumed_tail:
        raise BadRequest(413, f"the body is over {MAX_DECODED_BODY_BYTES} bytes once decompressed")
    return decoded


def response_head(status: int, content_type: str, length: int | None = None) -> bytes:
    """The status line and headers of a close-delimited response (with a length if known)."""
    lines = [
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}",
        f"Content-Type: {content_type}",
        "Cache-Control: no-cache",
        "Connection: close",
    ]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
