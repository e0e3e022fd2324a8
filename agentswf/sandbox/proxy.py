"""The sandbox's way out: an HTTP(S) proxy outside it, on a unix socket bound into it.

One proxy per sandboxed attempt, for as long as the attempt runs, on a socket in the
agent's own directory (the connection is the authority: whoever reaches this socket is
that agent). It takes `CONNECT host:port` (HTTPS, and the tunnels of `forwarder.py`) and
plain-HTTP requests with an absolute URI, and reaches the host only if the allowlist
says so: an exact model endpoint (host and port, loopback included), or a host the
sandbox's `network` names, resolved to public addresses only (a name that resolves to
the host's loopback or a private network is refused, so an allowed domain can't be
pointed back at the host). Everything else is answered 403 and logged in the run's record.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ByteStream, SocketStream

from .spec import allows, host_problem

MAX_HEAD_BYTES = 16 * 1024  # of a request's line and headers
HEAD_TIMEOUT_SECONDS = 10.0  # for the request's head to arrive
CONNECT_TIMEOUT_SECONDS = 10.0  # for the upstream host to accept
MAX_CONNECTIONS = 64  # open at once, per attempt; more wait in the kernel's backlog, unaccepted
MAX_LOGGED_REFUSALS = 100  # per attempt; past that, one line says so and the rest go unlogged
ACCEPT_RETRY_SECONDS = 0.05  # after an accept failed for want of descriptors
_CHUNK_BYTES = 65536

Log = Callable[..., None]  # (message, **fields): a line in the run's record
Resolve = Callable[[str, int], Awaitable[list[str]]]  # a host's addresses to connect to


@dataclass(frozen=True, slots=True)
class Endpoint:
    """A model endpoint a CLI is configured with: always reachable from its sandbox."""

    host: str
    port: int

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Allowlist:
    endpoints: frozenset[Endpoint]
    network: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.endpoints or self.network)

    def decide(self, host: str, port: int) -> str | None:
        """"endpoint" or "network" for a target that may be reached, None for one that may not."""
        host = host.lower().strip("[]").rstrip(".")
        if Endpoint(host, port) in self.endpoints:
            return "endpoint"
        if host_problem(host) is None and allows(self.network, host):  # a name, never a crafted lookalike
            return "network"
        return None


async def public_addresses(host: str, port: int) -> list[str]:
    """`host`'s addresses, global ones only: the host's own loopback and private networks are
    no place for a sandbox's allowed domain to lead."""
    found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = [str(info[4][0]) for info in found]
    return [address for address in addresses if ipaddress.ip_address(address.split("%")[0]).is_global]


async def _endpoint_addresses(host: str, port: int) -> list[str]:
    found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in found]


resolve_network: Resolve = public_addresses  # how an allowed domain is resolved; a test may stand one in


@dataclass(frozen=True, slots=True)
class Request:
    """The head of a proxied request, as far as the proxy needs it."""

    host: str
    port: int
    tunnel: bool  # CONNECT; else a plain-HTTP request to forward, first line rewritten
    forward: bytes  # what to send upstream first (the rewritten head and what followed it)


def parse_head(head: bytes, rest: bytes) -> Request | str:
    """The request `head` (its line and headers, through the blank line) asks for, or why it can't be served."""
    line, _, headers = head.partition(b"\r\n")
    parts = line.split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        return "not an HTTP/1 request line"
    method, target, version = parts
    try:
        text = target.decode("ascii")
    except UnicodeDecodeError:
        return "the request's target is not ASCII"
    if method == b"CONNECT":
        host, port = _host_port(text, default=None)
        if host is None or port is None:
            return f"CONNECT needs host:port, not {text!r}"
        return Request(host, port, True, rest)
    if not text.lower().startswith("http://"):
        return "only CONNECT and absolute http:// requests are proxied"
    authority, slash, path = text[len("http://") :].partition("/")
    host, port = _host_port(authority.rpartition("@")[2], default=80)
    if host is None or port is None:
        return f"no host in {text!r}"
    first = method + b" " + (slash + path or "/").encode() + b" " + version
    return Request(host, port, False, first + b"\r\n" + headers + rest)


def _host_port(text: str, *, default: int | None) -> tuple[str | None, int | None]:
    if text.startswith("["):
        host, _, after = text[1:].partition("]")
        port_text = after[1:] if after.startswith(":") else ""
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, ""
    if not host:
        return None, None
    if not port_text:
        return host, default
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None, None
    return host, int(port_text)


async def _read_head(stream: ByteStream) -> tuple[bytes, bytes] | None:
    data = b""
    with anyio.move_on_after(HEAD_TIMEOUT_SECONDS):
        while b"\r\n\r\n" not in data:
            if len(data) > MAX_HEAD_BYTES:
                return None
            try:
                data += await stream.receive(_CHUNK_BYTES)
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return None
        head, _, rest = data.partition(b"\r\n\r\n")
        return head + b"\r\n\r\n", rest
    return None


async def _answer(stream: ByteStream, status: str, text: str) -> None:
    body = (text + "\n").encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    try:
        await stream.send(head.encode() + body)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass


async def _pipe(source: ByteStream, target: ByteStream) -> None:
    try:
        while True:
            await target.send(await source.receive(_CHUNK_BYTES))
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass
    try:
        await target.send_eof()
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass


async def _connect(addresses: list[str], port: int) -> SocketStream | None:
    for address in addresses:
        try:
            with anyio.fail_after(CONNECT_TIMEOUT_SECONDS):
                return await anyio.connect_tcp(address, port)
        except (OSError, TimeoutError):
            continue
    return None


class Proxy:
    """Serves one attempt's proxy socket by the allowlist; refusals go to `log`."""

    def __init__(self, allow: Allowlist, log: Log, *, sandbox: str, agent: str) -> None:
        self.allow = allow
        self.log = log
        self.sandbox = sandbox
        self.agent = agent
        self.limit = anyio.Semaphore(MAX_CONNECTIONS)
        self.refusals = 0

    def _refused(self, target: str, why: str) -> None:
        self.refusals += 1
        if self.refusals > MAX_LOGGED_REFUSALS:
            return
        if self.refusals == MAX_LOGGED_REFUSALS:
            why += f"; this is the {MAX_LOGGED_REFUSALS}th refusal of the attempt: later ones aren't logged"
        self.log(
            f"sandbox {self.sandbox}: agent {self.agent} was refused {target}: {why}",
            sandbox=self.sandbox, agent=self.agent, target=target, refused=why,
        )  # fmt: skip

    async def handle(self, client: ByteStream) -> None:
        async with client:
            got = await _read_head(client)
            if got is None:
                return
            request = parse_head(*got)
            if isinstance(request, str):
                await _answer(client, "400 Bad Request", f"agentswf sandbox proxy: {request}")
                return
            target = str(Endpoint(request.host.lower(), request.port))
            kind = self.allow.decide(request.host, request.port)
            if kind is None:
                why = "not on the sandbox's network allowlist"
                self._refused(target, why)
                await _answer(client, "403 Forbidden", f"agentswf sandbox: {target} is {why}; nothing was sent")
                return
            resolve = resolve_network if kind == "network" else _endpoint_addresses
            try:
                addresses = await resolve(request.host.strip("[]"), request.port)
            except OSError as error:
                addresses, why = [], f"its name doesn't resolve ({error.strerror or error})"
            else:
                why = "it resolves to no public address" if kind == "network" else "it resolves to nothing"
            upstream = await _connect(addresses, request.port) if addresses else None
            if upstream is None:
                why = why if not addresses else "it didn't accept a connection"
                self._refused(target, why)
                await _answer(client, "502 Bad Gateway", f"agentswf sandbox: {target} can't be reached: {why}")
                return
            async with upstream:
                if request.tunnel:
                    await client.send(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                if request.forward:
                    await upstream.send(request.forward)
                async with anyio.create_task_group() as pipes:
                    pipes.start_soon(_pipe, upstream, client)
                    await _pipe(client, upstream)


@asynccontextmanager
async def serving(path: Path, proxy: Proxy) -> AsyncIterator[None]:
    """`proxy` on a unix socket at `path` for as long as the block lasts; then gone, its connections too."""
    path.unlink(missing_ok=True)  # an attempt that never got to remove its socket (its run's directory is private)
    listener = await anyio.create_unix_listener(path)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_serve, listener, proxy)
            try:
                yield
            finally:
                group.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await listener.aclose()
        path.unlink(missing_ok=True)


async def _serve(listener: Any, proxy: Proxy) -> None:
    async with anyio.create_task_group() as connections:
        while True:
            await proxy.limit.acquire()  # before accepting: an agent can't hold more than its share of descriptors
            try:
                client = await listener.accept()
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                proxy.limit.release()
                return
            except OSError:  # out of descriptors: the next accept may do
                proxy.limit.release()
                await anyio.sleep(ACCEPT_RETRY_SECONDS)
                continue
            connections.start_soon(_guarded, proxy, client)


async def _guarded(proxy: Proxy, client: ByteStream) -> None:
    try:
        await proxy.handle(client)
    except Exception:  # one connection's trouble (hostile bytes included) is its own
        pass
    finally:
        proxy.limit.release()
