"""`in_askers_task`: an async handler `ActorRef.ask_inline` runs in the asker's task, beside the
actor's other handlers and its other such steps, under a scope of the actor's (its end cancels
the step, as it does its tasks), shielded from the asker's own cancellation, and traced and
counted as a mailbox event. The ToolBroker runs each tool call so (issue 32)."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from agentswf.actors import Actor, Supervisor, capture_trace, handler, in_askers_task
from agentswf.errors import ActorCrashed, ActorStopped

from .kit import Hold

pytestmark = pytest.mark.anyio


class Work(msgspec.Struct):
    """Held until `release`; answered with the task that ran it."""

    release: anyio.Event
    entered: anyio.Event
    fail: bool = False


class Lender(Actor):
    def __init__(self) -> None:
        super().__init__()
        self.done: list[int] = []

    @in_askers_task
    async def work(self, msg: Work) -> int:
        msg.entered.set()
        await msg.release.wait()
        if msg.fail:
            raise ValueError("fails")
        task = anyio.get_current_task().id
        self.done.append(task)
        return task

    @handler
    async def hold(self, msg: Hold) -> None:
        if msg.entered is not None:
            msg.entered.set()
        await msg.release.wait()


async def test_steps_run_in_their_askers_tasks_at_once_beside_a_handler_and_each_other() -> None:
    with capture_trace() as events:
        async with Supervisor("t") as sup:
            ref = sup.spawn(Lender, name="l", capacity=1)
            held = Hold(anyio.Event(), anyio.Event())
            await ref.tell(held)
            assert held.entered is not None
            await held.entered.wait()  # the actor's own task is busy in a handler
            release = anyio.Event()
            answers: dict[int, int] = {}
            async with anyio.create_task_group() as tg:

                async def ask(n: int) -> None:
                    answers[n] = await ref.ask_inline(Work(release, anyio.Event()))
                    assert answers[n] == anyio.get_current_task().id  # run here, in the asker's task

                for n in range(3):  # more than the mailbox holds: none of them is queued
                    tg.start_soon(ask, n)
                await anyio.wait_all_tasks_blocked()
                assert ref.statistics().depth == 0
                release.set()
            held.release.set()
            assert len(set(answers.values())) == 3
            assert ref.statistics().handled == 3
    handled = [e for e in events if e["event"] == "mailbox.handled" and e["message_type"] == "Work"]
    assert len(handled) == 3 and all(e["inline"] for e in handled)


async def test_the_askers_cancellation_waits_for_the_step_and_a_raise_fails_only_its_ask() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Lender, name="l", capacity=4)
        await ref.ask(Hold(_set(anyio.Event())))  # it runs (before, its loop would run the step)
        work = Work(anyio.Event(), anyio.Event())
        asker = anyio.CancelScope()
        ended: list[str] = []
        async with anyio.create_task_group() as tg:

            async def ask() -> None:
                with asker:
                    await ref.ask_inline(work)
                    await anyio.lowlevel.checkpoint()  # its cancellation, at its next schedule point
                ended.append("cancelled" if asker.cancelled_caught else "answered")

            tg.start_soon(ask)
            await work.entered.wait()
            asker.cancel()  # the asker gives up: the step is done all the same, then it ends
            await anyio.wait_all_tasks_blocked()
            assert ended == []
            work.release.set()
        assert ended == ["cancelled"]
        assert ref.statistics().handled == 2
        failing = Work(anyio.Event(), anyio.Event(), fail=True)
        failing.release.set()
        with pytest.raises(ActorCrashed, match="raised handling Work") as raised:
            await ref.ask_inline(failing)
        assert isinstance(raised.value.__cause__, ValueError)
        assert ref.statistics().failed == 1 and ref.alive


async def test_the_actors_end_ends_its_steps_and_after_it_they_are_refused() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Lender, name="l", capacity=4)
        work = Work(anyio.Event(), anyio.Event())
        failed: list[BaseException] = []
        async with anyio.create_task_group() as tg:

            async def ask() -> None:
                try:
                    await ref.ask_inline(work)
                except ActorStopped as error:
                    failed.append(error)

            await ref.ask(Hold(_set(anyio.Event())))  # the actor is looping
            tg.start_soon(ask)
            await work.entered.wait()
            await ref.stop()
        assert len(failed) == 1 and ref.statistics().handled == 1  # the Hold only
        with pytest.raises(ActorStopped):
            await ref.ask_inline(Work(_set(anyio.Event()), anyio.Event()))


def test_a_handler_run_in_its_askers_task_must_be_async() -> None:
    with pytest.raises(TypeError, match="must be async"):

        class Bad(Actor):
            @in_askers_task
            def work(self, msg: Work) -> None:
                pass


def _set(event: anyio.Event) -> anyio.Event:
    event.set()
    return event
