"""`Actor.answers_at_once`: an ask that finds such an actor idle, for a sync handler, is handled
in the asker's task, as the actor would have handled it next; anything else goes through the
mailbox as for every other actor."""

from __future__ import annotations

import contextvars

import anyio
import msgspec
import pytest

from agentswf.actors import Actor, Reply, Supervisor, capture_trace, handler
from agentswf.errors import ActorCrashed

from .kit import Hold

pytestmark = pytest.mark.anyio

WHERE: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="unset")


class Where(msgspec.Struct):
    pass


class Fail(msgspec.Struct):
    pass


class Later(msgspec.Struct):
    pass


class Answer(msgspec.Struct):
    value: str


class Stop(msgspec.Struct):
    pass


class Quick(Actor):
    """Answers where its handler ran: in which task, seeing which context."""

    answers_at_once = True

    def __init__(self) -> None:
        super().__init__()
        self.later: Reply | None = None
        self.order: list[str] = []

    async def on_start(self) -> None:
        WHERE.set("the actor's")

    @handler
    def where(self, msg: Where) -> tuple[object, str]:
        self.order.append("where")
        return anyio.get_current_task().id, WHERE.get()

    @handler
    def fail(self, msg: Fail) -> None:
        raise ValueError("fail")

    @handler
    def later(self, msg: Later) -> None:
        self.later = self.defer()

    @handler
    def answer(self, msg: Answer) -> None:
        assert self.later is not None
        self.later.set(msg.value)

    @handler
    def stop_now(self, msg: Stop) -> str:
        self.stop()
        return "stopping"

    @handler
    async def hold(self, msg: Hold) -> tuple[object, str]:
        self.order.append("hold")
        if msg.entered is not None:
            msg.entered.set()
        await msg.release.wait()
        return anyio.get_current_task().id, WHERE.get()


class Slow(Quick):
    answers_at_once = False


async def _settled() -> None:
    for _ in range(3):  # the actor's loop reaches its wait for the next message
        await anyio.lowlevel.checkpoint()


async def test_an_idle_actor_answers_in_the_askers_task_with_its_own_context() -> None:
    WHERE.set("the asker's")
    async with Supervisor("t") as sup:
        quick, slow = sup.spawn(Quick, capacity=4), sup.spawn(Slow, capacity=4)
        await _settled()
        me = anyio.get_current_task().id
        assert await quick.ask(Where()) == (me, "the actor's")
        task, seen = await slow.ask(Where())
        assert task != me and seen == "the actor's"  # the default: in the actor's task
        assert quick.statistics().handled == 1 and quick.statistics().depth == 0


async def test_an_ask_behind_queued_messages_or_for_an_async_handler_goes_through_the_mailbox() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Quick, capacity=4)
        await _settled()
        me = anyio.get_current_task().id
        release = anyio.Event()
        release.set()
        ref.tell_nowait(Hold(release))  # queued: the ask is not answered ahead of it
        task, _ = await ref.ask(Where())
        assert task != me
        task, _ = await ref.ask(Hold(release))  # an async handler runs in the actor's task
        assert task != me
        await _settled()
        assert await ref.ask(Where()) == (me, "the actor's")
        assert ref.statistics().handled == 4


async def test_an_ask_answered_at_once_fails_alone_defers_and_stops_as_in_the_actors_task() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Quick, capacity=4)
        await _settled()
        with pytest.raises(ActorCrashed) as raised:
            await ref.ask(Fail())
        assert isinstance(raised.value.__cause__, ValueError)
        assert ref.statistics().failed == 1 and ref.alive  # the actor goes on
        async with anyio.create_task_group() as tg:
            answers: list[str] = []

            async def later() -> None:
                answers.append(await ref.ask(Later()))

            tg.start_soon(later)
            await _settled()
            await ref.ask(Answer("later"))
        assert answers == ["later"]
        assert await ref.ask(Stop()) == "stopping"
        with anyio.fail_after(5):
            while ref.alive:
                await anyio.lowlevel.checkpoint()


async def test_a_cancelled_asker_is_not_answered_at_once() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Quick, capacity=4)
        await _settled()
        with anyio.CancelScope() as scope:
            scope.cancel()
            await ref.ask(Where())
        assert scope.cancelled_caught
        assert ref.statistics().handled == 0


async def test_no_ask_is_answered_at_once_while_tracing() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Quick, capacity=4)
        await _settled()
        with capture_trace() as events:
            task, _ = await ref.ask(Where())
        assert task != anyio.get_current_task().id
        assert [e["event"] for e in events] == ["mailbox.enqueue", "mailbox.dequeue", "mailbox.handled"]


async def test_an_ask_right_after_an_answer_finds_the_actor_idle() -> None:
    """Such an actor parks as soon as it has answered, on asyncio too (no checkpoint first)."""
    async with Supervisor("t") as sup:
        ref = sup.spawn(Quick, capacity=4)
        release = anyio.Event()
        release.set()
        for _ in range(3):
            await ref.ask(Hold(release))  # through the mailbox: an async handler
            assert await ref.ask(Where()) == (anyio.get_current_task().id, "the actor's")
