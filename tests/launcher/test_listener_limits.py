"""The listener's limits, on a real socket: the budget is taken before a byte is read, a
stalled connection is the first evicted, the line and answer deadlines, and an accept that
runs out of file descriptors is waited out."""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import SocketStream

from agentswf.launcher import client
from agentswf.launcher.listener import ConnectionBudget, bind, connection_limit, serve
from agentswf.wire import (
    ANSWER_DELIVERY_TIMEOUT_SECONDS,
    EXIT_TOOL_UNCERTAIN,
    MAX_OPEN_CONNECTIONS,
    MAX_REQUEST_BYTES,
    REQUEST_LINE_TIMEOUT_SECONDS,
    Request,
    Response,
    decode_response,
    refused,
)

pytestmark = pytest.mark.anyio

PEERS_LINE = client.encode_request(client.build_request(["peers"]))
TOOL_LINE = client.encode_request(client.build_request(["tool", "lint"], lambda: "{}"))
Handler = Callable[[Request], Awaitable[Response]]


async def answered(request: Request) -> Response:
    return refused("peers", "no-operation", "the handler ran")


@asynccontextmanager
async def serving(tmp_path: Path, budget: ConnectionBudget, handle: Handler = answered, listener: Any = None) -> AsyncIterator[Path]:
    path = tmp_path / "s.sock"
    async with anyio.create_task_group() as group:
        group.start_soon(serve, listener or bind(path), handle, budget)
        yield path
        group.cancel_scope.cancel()


async def ask(path: Path, data: bytes) -> Response:
    """Send `data` whole, half-close and read the answer, as wfa does."""
    async with await anyio.connect_unix(path) as stream:
        await stream.send(data)
        await stream.send_eof()
        return decode_response(await read_all(stream))


async def read_all(stream: SocketStream) -> bytes:
    data = b""
    try:
        while True:
            data += await stream.receive()
    except (anyio.EndOfStream, anyio.BrokenResourceError):
        return data


async def stalled(path: Path, n: int) -> list[SocketStream]:
    """`n` connections that each sent half a request and hold."""
    streams = []
    for _ in range(n):
        stream = await anyio.connect_unix(path)
        await stream.send(PEERS_LINE[:10])
        streams.append(stream)
    return streams


async def close(streams: list[SocketStream]) -> None:
    """Close client ends once the server has stopped: on asyncio, a server read cancelled
    as its socket turns readable raises in the event loop (anyio's raw-socket streams)."""
    for stream in streams:
        await stream.aclose()


async def settle(condition: Callable[[], bool], seconds: float = 5.0, step: float = 0.01) -> None:
    """Wait until `condition()` holds, looking every `step` (a long one on virtual time: each look is a jump)."""
    with anyio.fail_after(seconds):
        while not condition():
            await anyio.sleep(step)


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def test_over_a_full_budget_a_connection_is_refused_before_a_byte_is_read(tmp_path):
    """Every slot busy being answered: 200 newcomers sending 2 MiB each are refused unread,
    and the run's memory doesn't grow with what they sent (it grew 400 MB when it read first)."""
    release = anyio.Event()

    async def slow(request: Request) -> Response:
        await release.wait()
        return await answered(request)

    budget = ConnectionBudget(4)
    payload = memoryview(b"x" * (MAX_REQUEST_BYTES - 1))
    async with serving(tmp_path, budget, slow) as path, anyio.create_task_group() as busy:
        for _ in range(4):
            busy.start_soon(ask, path, PEERS_LINE)
        await settle(lambda: budget.open == 4 and not budget.statistics()["waiting"])
        before = rss_bytes()
        sent: list[int] = []
        answers: list[Response] = []

        async def flood() -> None:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(str(path))
                sock.setblocking(False)
                size = 0
                try:
                    while size < len(payload):  # what the kernel takes without the run reading
                        size += sock.send(payload[size:])
                except BlockingIOError:
                    pass
                sent.append(size)
                data = b""
                while not data.endswith(b"\n"):
                    await anyio.wait_readable(sock)
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                answers.append(decode_response(data))

        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                for _ in range(200):
                    group.start_soon(flood)
        grown = rss_bytes() - before
        release.set()
    assert len(answers) == 200 and budget.refused == 200
    assert all(a.code == "internal-error" and "MAX_OPEN_CONNECTIONS" in a.stderr for a in answers)
    assert max(sent) < len(payload)  # the run never read: the newcomer could not send it all
    assert grown < 64 * 1024 * 1024, f"RSS grew {grown} bytes"


async def test_a_refusal_before_reading_still_names_the_command(tmp_path):
    """A tool call refused unread exits as a refused tool call does (its line is peeked, not read)."""
    release = anyio.Event()

    async def slow(request: Request) -> Response:
        await release.wait()
        return await answered(request)

    budget = ConnectionBudget(1)
    async with serving(tmp_path, budget, slow) as path, anyio.create_task_group() as busy:
        busy.start_soon(ask, path, PEERS_LINE)
        await settle(lambda: budget.open == 1 and not budget.statistics()["waiting"])
        answer = await ask(path, TOOL_LINE)
        release.set()
    assert answer.code == "internal-error" and answer.exit == EXIT_TOOL_UNCERTAIN
    assert answer.stderr.startswith("wfa: tool refused (internal-error)")


async def test_wfa_reads_the_refusal_of_a_request_the_run_would_not_read(tmp_path):
    """A 2 MiB request over a full budget: wfa's send breaks off, and it shows the run's refusal."""
    release = anyio.Event()

    async def slow(request: Request) -> Response:
        await release.wait()
        return await answered(request)

    budget = ConnectionBudget(1)
    fields = client.build_request(["tool", "lint"], lambda: "x" * (MAX_REQUEST_BYTES // 2 - 100))
    async with serving(tmp_path, budget, slow) as path, anyio.create_task_group() as busy:
        busy.start_soon(ask, path, PEERS_LINE)
        await settle(lambda: budget.open == 1 and not budget.statistics()["waiting"])
        answer = await anyio.to_thread.run_sync(client.call, str(path), fields)
        release.set()
    assert answer["exit"] == EXIT_TOOL_UNCERTAIN and "MAX_OPEN_CONNECTIONS" in answer["stderr"]


async def test_a_newcomer_evicts_the_connection_that_has_stalled_longest(tmp_path):
    budget = ConnectionBudget(8)
    async with serving(tmp_path, budget) as path:
        held = await stalled(path, 8)
        await settle(lambda: budget.statistics()["waiting"] == 8)
        with anyio.fail_after(5):
            answer = await ask(path, PEERS_LINE)
            evicted = decode_response(await read_all(held[0]))
        assert budget.statistics()["waiting"] == 7  # the other seven still hold
    await close(held)
    assert answer.error == "the handler ran"
    assert evicted.code == "internal-error" and "closed to make room" in evicted.stderr
    assert "8 connections open" in evicted.stderr and "MAX_OPEN_CONNECTIONS" in evicted.stderr
    assert budget.evicted == 1 and budget.refused == 0


@pytest.mark.virtual_time  # the ones kept end at the line deadline, which the clock jumps to while their senders wait
async def test_requests_still_arriving_hold_at_most_max_reading_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr("agentswf.launcher.listener.MAX_READING_BYTES", 1024 * 1024)
    budget = ConnectionBudget()
    most: list[int] = []

    def send_part(path: Path) -> bytes:
        """400 KB of a request, never its end; then what the run answers."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(str(path))
            try:
                sock.sendall(b"x" * 400_000)
            except OSError:
                pass  # evicted while sending
            most.append(budget.reading_bytes)
            data = b""
            try:
                while chunk := sock.recv(65536):
                    data += chunk
            except OSError:
                pass
            return data

    answers: list[bytes] = []
    async with serving(tmp_path, budget) as path:

        async def one() -> None:
            answers.append(await anyio.to_thread.run_sync(send_part, path))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as group:
                for _ in range(6):
                    group.start_soon(one)
                await settle(lambda: budget.evicted >= 3)
                assert budget.reading_bytes <= 1024 * 1024
    refusals = [decode_response(a).stderr for a in answers]
    evicted = [text for text in refusals if "closed to make room" in text]
    assert len(evicted) == budget.evicted >= 3 and all("MAX_READING_BYTES" in text for text in evicted)
    assert max(most) <= 1024 * 1024 + 65536


async def test_a_thousand_stalled_connections_dont_keep_a_caller_out(tmp_path):
    budget = ConnectionBudget()
    async with serving(tmp_path, budget) as path:
        held = await stalled(path, 1000)
        started = time.monotonic()
        with anyio.fail_after(5):
            answers = [await ask(path, PEERS_LINE) for _ in range(20)]
        elapsed = time.monotonic() - started
    await close(held)
    assert all(a.error == "the handler ran" for a in answers)
    assert budget.evicted >= 1000 - MAX_OPEN_CONNECTIONS
    assert elapsed < 3.0


@pytest.mark.virtual_time
async def test_connections_sending_nothing_are_closed_at_the_line_deadline(tmp_path):
    budget = ConnectionBudget()
    async with serving(tmp_path, budget) as path:
        streams = [await anyio.connect_unix(path) for _ in range(MAX_OPEN_CONNECTIONS)]
        started = anyio.current_time()
        with anyio.fail_after(REQUEST_LINE_TIMEOUT_SECONDS + 1):
            answers = [decode_response(await read_all(stream)) for stream in streams]
        elapsed = anyio.current_time() - started
        await settle(lambda: budget.open == 0)
    await close(streams)
    assert all(a.code == "invalid-request" and "REQUEST_LINE_TIMEOUT_SECONDS" in a.stderr for a in answers)
    assert elapsed == pytest.approx(REQUEST_LINE_TIMEOUT_SECONDS, abs=0.1)
    assert budget.evicted == 0


@pytest.mark.virtual_time
async def test_a_client_that_never_takes_its_answer_is_closed_at_the_delivery_deadline(tmp_path):
    async def big(request: Request) -> Response:
        return refused("peers", "no-operation", "x" * (8 * 1024 * 1024))  # far over any socket buffer

    budget = ConnectionBudget()
    async with serving(tmp_path, budget, big) as path, await anyio.connect_unix(path) as stream:
        await stream.send(PEERS_LINE)
        await stream.send_eof()
        await settle(lambda: budget.open == 1)
        started = anyio.current_time()
        await settle(lambda: budget.open == 0, ANSWER_DELIVERY_TIMEOUT_SECONDS + 2, step=1.0)  # and never a byte read
        assert ANSWER_DELIVERY_TIMEOUT_SECONDS <= anyio.current_time() - started <= ANSWER_DELIVERY_TIMEOUT_SECONDS + 1


class RunsOutOfDescriptors(socket.socket):
    """A real listening socket whose next `failures` accepts fail as the kernel's do at EMFILE."""

    failures = 0

    def accept(self) -> tuple[socket.socket, Any]:
        if self.failures:
            self.failures -= 1
            raise OSError(errno.EMFILE, "Too many open files")
        return super().accept()


async def test_an_accept_out_of_descriptors_is_waited_out_closing_a_stalled_connection(tmp_path):
    budget = ConnectionBudget()
    path = tmp_path / "s.sock"
    listener = RunsOutOfDescriptors(fileno=bind(path).detach())
    listener.setblocking(False)
    async with serving(tmp_path, budget, listener=listener):
        held = await stalled(path, 4)
        await settle(lambda: budget.statistics()["waiting"] == 4)
        listener.failures = 5  # the next five accepts fail
        with anyio.fail_after(5):
            answer = await ask(path, PEERS_LINE)
        assert listener.failures == 0
        evicted = [decode_response(await read_all(stream)) for stream in held]
    await close(held)
    assert answer.error == "the handler ran"
    assert budget.evicted == 4  # a stalled connection closed for each failed accept, while there were any
    assert all("closed to make room" in e.stderr for e in evicted)


def test_connections_take_at_most_a_quarter_of_the_descriptors(monkeypatch):
    monkeypatch.setattr("resource.getrlimit", lambda which: (100, 4096))
    assert connection_limit() == 25
    monkeypatch.setattr("resource.getrlimit", lambda which: (1 << 20, 1 << 20))
    assert connection_limit() == MAX_OPEN_CONNECTIONS


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_on_asyncio_an_idle_listener_keeps_its_reader_and_drops_it_when_nobody_waits(tmp_path, anyio_backend):
    """An agent's listener waits once a call: re-registering it each time cost more than the
    accept. A reader nobody waits for is dropped (level-triggered, it would fire every turn)."""
    import asyncio

    from agentswf.launcher.listener import _Acceptor

    path = str(tmp_path / "s.sock")
    sock = bind(tmp_path / "s.sock")
    selector = asyncio.get_running_loop()._selector  # type: ignore[attr-defined]
    waiting = _Acceptor(sock)
    try:
        for _ in range(3):
            client_end = socket.socket(socket.AF_UNIX)
            with anyio.fail_after(5):
                async with anyio.create_task_group() as group:
                    group.start_soon(anyio.to_thread.run_sync, client_end.connect, path)  # once the wait is armed
                    (await waiting.accept()).close()
            client_end.close()
            await anyio.sleep(0.01)
            assert sock.fileno() in selector.get_map()  # kept between waits, with nothing queued
        client_end = socket.socket(socket.AF_UNIX)
        client_end.connect(path)  # queued, and nobody waits
        await settle(lambda: sock.fileno() not in selector.get_map())
        with anyio.fail_after(5):
            (await waiting.accept()).close()  # registered again for the next wait
        client_end.close()
    finally:
        waiting.close()
        sock.close()
