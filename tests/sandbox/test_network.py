"""A sandboxed agent reaches the hosts its sandbox allows, through agentswf's proxy, and nothing else."""

from __future__ import annotations

import secrets
import shutil
from typing import Any

import anyio
import pytest

from agentswf.engine.record.layout import read_lines
from agentswf.sandbox import proxy as proxy_module
from agentswf.sandbox.proxy import public_addresses

from .kit import ANSWER, agent, needs_bwrap, run

pytestmark = [
    pytest.mark.anyio,
    needs_bwrap,
    pytest.mark.skipif(shutil.which("curl") is None, reason="the agents of these tests fetch with curl, which isn't installed"),
]
STAND_IN = "api.stand-in.test"


@pytest.fixture
def stand_in(monkeypatch):
    """The proxy resolves the stand-in host to the test's loopback server (no real DNS has it)."""

    async def resolve(host: str, port: int) -> list[str]:
        return ["127.0.0.1"] if host == STAND_IN else await public_addresses(host, port)

    monkeypatch.setattr(proxy_module, "resolve_network", resolve)


async def test_an_allowed_host_is_reached_through_the_proxy_and_the_rest_is_refused_and_recorded(place, stand_in):
    token = secrets.token_hex(4)
    served: list[bytes] = []

    async def serve(stream: Any) -> None:
        async with stream:
            served.append(await stream.receive())
            await stream.send(b"HTTP/1.0 200 OK\r\nContent-Length: 6\r\n\r\nhello\n")

    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        body = f"""\
            say "allowed: $(curl -sS --max-time 5 http://{STAND_IN}:{port}/hi 2>&1)"
            say "other: $(curl -s -o /dev/null -w '%{{http_code}}' --max-time 5 http://evil.test/ 2>&1)"
            say "host port: $(curl -s -o /dev/null -w '%{{http_code}}' --max-time 5 http://127.0.0.1:{port}/ 2>&1)"
            say "tunnel: $(curl -s -o /dev/null -w '%{{http_code}}' --max-time 5 https://evil.test/ 2>&1)"
            {ANSWER}
        """

        async def fn(wf):
            box = await wf.sandboxes.open("net", cwd="ws", network=[STAND_IN])
            a = await wf.agents.open("a", runtime=agent(place / "ws", "a", body, token), sandbox=box)
            return (await a.run("Fetch.", timeout=30)).value

        async with anyio.create_task_group() as group:
            group.start_soon(listener.serve, serve)
            result = await run(fn, place)
            group.cancel_scope.cancel()
    assert result.outcome == "completed", result.reason
    assert result.value.split("\n") == ["allowed: hello", "other: 403", "host port: 000", "tunnel: 000"]
    assert len(served) == 1 and served[0].startswith(b"GET /hi HTTP/1.1")  # only the allowed request arrived
    refused = [line["fields"] for line in read_lines(result.run_dir / "log.jsonl") if "refused" in line.get("fields", {})]
    assert [(line["agent"], line["target"]) for line in refused] == [("a", "evil.test:80"), ("a", "evil.test:443")]
    opened = [line for line in read_lines(result.run_dir / "log.jsonl") if line.get("message") == "sandbox net opened"]
    assert [line["fields"]["network"] for line in opened] == [STAND_IN]


async def test_a_sandbox_without_network_has_no_proxy_and_no_way_out(place):
    token = secrets.token_hex(4)
    body = f"""\
        say "proxy: ${{HTTPS_PROXY:-none}}"
        say "out: $(curl -s -o /dev/null -w '%{{http_code}}' --max-time 3 http://example.com/ 2>&1)"
        {ANSWER}
    """

    async def fn(wf):
        box = await wf.sandboxes.open("closed", cwd="ws")
        a = await wf.agents.open("a", runtime=agent(place / "ws", "a", body, token), sandbox=box)
        return (await a.run("Fetch.", timeout=30)).value

    result = await run(fn, place)
    assert result.outcome == "completed", result.reason
    assert result.value.split("\n") == ["proxy: none", "out: 000"]
