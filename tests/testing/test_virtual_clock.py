"""The virtual clock itself: the mark on one test, the backend options outside pytest, and the
wall time the engine reads (engine/clock.py) on a virtual clock and off one."""

from __future__ import annotations

import asyncio
import time

import anyio
import pytest
import sniffio
from trio.testing import MockClock

from agentswf import Workflow, tool, workflow
from agentswf.engine import clock
from agentswf.testing import ScriptedTurn, ToolResult, answer, run_workflow, virtual_clock
from agentswf.testing.clock import AUTOJUMP_THRESHOLD_SECONDS, VirtualTimeLoop


@pytest.mark.virtual_time
async def test_the_mark_on_one_test_makes_an_hour_pass_at_once():
    started, wall, real = anyio.current_time(), clock.wall(), time.monotonic()
    await anyio.sleep(3600)
    assert anyio.current_time() - started == pytest.approx(3600)
    assert clock.wall() - wall == pytest.approx(3600)  # the wall the engine records runs with it
    assert clock.virtual()
    assert time.monotonic() - real < 1


@pytest.mark.virtual_time
async def test_real_work_in_a_thread_finishes_before_the_clock_jumps():
    """A wait shorter than the threshold in a worker thread (an fsync, a sync tool handler) is not
    overtaken by a deadline: the clock jumps only once the loop has been idle that long."""
    with anyio.move_on_after(60) as scope:
        await anyio.to_thread.run_sync(time.sleep, AUTOJUMP_THRESHOLD_SECONDS / 4)
    assert not scope.cancelled_caught


async def test_off_the_virtual_clock_the_wall_is_the_wall():
    assert not clock.virtual()
    assert clock.wall() == pytest.approx(time.time(), abs=1)
    assert clock.now().wall == pytest.approx(time.time(), abs=1)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_virtual_clock_runs_a_program_outside_pytest(backend):
    async def main() -> tuple[float, float, bool]:
        started, wall = anyio.current_time(), clock.wall()
        await anyio.sleep(24 * 3600)
        return anyio.current_time() - started, clock.wall() - wall, clock.virtual()

    real = time.monotonic()
    waited, walled, virtual = anyio.run(main, backend=backend, backend_options=virtual_clock(backend))
    assert (waited, virtual) == (pytest.approx(24 * 3600), True)
    assert walled == pytest.approx(24 * 3600)
    assert time.monotonic() - real < 1


def test_an_unknown_backend_is_named():
    with pytest.raises(ValueError, match="curio"):
        virtual_clock("curio")


class _CountingLoop(VirtualTimeLoop):
    """The asyncio virtual loop, noting each step its time takes."""

    def __init__(self) -> None:
        super().__init__()
        self.steps: list[float] = []
        self._last = super().time()

    def time(self) -> float:
        now = super().time()
        if now != self._last:
            self.steps.append(now - self._last)
            self._last = now
        return now


def _counting_clock() -> MockClock:
    """trio's virtual clock, noting each jump in `steps` (its autojump is a `jump`)."""
    trio_clock = virtual_clock("trio")["clock"]
    steps: list[float] = []
    jump = trio_clock.jump

    def counted(seconds: float) -> None:
        steps.append(seconds)
        jump(seconds)

    trio_clock.jump, trio_clock.steps = counted, steps
    return trio_clock


def _steps() -> list[float]:
    if sniffio.current_async_library() == "trio":
        import trio

        keeper = trio.lowlevel.current_clock()
    else:
        keeper = asyncio.get_running_loop()
    return keeper.steps  # type: ignore[attr-defined,no-any-return]


@pytest.mark.parametrize(
    "anyio_backend",
    [pytest.param(("asyncio", {"loop_factory": _CountingLoop}), id="asyncio"),
     pytest.param(("trio", {"clock": _counting_clock()}), id="trio")],
)
async def test_a_run_moves_the_clock_only_for_its_own_deadlines(tmp_path):
    """Each step of a virtual clock waits a tenth of a second of real idleness first. A run that
    writes its record, fsyncs it, ends a tool call early and ends a turn steps once, for the hour
    it waits: not for the Recorder's batch wait or group commit (the disk's times), nor for the
    deadline of a tool call that has ended, nor for a timer of a turn that has ended."""

    async def script(turn: ScriptedTurn) -> str:
        assert isinstance(await turn.tool("quick"), ToolResult)
        return "done"

    @workflow(name="t", description="A test workflow.")
    async def fn(wf: Workflow) -> str:
        agent = await wf.agents.open("a", runtime="codex", tools={"quick": tool(lambda: "ok", description="Q.", timeout="5m")})
        turn = await agent.run("Go.", timeout="1h")
        wf.log("waiting an hour")
        await anyio.sleep(3600)
        return turn.outcome.kind

    before = len(_steps())
    run = await run_workflow(fn, agents={"a": answer(script)}, run_root=tmp_path, timeout="2h")
    assert run.value == "answered"
    assert _steps()[before:] == [pytest.approx(3600)]


SLOW_DISK_SECONDS = 1.5 * AUTOJUMP_THRESHOLD_SECONDS  # an fsync on a loaded machine (real time): past the threshold


@workflow(name="one-turn", description="One turn, twenty minutes at most, in a run of thirty.")
async def one_turn(wf: Workflow) -> str:
    agent = await wf.agents.open("a", runtime="claude")
    return (await agent.run("Answer.", timeout="20m")).value


@pytest.mark.virtual_time
async def test_the_clock_doesnt_jump_while_the_record_is_on_disk(tmp_path, monkeypatch):
    """An fsync longer than the threshold of idleness (CI's disk under four test workers) doesn't let
    the clock jump to the run's next deadline while it runs: the turn is answered, the run completes."""
    from agentswf.engine.record import recorder

    def slow_fsyncs(fds):
        time.sleep(SLOW_DISK_SECONDS)
        return [None for _ in fds]

    monkeypatch.setattr(recorder, "fsync_each", slow_fsyncs)
    started = anyio.current_time()
    run = await run_workflow(one_turn, agents={"a": answer("done")}, run_root=tmp_path, timeout="30m")
    assert run.value == "done"
    assert anyio.current_time() - started < 60  # the clock never jumped to a deadline


SLOW_WATCHDOG_SECONDS = 5 * AUTOJUMP_THRESHOLD_SECONDS  # for the run's watchdog to sweep and exit on a loaded machine


@pytest.mark.virtual_time
async def test_the_clock_doesnt_jump_while_the_runs_watchdog_ends(tmp_path, monkeypatch):
    """The run's end waits for its watchdog, a real process, in real time: on CI's loaded machine
    it took longer than the threshold to sweep and exit, and the clock jumped its whole grace."""
    from agentswf.engine import watchdog

    watch_command = watchdog.watch_command
    monkeypatch.setattr(
        watchdog,
        "watch_command",
        lambda *args: ["sh", "-c", f'"$@"; sleep {SLOW_WATCHDOG_SECONDS}', "sh", *watch_command(*args)],
    )
    started = anyio.current_time()
    run = await run_workflow(one_turn, agents={"a": answer("done")}, run_root=tmp_path, timeout="30m")
    assert run.value == "done"
    assert anyio.current_time() - started < watchdog.WATCHDOG_GRACE_SECONDS  # waited for, not jumped over
