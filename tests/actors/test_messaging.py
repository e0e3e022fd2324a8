"""Tell, ask, ordering, overflow policies, timeouts, unhandled messages."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from agentswf.actors import Overflow, Supervisor
from agentswf.errors import AskTimeout, MailboxFull, UnhandledMessage

from .kit import Add, Counter, Get, Hold, Unknown

pytestmark = pytest.mark.anyio


async def test_ask_returns_the_handler_value_and_tell_is_fire_and_forget() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Counter, 10, name="counter", capacity=8)
        await ref.tell(Add(1))
        ref.tell_nowait(Add(1))
        assert await ref.ask(Add(2), timeout=1.0) == 14
        assert await ref.ask(Get()) == 14
        stats = ref.statistics()
        assert (stats.handled, stats.failed, stats.depth, stats.capacity) == (4, 0, 0, 8)
        assert ref.name == "counter" and ref.alive


async def test_messages_are_handled_in_the_order_sent() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Counter, capacity=100)
        for k in range(50):
            await ref.tell(Add(k))
        await ref.ask(Get())
        # Peek at the instance through a handler-free path: the running total proves order too.
        assert await ref.ask(Add(0)) == sum(range(50))


async def test_messages_sent_before_the_actor_starts_wait_for_it() -> None:
    log: list[str] = []
    async with Supervisor("t") as sup:
        ref = sup.spawn(Counter, 0, log, capacity=4)
        ref.tell_nowait(Add(5))  # the actor's task has not run yet
        assert log == []
        assert await ref.ask(Get()) == 5


async def test_block_policy_holds_the_sender_until_there_is_space() -> None:
    release = anyio.Event()
    entered = anyio.Event()
    async with Supervisor("t") as sup:
        ref = sup.spawn(Counter, capacity=2, overflow=Overflow.BLOCK)
        await ref.tell(Hold(release, entered))
        await entered.wait()
        await ref.tell(Add(1))
        await ref.tell(Add(2))
        sent = anyio.Event()

        async def third() -> None:
            await ref.tell(Add(3))
            sent.set()

        sup._tasks.start_soon(third)  # type: ignore[union-attr]
        await anyio.sleep(0.01)
        assert not sent.is_set()
        assert ref.statistics().waiting_senders == 1
        with pytest.raises(MailboxFull):
            ref.tell_nowait(Add(4))  # tell_nowait never blocks, whatever the policy
        release.set()
        await sent.wait()
        assert await ref.ask(Get()) == 6


async def test_fail_policy_raises_mailbox_full_at_once() -> None:
    release = anyio.Event()
    entered = anyio.Event()
    async with Supervisor("t") as sup:
        ref = sup.spawn(Counter, capacity=1, overflow=Overflow.FAIL)
        await ref.tell(Hold(release, entered))
        await entered.wait()
        await ref.tell(Add(1))
        with pytest.raises(MailboxFull, match="full"):
            await ref.tell(Add(2))
        with pytest.raises(MailboxFull):
            await ref.ask(Add(2))
        release.set()
        while ref.statistics().depth:
            await anyio.lowlevel.checkpoint()
        assert await ref.ask(Get()) == 1


async def test_unhandled_message_type_is_refused_when_sent() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Counter, capacity=1)
        with pytest.raises(UnhandledMessage, match="Unknown"):
            ref.tell_nowait(Unknown())
        with pytest.raises(UnhandledMessage):
            await ref.tell(Unknown())
        with pytest.raises(UnhandledMessage):
            await ref.ask(Unknown())
        assert ref.statistics().depth == 0


async def test_ask_timeout_withdraws_a_queued_ask() -> None:
    release = anyio.Event()
    entered = anyio.Event()
    async with Supervisor("t") as sup:
        ref = sup.spawn(Counter, capacity=4)
        await ref.tell(Hold(release, entered))
        await entered.wait()
        with pytest.raises(AskTimeout):
            await ref.ask(Add(1), timeout=0.02)
        stats = ref.statistics()
        assert (stats.depth, stats.abandoned) == (0, 1)
        release.set()
        assert await ref.ask(Get()) == 0  # the withdrawn Add was never handled
        assert ref.statistics().dead_lettered == 0


async def test_ask_timeout_while_handled_drops_the_late_reply() -> None:
    release = anyio.Event()
    async with Supervisor("t") as sup:
        ref = sup.spawn(Counter, capacity=4)
        with pytest.raises(AskTimeout):
            await ref.ask(Hold(release), timeout=0.02)
        release.set()
        assert await ref.ask(Add(1)) == 1  # the next ask gets its own answer, not the stray one
        assert ref.statistics().handled == 2


async def test_cancelled_asker_withdraws_its_ask() -> None:
    release = anyio.Event()
    entered = anyio.Event()
    async with Supervisor("t") as sup:
        ref = sup.spawn(Counter, capacity=4)
        await ref.tell(Hold(release, entered))
        await entered.wait()
        with anyio.move_on_after(0.02):
            await ref.ask(Add(1))
        assert ref.statistics().depth == 0
        release.set()
        assert await ref.ask(Get()) == 0


async def test_cancelled_blocked_sender_sends_nothing() -> None:
    release = anyio.Event()
    entered = anyio.Event()
    async with Supervisor("t") as sup:
        ref = sup.spawn(Counter, capacity=1)
        await ref.tell(Hold(release, entered))
        await entered.wait()
        await ref.tell(Add(1))
        with anyio.move_on_after(0.02):
            await ref.tell(Add(100))
        assert ref.statistics().waiting_senders == 0
        release.set()
        assert await ref.ask(Get()) == 1
