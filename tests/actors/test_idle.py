"""`Actor.idle`: true only while this instance waits for its next message with none queued
and none being handled, so that another task may do at once what the next message would."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from agentswf.actors import Actor, Restart, Supervisor, handler
from agentswf.actors.wakeup import cancel_scope

from .kit import Hold

pytestmark = pytest.mark.anyio


class Me(msgspec.Struct):
    pass


class Crash(msgspec.Struct):
    pass


class Idler(Actor):
    @handler
    def me(self, msg: Me) -> Actor:
        assert not self.idle()  # handling a message
        return self

    @handler
    async def hold(self, msg: Hold) -> None:
        if msg.entered is not None:
            msg.entered.set()
        await msg.release.wait()

    @handler
    def crash(self, msg: Crash) -> None:
        raise RuntimeError("crash")


async def _settled() -> None:
    for _ in range(3):  # the actor's loop reaches its wait for the next message
        await anyio.lowlevel.checkpoint()


async def test_idle_only_while_waiting_with_nothing_queued() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Idler, name="i", capacity=4)
        actor = await ref.ask(Me())
        await _settled()
        assert actor.idle()
        release, entered = anyio.Event(), anyio.Event()
        await ref.tell(Hold(release, entered))
        await entered.wait()
        assert not actor.idle()  # a handler is mid-way
        ref.tell_nowait(Me())
        release.set()
        assert not actor.idle()  # a message is queued
        await ref.ask(Me())
        await _settled()
        assert actor.idle()
        await ref.stop()
        assert not actor.idle()


async def test_a_restarted_actors_old_instance_is_never_idle() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Idler, name="i", capacity=4, restart=Restart.PERMANENT)
        old = await ref.ask(Me())
        await ref.tell(Crash())
        new = await ref.ask(Me())
        await _settled()
        assert new is not old and new.idle() and not old.idle()


async def test_the_kernels_cancel_scope_cancels_what_it_holds() -> None:
    scope = cancel_scope()
    with scope:
        scope.cancel()
        await anyio.sleep(1)
    assert scope.cancelled_caught


async def test_an_actor_is_idle_as_soon_as_it_has_answered(anyio_backend_name: str) -> None:
    """With nothing queued it parks at once on trio, in the step that answered: no scheduler
    round first, which every message to an idle actor would pay again. On asyncio it takes
    one checkpoint first (cheaper there than a park it may spare), and is idle after it."""
    async with Supervisor("t") as sup:
        ref = sup.spawn(Idler, name="i", capacity=4)
        for _ in range(3):
            actor = await ref.ask(Me())
            if anyio_backend_name == "asyncio":
                assert not actor.idle()  # at its checkpoint
                await anyio.lowlevel.checkpoint()
            assert actor.idle()
