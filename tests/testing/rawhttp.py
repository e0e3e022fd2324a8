"""A raw HTTP/1.1 client over anyio sockets, so the server is tested without a library's help."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from typing import Any

import anyio


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def events(self) -> list[Any]:
        """The `data:` payloads of an SSE body, JSON-decoded ("[DONE]" stays a string)."""
        datas = [line[6:] for line in self.body.decode().splitlines() if line.startswith("data: ")]
        return [data if data == "[DONE]" else json.loads(data) for data in datas]

    def event_names(self) -> list[str]:
        return [line[7:] for line in self.body.decode().splitlines() if line.startswith("event: ")]


def encode(
    method: str, path: str, body: Any = None, *, chunked: bool = False, gzipped: bool = False,
    headers: dict[str, str] | None = None,
) -> bytes:  # fmt: skip
    """The bytes of one request; `body` is JSON-encoded unless it is bytes."""
    data = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if gzipped:
        data = gzip.compress(data)
        lines.append("Content-Encoding: gzip")
    if chunked:
        lines.append("Transfer-Encoding: chunked")
        pieces = [data[i : i + 100] for i in range(0, len(data), 100)]
        data = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"
    elif data or method == "POST":
        lines.append(f"Content-Length: {len(data)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


async def exchange(port: int, request: bytes, *, half_close: bool = False) -> Answer:
    """Send `request` (then EOF if `half_close`), read until the server closes, split the answer."""
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(request)
        if half_close:
            await stream.send_eof()
        received = b""
        while True:
            try:
                received += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                break
    head, _, body = received.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in header_lines)}
    return Answer(int(status_line.split()[1]), headers, body)


async def call(port: int, method: str, path: str, body: Any = None, **options: Any) -> Answer:
    return await exchange(port, encode(method, path, body, **options))
