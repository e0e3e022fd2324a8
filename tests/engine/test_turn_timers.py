"""A turn's timers share one task, the run's (or, outside a run, the agent's own): each goes off
at its time, in order, an earlier one armed later wakes the task sooner, and stopping the turn
drops what hasn't gone off. On virtual time: a minute and ten, at once."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from agentswf.engine.agent.attempt import RUN_TIMERS, RunTimers, TurnTasks

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]

SOON_S = 60.0
LATER_S = 600.0


def telling(fired: list[str], name: str) -> Any:
    """A timer's tell that notes `name` in `fired` when it goes off."""

    async def told() -> None:
        fired.append(name)

    return told


async def test_timers_go_off_in_order_on_one_task() -> None:
    fired: list[tuple[str, float]] = []
    started: list[Any] = []
    async with anyio.create_task_group() as group:

        def start_soon(fn: Any, *args: Any) -> None:
            started.append(fn)
            group.start_soon(fn, *args)

        tasks = TurnTasks(start_soon)
        begun = anyio.current_time()

        def tell(name: str) -> Any:
            async def told() -> None:
                fired.append((name, anyio.current_time() - begun))
            return told

        tasks.at(begun + LATER_S, tell("later"))
        tasks.at(begun + SOON_S, tell("soon"))  # armed after, due first: the sleep is cut short
        tasks.at(begun + SOON_S, tell("soon, armed second"))
        await anyio.sleep(LATER_S + SOON_S)
        group.cancel_scope.cancel()
    assert [name for name, _ in fired] == ["soon", "soon, armed second", "later"]
    assert [at for _, at in fired] == [pytest.approx(SOON_S), pytest.approx(SOON_S), pytest.approx(LATER_S)]  # each at its time
    assert len(started) == 1  # three timers, one task


async def test_a_stopped_turn_drops_its_timers_and_the_next_turn_has_its_own() -> None:
    fired: list[str] = []
    async with anyio.create_task_group() as group:
        tasks = TurnTasks(group.start_soon)

        now = anyio.current_time()
        tasks.at(now + SOON_S, telling(fired, "first turn's"))
        tasks.stop()
        tasks.at(anyio.current_time() + 2 * SOON_S, telling(fired, "second turn's"))
        await anyio.sleep(4 * SOON_S)
        group.cancel_scope.cancel()
    assert fired == ["second turn's"]


async def test_the_run_s_timers_serve_every_agent_s_turns_on_one_task() -> None:
    """Under `run_actors` a turn's timers are the run's: arming one starts no task of the agent's,
    each agent's go off in the order it armed them, and a stopped turn's never go off."""
    fired: list[str] = []
    timers = RunTimers()
    token = RUN_TIMERS.set(timers)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(timers.run, group.start_soon)
            agent_started: list[Any] = []
            first, second = TurnTasks(agent_started.append), TurnTasks(agent_started.append)

            now = anyio.current_time()
            first.at(now + LATER_S, telling(fired, "first, later"))
            first.at(now + SOON_S, telling(fired, "first, soon"))
            first.at(now + SOON_S, telling(fired, "first, soon, armed second"))
            second.at(now + SOON_S, telling(fired, "second's stopped turn"))
            second.stop()
            second.at(now + 2 * SOON_S, telling(fired, "second's next turn"))
            await anyio.sleep(LATER_S + SOON_S)
            group.cancel_scope.cancel()
    finally:
        RUN_TIMERS.reset(token)
    assert agent_started == []  # no task of either agent's
    assert [name for name in fired if name.startswith("first")] == ["first, soon", "first, soon, armed second", "first, later"]
    assert "second's stopped turn" not in fired and "second's next turn" in fired


async def test_the_run_s_timers_let_go_of_stopped_turns() -> None:
    timers = RunTimers()
    token = RUN_TIMERS.set(timers)
    try:
        turns = TurnTasks(lambda *args: None)
        later = anyio.current_time() + 3600
        for _ in range(100):  # a hundred turns, each stopped with its deadline an hour off
            turns.at(later, _never)
            turns.stop()
    finally:
        RUN_TIMERS.reset(token)
    assert len(timers._heap) < 60  # not all hundred kept until they would have gone off


async def _never() -> None:
    raise AssertionError("a stopped turn's timer went off")
