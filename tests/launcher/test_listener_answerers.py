"""The listener's answering tasks: a connection is handed to a task kept from the last one,
not a new task each; connections at once each get their own; the idle ones end with the
listener, and a connection is answered whichever task takes it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agentswf.launcher import client
from agentswf.launcher.listener import MAX_IDLE_ANSWERERS, ConnectionBudget, bind, serve
from agentswf.testing.scripted import exchange
from agentswf.wire import Request, Response, refused

pytestmark = pytest.mark.anyio

PEERS_LINE = client.encode_request(client.build_request(["peers"]))


async def test_calls_in_turn_are_answered_by_one_task(tmp_path: Path) -> None:
    tasks: list[int] = []

    async def handle(request: Request) -> Response:
        tasks.append(anyio.get_current_task().id)
        return refused("peers", "no-operation", "answered")

    path = tmp_path / "s.sock"
    async with anyio.create_task_group() as group:
        group.start_soon(serve, bind(path), handle, ConnectionBudget(limit=8))
        for _ in range(5):
            answer = await exchange(str(path), PEERS_LINE)
            assert answer["error"] == "answered"
        group.cancel_scope.cancel()
    assert len(tasks) == 5 and len(set(tasks)) == 1, tasks


async def test_connections_at_once_each_get_a_task_and_idle_ones_end_with_the_listener(tmp_path: Path) -> None:
    at_once = MAX_IDLE_ANSWERERS + 2
    arrived = 0
    all_in = anyio.Event()
    tasks: set[int] = set()

    async def handle(request: Request) -> Response:
        nonlocal arrived
        tasks.add(anyio.get_current_task().id)
        arrived += 1
        if arrived == at_once:
            all_in.set()
        await all_in.wait()  # every connection is being answered at once
        return refused("peers", "no-operation", "answered")

    path = tmp_path / "s.sock"
    accepting = anyio.CancelScope()
    answers: list[str] = []

    async def call() -> None:
        answers.append((await exchange(str(path), PEERS_LINE))["error"])

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(serve, bind(path), handle, ConnectionBudget(limit=16), None, accepting)
            async with anyio.create_task_group() as callers:
                for _ in range(at_once):
                    callers.start_soon(call)
            answers.append((await exchange(str(path), PEERS_LINE))["error"])  # after: an idle task takes it
            accepting.cancel()  # serve returns: its idle tasks have ended
    assert answers == ["answered"] * (at_once + 1)
    assert len(tasks) == at_once
