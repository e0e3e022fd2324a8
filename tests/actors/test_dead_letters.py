"""Dead letters: nothing sent to a stopped actor is lost, nothing is both handled and dead-lettered."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentswf.actors import DEAD_LETTERS_KEPT, Actor, DeadLetter, Supervisor, handler
from agentswf.errors import ActorStopped

from .kit import Add, Counter, Hold

pytestmark = pytest.mark.anyio


async def test_tell_to_a_stopped_actor_is_a_dead_letter() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Counter, name="c", capacity=4)
        await ref.stop()
        await ref.tell(Add(1))
        ref.tell_nowait(Add(2))
        with pytest.raises(ActorStopped):
            await ref.ask(Add(3))
        letters = sup.dead_letters
        assert [d.message for d in letters] == [Add(1), Add(2), Add(3)]
        assert all(isinstance(d, DeadLetter) and d.actor == "c" and d.at > 0 for d in letters)
        assert letters[0].reason == "sent after the actor stopped"
        assert ref.statistics().dead_lettered == 3
        assert sup.statistics().dead_letters == 3


async def test_messages_queued_at_stop_are_dead_lettered() -> None:
    release = anyio.Event()
    entered = anyio.Event()
    async with Supervisor("t", stop_grace=0.02) as sup:
        ref = sup.spawn(Counter, capacity=4)
        await ref.tell(Hold(release, entered))
        await entered.wait()
        await ref.tell(Add(1))
        await ref.tell(Add(2))
        await ref.stop()
    reasons = [(d.message, d.reason) for d in sup.dead_letters]
    assert reasons == [
        (Add(1), "queued when the actor stopped"),
        (Add(2), "queued when the actor stopped"),
        (Hold(release, entered), "interrupted when the actor stopped"),
    ]


async def test_dead_letters_kept_are_bounded_but_all_are_counted() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Counter, capacity=1)
        await ref.stop()
        for k in range(DEAD_LETTERS_KEPT + 5):
            ref.tell_nowait(Add(k))
        assert len(sup.dead_letters) == DEAD_LETTERS_KEPT
        assert sup.dead_letters[0].message == Add(5)
        assert sup.statistics().dead_letters == DEAD_LETTERS_KEPT + 5


class Tagged(msgspec.Struct):
    sender: int
    seq: int


class Recorder(Actor):
    def __init__(self, handled: list[tuple[int, int]]) -> None:
        super().__init__()
        self.handled = handled

    @handler
    async def tagged(self, msg: Tagged) -> None:
        self.handled.append((msg.sender, msg.seq))
        await anyio.lowlevel.checkpoint()


@settings(max_examples=40, deadline=None)
@given(
    sends=st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=4),
    capacity=st.integers(min_value=1, max_value=8),
    stop_after=st.integers(min_value=0, max_value=60),
)
async def test_every_message_is_handled_or_dead_lettered_never_both_fifo_per_sender(
    sends: list[int], capacity: int, stop_after: int
) -> None:
    handled: list[tuple[int, int]] = []
    async with Supervisor("t", stop_grace=1.0) as sup:
        ref = sup.spawn(Recorder, handled, capacity=capacity)

        async def sender(sender_id: int, count: int) -> None:
            for seq in range(count):
                await ref.tell(Tagged(sender_id, seq))

        async def stopper() -> None:
            while len(handled) < stop_after and ref.statistics().depth + len(handled) < sum(sends):
                await anyio.lowlevel.checkpoint()
            await ref.stop()

        async with anyio.create_task_group() as tg:
            for sender_id, count in enumerate(sends):
                tg.start_soon(sender, sender_id, count)
            tg.start_soon(stopper)

    dead = [(d.message.sender, d.message.seq) for d in sup.dead_letters]
    sent = {(sender_id, seq) for sender_id, count in enumerate(sends) for seq in range(count)}
    assert not set(handled) & set(dead)
    assert set(handled) | set(dead) == sent
    assert len(handled) + len(dead) == len(sent)
    for sender_id in range(len(sends)):
        seqs = [seq for s, seq in handled if s == sender_id]
        assert seqs == sorted(seqs)
