"""`ActorRef.ask_inline`: where the actor would do nothing else first, its handler runs in the
asker's task, as the actor's loop would run it, and the trace shows it as a mailbox event.

An inline step of an idle actor (a synchronous handler, nothing queued, the actor parked) and
a write-through ask (a handler marked `write_through`, nothing queued, even while another
handler awaits); anything else goes through the mailbox."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from agentswf.actors import Actor, Reply, Supervisor, capture_trace, handler, write_through
from agentswf.errors import ActorCrashed, ActorStopped

from .kit import Hold

pytestmark = pytest.mark.anyio


class Note(msgspec.Struct):
    text: str


class Later(msgspec.Struct):
    """Answered by the next `Note`: a deferred ask."""


class Fail(msgspec.Struct):
    pass


class Where(msgspec.Struct):
    """Written through: answers which task ran it."""


class Writer(Actor):
    def __init__(self) -> None:
        super().__init__()
        self.notes: list[str] = []
        self.waiting: list[Reply] = []

    @handler
    def note(self, msg: Note) -> int:
        self.notes.append(msg.text)
        for reply in self.waiting:
            reply.set(msg.text)
        self.waiting.clear()
        return len(self.notes)

    @handler
    def later(self, msg: Later) -> None:
        self.waiting.append(self.defer())

    @handler
    def fail(self, msg: Fail) -> None:
        raise ValueError("fails")

    @write_through
    def where(self, msg: Where) -> object:
        return anyio.get_current_task().id

    @handler
    async def hold(self, msg: Hold) -> str:
        if msg.entered is not None:
            msg.entered.set()
        await msg.release.wait()
        return "released"


async def _idle(ref: object) -> None:
    for _ in range(3):  # the actor's loop reaches its wait for the next message
        await anyio.lowlevel.checkpoint()


async def test_an_idle_actors_handler_runs_in_the_askers_task_with_no_schedule_point_and_is_traced() -> None:
    with capture_trace() as events:
        async with Supervisor("t") as sup:
            ref = sup.spawn(Writer, name="w", capacity=4)
            assert await ref.ask(Note("first")) == 1  # through the mailbox: it has started
            await _idle(ref)
            del events[:]
            ask = ref.ask_inline(Note("second"))
            with pytest.raises(StopIteration) as returned:
                ask.send(None)  # one step: a schedule point would yield here
            assert returned.value.value == 2
            assert ref.statistics().handled == 2
    assert [(e["event"], e["message_type"], e.get("inline")) for e in events[:3]] == [
        ("mailbox.enqueue", "Note", True),
        ("mailbox.dequeue", "Note", True),
        ("mailbox.handled", "Note", True),
    ]
    assert events[0]["depth"] == 1 and events[1]["queued_s"] == 0.0 and events[2]["handling_s"] >= 0


async def test_behind_a_queued_message_or_a_busy_actor_it_is_an_ordinary_ask_in_order() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Writer, name="w", capacity=8)
        release, entered = anyio.Event(), anyio.Event()
        await ref.tell(Hold(release, entered))
        await entered.wait()
        answers: dict[str, int] = {}

        async def ask(text: str) -> None:
            answers[text] = await ref.ask_inline(Note(text))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, "a")  # a handler awaits: through the mailbox
            await anyio.wait_all_tasks_blocked()
            assert answers == {} and ref.statistics().depth == 1
            ref.tell_nowait(Note("b"))
            tg.start_soon(ask, "c")  # queued behind b
            await anyio.wait_all_tasks_blocked()
            release.set()
        assert answers == {"a": 1, "c": 3}  # the count of notes when each was handled: in mailbox order
        assert ref.statistics().handled == 4


async def test_a_write_through_handler_runs_at_once_while_another_handler_awaits() -> None:
    with capture_trace() as events:
        async with Supervisor("t") as sup:
            ref = sup.spawn(Writer, name="w", capacity=4)
            release, entered = anyio.Event(), anyio.Event()
            await ref.tell(Hold(release, entered))
            await entered.wait()
            assert await ref.ask_inline(Where()) == anyio.get_current_task().id  # run here, the Hold still held
            assert ref.statistics().handled == 1
            release.set()
    handled = [e["message_type"] for e in events if e["event"] == "mailbox.handled"]
    assert handled == ["Where", "Hold"]


async def test_a_deferred_answer_is_waited_for_and_a_raise_fails_only_its_ask() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Writer, name="w", capacity=4)
        await ref.ask(Note("started"))
        got: list[str] = []
        async with anyio.create_task_group() as tg:

            async def later() -> None:
                got.append(await ref.ask_inline(Later()))

            tg.start_soon(later)
            await anyio.wait_all_tasks_blocked()
            assert got == []
            await ref.ask_inline(Note("now"))
        assert got == ["now"]
        with pytest.raises(ActorCrashed, match="raised handling Fail") as raised:
            await ref.ask_inline(Fail())
        assert isinstance(raised.value.__cause__, ValueError)
        assert await ref.ask_inline(Note("goes on")) == 3
        assert ref.statistics().failed == 1


async def test_before_its_start_it_waits_and_after_its_stop_it_is_refused() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Writer, name="w", capacity=4)
        assert await ref.ask_inline(Note("queued before the actor ran")) == 1
        await ref.stop()
        with pytest.raises(ActorStopped):
            await ref.ask_inline(Note("too late"))


async def test_a_deferred_inline_ask_is_failed_when_the_actor_stops() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Writer, name="w", capacity=4)
        await ref.ask(Note("started"))
        await _idle(ref)
        failed: list[BaseException] = []
        async with anyio.create_task_group() as tg:

            async def later() -> None:
                try:
                    await ref.ask_inline(Later())
                except ActorStopped as error:
                    failed.append(error)

            tg.start_soon(later)
            await anyio.wait_all_tasks_blocked()
            await ref.stop()
        assert len(failed) == 1


def test_a_write_through_handler_must_be_synchronous() -> None:
    with pytest.raises(TypeError, match="must be synchronous"):

        class Bad(Actor):
            @write_through
            async def note(self, msg: Note) -> None:
                pass
