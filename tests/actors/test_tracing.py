"""Mailbox tracing, per actor system: a supervisor's own tracer, or a `capture_trace` block
around where it started; off by default, and nothing process-wide."""

from __future__ import annotations

import anyio
import pytest

from agentswf.actors import Supervisor, Tracer, capture_trace
from agentswf.errors import ActorCrashed

from .kit import Add, Boom, Counter, Get

pytestmark = pytest.mark.anyio


async def test_capture_trace_records_each_mailbox_event_with_its_fields() -> None:
    with capture_trace() as events:
        async with Supervisor("t") as sup:
            ref = sup.spawn(Counter, name="c", capacity=4)
            await ref.ask(Add(1))
            with pytest.raises(ActorCrashed):
                await ref.ask(Boom())
    names = [e["event"] for e in events]
    assert names[:3] == ["mailbox.enqueue", "mailbox.dequeue", "mailbox.handled"]
    assert names[3:6] == ["mailbox.enqueue", "mailbox.dequeue", "mailbox.failed"]
    enqueue, dequeue, handled = events[:3]
    assert enqueue == {"event": "mailbox.enqueue", "actor": "c", "message_type": "Add", "depth": 1}
    assert dequeue["depth"] == 0 and dequeue["queued_s"] >= 0
    assert handled["handling_s"] >= 0 and handled["message_type"] == "Add"
    assert events[5]["message_type"] == "Boom"


async def test_dead_letters_are_traced() -> None:
    with capture_trace() as events:
        async with Supervisor("t") as sup:
            ref = sup.spawn(Counter, name="c", capacity=4)
            await ref.stop()
            del events[:]  # the stop's own
            await ref.tell(Add(1))
    assert events == [
        {
            "event": "mailbox.dead_letter",
            "actor": "c",
            "message_type": "Add",
            "depth": 0,
            "reason": "sent after the actor stopped",
        }
    ]


async def test_capture_trace_hears_only_what_started_inside_it_in_its_context_and_only_while_it_lasts() -> None:
    started = anyio.Event()
    elsewhere: list[Supervisor] = []

    async def other_task() -> None:  # started before the block: its context has no capture
        async with Supervisor("elsewhere") as sup:
            elsewhere.append(sup)
            started.set()
            await anyio.sleep_forever()

    async with anyio.create_task_group() as tg, Supervisor("before") as before:
        tg.start_soon(other_task)
        await started.wait()
        with capture_trace() as events:
            async with Supervisor("inside") as inside:
                ref = inside.spawn(Counter, name="in", capacity=4)
                await ref.ask(Get())
                await before.spawn(Counter, name="before", capacity=4).ask(Get())
                await elsewhere[0].spawn(Counter, name="elsewhere", capacity=4).ask(Get())
                captured = len(events)
            assert events and {event["actor"] for event in events} == {"in"}
        async with Supervisor("after") as after:
            await after.spawn(Counter, name="after", capacity=4).ask(Get())
        tg.cancel_scope.cancel()
    assert captured == 3 and len(events) == 3  # the block is over: nothing more
    assert elsewhere[0].tracer is None and before.tracer is None and after.tracer is None


# A supervisor's own tracer ---------------------------------------------------------------------


def _collector() -> tuple[Tracer, list[tuple[str, str]]]:
    events: list[tuple[str, str]] = []
    return Tracer(lambda event, fields: events.append((event, fields["actor"]))), events


async def test_two_supervisors_trace_apart_and_one_without_a_tracer_is_not_traced() -> None:
    first, first_events = _collector()
    second, second_events = _collector()
    with first, second:
        async with Supervisor("a", tracer=first) as a, Supervisor("b", tracer=second) as b, Supervisor("c") as c:
            await a.spawn(Counter, name="in-a", capacity=4).ask(Add(1))
            await b.spawn(Counter, name="in-b", capacity=4).ask(Get())
            await c.spawn(Counter, name="in-c", capacity=4).ask(Get())  # no tracer: nowhere
    assert first_events == [("mailbox.enqueue", "in-a"), ("mailbox.dequeue", "in-a"), ("mailbox.handled", "in-a")]
    assert [actor for _, actor in second_events] == ["in-b"] * 3


async def test_a_closed_tracer_hears_nothing() -> None:
    tracer, events = _collector()
    async with Supervisor("t", tracer=tracer) as sup:
        ref = sup.spawn(Counter, capacity=4)
        await ref.ask(Get())  # not open yet
        with tracer:
            await ref.ask(Get())
        await ref.ask(Get())
    assert len(events) == 3


async def test_a_supervisors_own_tracer_and_a_capture_around_it_both_hear_it() -> None:
    tracer, events = _collector()
    with capture_trace() as captured:
        async with Supervisor("t", tracer=tracer) as sup:
            ref = sup.spawn(Counter, name="c", capacity=4)
            await ref.ask(Get())  # its own tracer isn't open: only the capture hears it
            with tracer:
                await ref.ask(Get())
    assert len(events) == 3 and len(captured) == 6
