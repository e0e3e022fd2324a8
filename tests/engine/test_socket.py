"""An agent's socket, spoken to raw: the common refusals, the run's 64-connection budget and the line deadline."""

from __future__ import annotations

import functools
import json
from contextlib import AsyncExitStack

import anyio
import pytest
from anyio.abc import SocketStream

from agentswf import workflow
from agentswf.launcher.place import SOCKET_NAME
from agentswf.testing import answer, run_workflow
from agentswf.wire import (
    MAX_OPEN_CONNECTIONS,
    MAX_REQUEST_BYTES,
    REQUEST_LINE_TIMEOUT_SECONDS,
    WIRE_VERSION,
    decode_response,
)

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
        return await read_to_end(stream)


async def read_to_end(stream: SocketStream) -> bytes:
    data = b""
    try:
        while True:
            data += await stream.receive()
    except (anyio.EndOfStream, anyio.BrokenResourceError):
        pass
    return data


def result_line(call_id: str = "nope", **extra) -> bytes:
    return json.dumps({"version": WIRE_VERSION, "command": "result", "call_id": call_id, **extra}).encode() + b"\n"


async def with_agents(tmp_path, body, keys=("a",)):
    """`body(*sockets)` while each agent is in a turn (its socket listens only then)."""

    async def fn(wf):
        agents = [await wf.agents.open(key, runtime="shell:sleep 60") for key in keys]
        sockets = [agent.launcher.with_name("s.sock") for agent in agents]
        async with anyio.create_task_group() as turns:
            for agent in agents:
                turns.start_soon(functools.partial(agent.run, "Wait.", timeout="90s", nudge=False))
            while not all(socket.exists() for socket in sockets):
                await anyio.sleep(0.01)
            value = await body(*sockets)
            turns.cancel_scope.cancel()
        return value

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


async def test_the_65th_connection_evicts_the_oldest_held_one(tmp_path):
    async def body(sock_a, sock_b):
        async with AsyncExitStack() as held:
            streams = []
            for _ in range(MAX_OPEN_CONNECTIONS):
                streams.append(await anyio.connect_unix(sock_a))
                held.push_async_callback(streams[-1].aclose)
            await anyio.sleep(0.2)  # every held connection accepted and counted
            newcomer = decode_response(await raw(sock_b, result_line()))  # the budget is the run's
            with anyio.fail_after(5):
                evicted = decode_response(await streams[0].receive())
        return newcomer, evicted

    newcomer, evicted = await with_agents(tmp_path, body, keys=("a", "b"))
    assert newcomer.code == "unknown-operation"
    assert evicted.code == "internal-error" and evicted.exit == 1
    assert f"{MAX_OPEN_CONNECTIONS} connections open" in evicted.stderr and "MAX_OPEN_CONNECTIONS" in evicted.stderr


async def test_64_connections_are_within_the_budget(tmp_path):
    async def body(sock):
        async with AsyncExitStack() as held:
            for _ in range(MAX_OPEN_CONNECTIONS - 1):
                held.push_async_callback((await anyio.connect_unix(sock)).aclose)
            await anyio.sleep(0.2)
            return decode_response(await raw(sock, result_line()))

    assert (await with_agents(tmp_path, body)).code == "unknown-operation"


@pytest.mark.virtual_time
async def test_a_dawdling_connection_is_answered_and_closed_at_the_line_deadline(tmp_path):
    """A scripted agent's own socket: the run's listener is the engine's, on the virtual clock."""
    seen: dict[str, object] = {}

    async def script(turn):
        async with await anyio.connect_unix(turn.launcher.with_name(SOCKET_NAME)) as stream:
            await stream.send(b'{"version": 1,')  # and never the rest
            started = anyio.current_time()
            seen["answer"] = await read_to_end(stream)
            seen["took"] = anyio.current_time() - started
        return "done"

    @workflow(name="t", description="A test workflow.")
    async def fn(wf):
        agent = await wf.agents.open("a", runtime="shell:true")
        return (await agent.run("Wait.", timeout="1h")).outcome.kind

    run = await run_workflow(fn, agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == "answered", run.reason
    response = decode_response(seen["answer"])
    assert response.code == "invalid-request" and "REQUEST_LINE_TIMEOUT_SECONDS" in response.stderr
    assert seen["took"] == pytest.approx(REQUEST_LINE_TIMEOUT_SECONDS, abs=0.1)
