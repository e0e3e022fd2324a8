"""At a run's end its agents are closed with one ask of the RunActor, in the order they were
opened (one message and one task for a thousand agents, not one each); `close` asks for one."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agentswf.engine.run import CloseAgent
from agentswf.workflow.agents import Agents

pytestmark = pytest.mark.anyio


class _Run:
    def __init__(self) -> None:
        self.asked: list[Any] = []

    async def ask(self, message: Any) -> None:
        self.asked.append(message)


def _no_harness(key: str, runtime: Any) -> Any:
    raise AssertionError("no agent is opened here")


def _agents(run: _Run, keys: list[str]) -> tuple[Agents, dict[str, Any]]:
    agents = Agents(run, board=None, cwd=Path("."), env={}, resolve=_no_harness)  # type: ignore[arg-type]
    opened = {key: SimpleNamespace(closed=False) for key in keys}
    agents._open.update(opened)  # type: ignore[arg-type]
    return agents, opened


async def test_close_all_is_one_ask_for_every_open_agent_in_order() -> None:
    run = _Run()
    agents, opened = _agents(run, ["a", "b", "c"])
    await agents.close_all()
    assert run.asked == [CloseAgent(("a", "b", "c"))]
    assert all(agent.closed for agent in opened.values())
    assert not any(key in agents for key in opened)
    await agents.close_all()  # nothing open: nothing asked
    assert len(run.asked) == 1


async def test_close_asks_for_its_one_agent() -> None:
    run = _Run()
    agents, opened = _agents(run, ["a", "b"])
    assert await agents.close("b")
    assert not await agents.close("b")
    assert run.asked == [CloseAgent(("b",))]
    assert opened["b"].closed and not opened["a"].closed and "a" in agents
