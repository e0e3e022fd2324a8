"""An agent's socket, spoken to raw: the common refusals, and the run's 64-connection budget."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack

import anyio
import pytest

from agentswf.wire import MAX_OPEN_CONNECTIONS, MAX_REQUEST_BYTES, WIRE_VERSION, decode_response

from ..harnesses.kit import run_wf

pytestmark = pytest.mark.anyio


async def raw(path, data: bytes) -> bytes:
    """Send `data`, half-close, and read the whole answer."""
    async with await anyio.connect_unix(path) as stream:
        try:
            if data:
                await stream.send(data)
            await stream.send_eof()
        except (anyio.BrokenResourceError, OSError):
            pass  # the run stopped reading: its answer is still there
        answer = b""
        try:
            while True:
                answer += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            pass
    return answer


def result_line(call_id: str = "nope", **extra) -> bytes:
    return json.dumps({"version": WIRE_VERSION, "command": "result", "call_id": call_id, **extra}).encode() + b"\n"


async def with_agents(tmp_path, body, keys=("a",)):
    async def fn(wf):
        agents = [await wf.agents.open(key, runtime="shell:true") for key in keys]
        sockets = [agent.launcher.with_name("s.sock") for agent in agents]
        return await body(*sockets)

    result = await run_wf(fn, tmp_path)
    assert result.outcome == "completed", result.reason
    return result.value


@pytest.mark.parametrize(
    "data, code, words",
    [
        (b"", "invalid-request", "one line"),
        (b"hello\n", "invalid-request", "not a JSON object"),
        (result_line()[:-1], "invalid-request", "one line"),  # no newline
        (result_line() + result_line(), "invalid-request", "one line"),
        (result_line()[:20] + b"\n", "invalid-request", "not a JSON object"),  # truncated
        (result_line(surprise=1), "invalid-request", "surprise"),
        (result_line(args="--n 1"), "invalid-request", "args"),
        (json.dumps({"version": 2, "command": "result", "call_id": "x"}).encode() + b"\n", "unsupported-version",
         f"version 2 and the run speaks version {WIRE_VERSION}"),
    ],
)
async def test_common_refusals(tmp_path, data, code, words):
    async def body(sock):
        return await raw(sock, data)

    answer = decode_response(await with_agents(tmp_path, body))
    assert answer.code == code and answer.exit == 1
    assert words in answer.stderr


async def test_request_too_large(tmp_path):
    async def body(sock):
        return await raw(sock, result_line(input="x" * (MAX_REQUEST_BYTES + 10)))

    answer = decode_response(await with_agents(tmp_path, body))
    assert answer.code == "request-too-large" and answer.exit == 1
    assert str(MAX_REQUEST_BYTES) in answer.stderr


async def test_a_well_formed_request_reaches_the_agent(tmp_path):
    async def body(sock):
        return await raw(sock, result_line("nope"))

    answer = decode_response(await with_agents(tmp_path, body))
    assert answer.code == "unknown-operation"


async def test_the_65th_connection_is_answered_internal_error(tmp_path):
    async def body(sock_a, sock_b):
        async with AsyncExitStack() as held:
            for _ in range(MAX_OPEN_CONNECTIONS):
                held.push_async_callback((await anyio.connect_unix(sock_a)).aclose)
            await anyio.sleep(0.2)  # every held connection accepted and counted
            over_a = decode_response(await raw(sock_a, result_line()))
            over_b = decode_response(await raw(sock_b, result_line()))  # the budget is the run's
        # once the held connections close, the budget is free again
        with anyio.fail_after(5):
            while True:
                after = decode_response(await raw(sock_a, result_line()))
                if after.code != "internal-error":
                    break
                await anyio.sleep(0.02)
        return over_a, over_b, after

    over_a, over_b, after = await with_agents(tmp_path, body, keys=("a", "b"))
    for over in (over_a, over_b):
        assert over.code == "internal-error" and over.exit == 1
        assert f"{MAX_OPEN_CONNECTIONS} connections open" in over.stderr
    assert after.code == "unknown-operation"


async def test_64_connections_are_within_the_budget(tmp_path):
    async def body(sock):
        async with AsyncExitStack() as held:
            for _ in range(MAX_OPEN_CONNECTIONS - 1):
                held.push_async_callback((await anyio.connect_unix(sock)).aclose)
            await anyio.sleep(0.2)
            return decode_response(await raw(sock, result_line()))

    assert (await with_agents(tmp_path, body)).code == "unknown-operation"


async def test_a_dawdling_connection_is_closed_after_its_lifetime(tmp_path, monkeypatch):
    monkeypatch.setattr("agentswf.launcher.listener.CONNECTION_LIFETIME_SECONDS", 0.2)

    async def body(sock):
        async with await anyio.connect_unix(sock) as stream:
            await stream.send(b'{"version": 1,')  # and never the rest
            with anyio.fail_after(3):
                try:
                    data = await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    data = b""
        return data

    assert await with_agents(tmp_path, body) == b""
