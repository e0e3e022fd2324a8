"""The sandbox's way out: an HTTP(S) proxy outside it, on a unix socket bound into it.

One proxy per sandboxed attempt, for as long as the attempt runs, on a socket in the
agent's own directory (the connection is the authority: whoever reaches this socket is
that agent). It takes `CONNECT host:port` (HTTPS, and the tunnels of `forwarder.py`) and
plain-HTTP requests with an absolute URI, and reaches the host only if the allowlist
says so: an exact model endpoint (host and port, loopback included), or a host the
sandbox's `network` names, resolved to public addresses only (a name that resolves to
the host's loopback or a private network is refused, so an allowed domain can't be
pointed back at the host), tunnelled to only port 443 or the port its entry names.
Everything else is answered 403 and logged in the run's record.
Each attempt's proxy holds at most MAX_CONNECTIONS, and all of the process's together a share
of its descriptors (503 past it), so that agents fanned out together can't starve the run.

A plain-HTTP connection carries one request. Every request of a connection reaches the
address its first one was allowed to, so a second one (pipelined in the same write, or sent
once the answer came) for another site behind the same front end would be served unchecked.
Checking each request instead means framing the host's answers too (to put a refusal after
the answer before it, or to switch hosts between requests): more to get right, for clients
that simply open another connection. So the one request's head is checked (its absolute URI
on the allowlist, and its Host header, if any, naming that same host: 403 otherwise) and sent
on with the URI's Host and `Connection: close` (no upgrade to another protocol); its body goes
by its Content-Length (a Transfer-Encoding is refused: a body framed two ways is how a request
is smuggled past a proxy); a request with more after it in the same write is answered 400, and
a byte after the request ends the connection, unsent. A CONNECT tunnel is another matter: the
agent's bytes, unread, to the address of the name it asked for: to port 443, or the port the
name's `network` entry names, never (unasked) to port 80, where it would carry the plain HTTP
checked above, unchecked (docs/guide/sandboxes.md says what a tunnel still lets through).
"""

from __future__ import annotations

import ipaddress
import resource
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ByteStream, SocketStream

from .spec import TUNNEL_PORT, allows, host_problem

MAX_HEAD_BYTES = 16 * 1024  # of a request's line and headers
HEAD_TIMEOUT_SECONDS = 10.0  # for the request's head to arrive
CONNECT_TIMEOUT_SECONDS = 10.0  # for the upstream host to accept
MAX_CONNECTIONS = 64  # open at once, per attempt; more wait in the kernel's backlog, unaccepted
PROXIES_FD_SHARE = 0.25  # of the process's file-descriptor limit, what every proxy's connections may hold together
FDS_PER_CONNECTION = 2  # the agent's side and the host's
MAX_LOGGED_REFUSALS = 100  # per attempt; past that, one line says so and the rest go unlogged
ACCEPT_RETRY_SECONDS = 0.05  # after an accept failed for want of descriptors
_CHUNK_BYTES = 65536
_PRINTABLE_FIRST, _PRINTABLE_LAST = 0x21, 0x7E  # of a request target's bytes: no space, no control character
MAX_LENGTH_DIGITS = 18  # of a Content-Length: a body under 10**18 bytes
REWRITTEN = frozenset({b"host", b"connection", b"proxy-connection", b"keep-alive", b"upgrade"})  # a plain request's headers the proxy writes itself
_VERSIONS = (b"HTTP/1.0", b"HTTP/1.1")
_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")  # RFC 9110's tchar
_HTAB, _DEL = 0x09, 0x7F

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

    def decide(self, host: str, port: int, *, tunnel: bool) -> str | None:
        """"endpoint" or "network" for a target that may be reached, None for one that may not.
        A model endpoint is its host and port, tunnelled or not; a `network` host is tunnelled to
        its entry's port only (TUNNEL_PORT where it names none)."""
        host = _canonical(host)
        if Endpoint(host, port) in self.endpoints:
            return "endpoint"
        tunnel_port = port if tunnel else None
        if host_problem(host) is None and allows(self.network, host, tunnel_port):  # a name, never a crafted lookalike
            return "network"
        return None


def _canonical(host: str) -> str:
    return host.lower().strip("[]").rstrip(".")


NAT64 = ipaddress.ip_network("64:ff9b::/96")  # IPv4 addresses, translated: their last 32 bits
_DISCARD_PORT = 9  # a port to aim an unsent UDP socket at: only its route is asked for


def _embedded(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one leads to (mapped, 6to4, Teredo's client, NAT64, IPv4-compatible)."""
    if address.ipv4_mapped is not None or address.sixtofour is not None:
        return address.ipv4_mapped or address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in NAT64 or int(address) >> 32 == 0:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def is_public(address: str) -> bool:
    """A global address, and not an IPv6 one that leads to a private or loopback IPv4 address."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if not ip.is_global:
        return False
    embedded = _embedded(ip) if isinstance(ip, ipaddress.IPv6Address) else None
    return embedded is None or embedded.is_global


def is_own_address(address: str) -> bool:
    """One of this machine's own addresses (a global one on its network included): the kernel
    routes to it from itself. Asked of a UDP socket's route; nothing is sent."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((address, _DISCARD_PORT))
        except OSError:  # no route: not this machine's
            return False
        source = str(probe.getsockname()[0])
    return ipaddress.ip_address(source.split("%")[0]) == ipaddress.ip_address(address.split("%")[0])


async def public_addresses(host: str, port: int) -> list[str]:
    """`host`'s addresses, public ones only: this machine's own (its loopback, its address on its
    network) and private networks are no place for a sandbox's allowed domain to lead."""
    found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = [str(info[4][0]) for info in found]
    return [address for address in addresses if is_public(address) and not is_own_address(address)]


async def _endpoint_addresses(host: str, port: int) -> list[str]:
    found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in found]


resolve_network: Resolve = public_addresses  # how an allowed domain is resolved; a test may stand one in


@dataclass(frozen=True, slots=True)
class Request:
    """The head of a proxied request, as far as the proxy needs it."""

    host: str
    port: int
    tunnel: bool  # CONNECT; else a plain-HTTP request to forward, its head rewritten
    forward: bytes  # what to send upstream first: a tunnel's first bytes; the rewritten head and what came of the body
    more: int = 0  # of a plain request's body, the bytes still to come: all the connection sends on
    other_host: str | None = None  # what its Host header names, where that isn't `host`:`port`
    pipelined: bool = False  # more came after the request: the connection's one


def parse_head(head: bytes, rest: bytes) -> Request | str:
    """The request `head` (its line and headers, through the blank line) asks for, or why it can't be served."""
    line, *lines = head.removesuffix(b"\r\n\r\n").split(b"\r\n")
    parts = line.split(b" ")
    if len(parts) != 3 or parts[2] not in _VERSIONS or not _is_token(parts[0]):
        return "not an HTTP/1 request line"
    method, target, version = parts
    if not _printable(target):  # it is logged, and shown
        return "the request's target is not printable ASCII"
    text = target.decode("ascii")
    if method == b"CONNECT":
        host, port = _host_port(text, default=None)
        if host is None or port is None:
            return f"CONNECT needs host:port, not {text!r}"
        return Request(host, port, True, rest)
    if not text.lower().startswith("http://"):
        return "only CONNECT and absolute http:// requests are proxied"
    after = text[len("http://") :]
    cut = min((at for at in (after.find("/"), after.find("?")) if at >= 0), default=len(after))
    authority, path = after[:cut].rpartition("@")[2], after[cut:]
    host, port = _host_port(authority, default=80)
    if host is None or port is None:
        return f"no host in {text!r}"
    fields = _fields(lines)
    if isinstance(fields, str):
        return fields
    named = [value for name, value in fields if name.lower() == b"host"]
    lengths = [value for name, value in fields if name.lower() == b"content-length"]
    if any(name.lower() == b"transfer-encoding" for name, _ in fields):
        return "a request body sent with Transfer-Encoding (chunked) isn't proxied over plain HTTP; over HTTPS it is"
    if len(named) > 1 or len(lengths) > 1:
        return "more than one Host or Content-Length header"
    if lengths and not (lengths[0].isdigit() and len(lengths[0]) <= MAX_LENGTH_DIGITS):
        return "a Content-Length that isn't a length"
    if named and not _printable(named[0]):
        return "the Host header is not printable ASCII"
    other = named[0].decode("ascii") if named and not _names(named[0].decode("ascii"), host, port) else None
    length = int(lengths[0]) if lengths else 0
    kept = b"".join(name + b": " + value + b"\r\n" for name, value in fields if name.lower() not in REWRITTEN)
    first = method + b" " + (path if path.startswith("/") else "/" + path).encode() + b" " + version
    forward = first + b"\r\nHost: " + authority.encode() + b"\r\n" + kept + b"Connection: close\r\n\r\n" + rest[:length]
    return Request(host, port, False, forward, length - len(rest[:length]), other, len(rest) > length)


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


def _printable(text: bytes) -> bool:
    return all(_PRINTABLE_FIRST <= byte <= _PRINTABLE_LAST for byte in text)


def _is_token(text: bytes) -> bool:
    return bool(text) and all(byte in _TOKEN for byte in text)


def _fields(lines: list[bytes]) -> list[tuple[bytes, bytes]] | str:
    """A head's header lines as (name, value), read strictly: what the host reads in them must be
    what the proxy did (no space before the colon, no line folded, no control character)."""
    fields = []
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon or not _is_token(name):
            return "a header line that isn't `name: value`"
        value = value.strip(b" \t")
        if any((byte < 0x20 and byte != _HTAB) or byte == _DEL for byte in value):
            return "a header's value holds a control character"
        fields.append((name, value))
    return fields


def _names(host_header: str, host: str, port: int) -> bool:
    """Whether a Host header's `host_header` names `host`:`port` (the request's target), however spelt."""
    named, named_port = _host_port(host_header, default=80)
    return named is not None and (_canonical(named), named_port) == (_canonical(host), port)


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


async def _carry_one(client: ByteStream, upstream: ByteStream, more: int) -> None:
    """The rest of a plain request's body (`more` bytes) up, and the answer down till the host ends it.
    The client's end of stream is passed on; a byte after its request ends the connection, unsent."""
    async with anyio.create_task_group() as pipes:

        async def answer() -> None:
            await _pipe(upstream, client)
            pipes.cancel_scope.cancel()

        pipes.start_soon(answer)
        try:
            while more > 0:
                data = await client.receive(min(more, _CHUNK_BYTES))
                await upstream.send(data)
                more -= len(data)
            await client.receive(1)
        except anyio.EndOfStream:
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                await upstream.send_eof()
            return  # the answer may still come
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        pipes.cancel_scope.cancel()


async def _connect(addresses: list[str], port: int) -> SocketStream | None:
    for address in addresses:
        try:
            with anyio.fail_after(CONNECT_TIMEOUT_SECONDS):
                return await anyio.connect_tcp(address, port)
        except (OSError, TimeoutError):
            continue
    return None


def shared_connection_limit() -> int:
    """How many connections all the process's proxies may hold at once: a share of its descriptors,
    so agents fanned out together can't take the ones the run records with."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS * 64
    return max(1, int(soft * PROXIES_FD_SHARE) // FDS_PER_CONNECTION)


class _Shared:
    """The connections every proxy of the process holds (runs may be in threads of their own)."""

    lock = threading.Lock()
    open = 0


def shared_open() -> int:
    return _Shared.open


def _take_shared() -> bool:
    with _Shared.lock:
        if _Shared.open >= shared_connection_limit():
            return False
        _Shared.open += 1
        return True


def _give_shared() -> None:
    with _Shared.lock:
        _Shared.open -= 1


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
            kind = self.allow.decide(request.host, request.port, tunnel=request.tunnel)
            if kind is None:
                why = "not on the sandbox's network allowlist"
                if request.tunnel and self.allow.decide(request.host, request.port, tunnel=False):
                    why = "on a port no tunnel may go to: "
                    why += f"tunnels to a network host go to {TUNNEL_PORT} or to the port its entry names"
                self._refused(target, why)
                await _answer(client, "403 Forbidden", f"agentswf sandbox: {target} is {why}; nothing was sent")
                return
            if request.other_host is not None:
                why = f"its Host header names {request.other_host!r}"
                self._refused(target, why)
                await _answer(client, "403 Forbidden", f"agentswf sandbox: a request for {target} is refused: {why}; nothing was sent")
                return
            if request.pipelined:
                why = "one request per connection: another came after this one; nothing was sent"
                await _answer(client, "400 Bad Request", f"agentswf sandbox proxy: {why}")
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
                if not request.tunnel:
                    await _carry_one(client, upstream, request.more)
                    return
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
        if not _take_shared():
            async with client:
                await _answer(client, "503 Service Unavailable", "agentswf sandbox: the run's agents hold all the connections it allows")
            return
        try:
            await proxy.handle(client)
        finally:
            _give_shared()
    except Exception:  # one connection's trouble (hostile bytes included) is its own
        pass
    finally:
        proxy.limit.release()
