"""Mailbox tracing through structlog and sinks, off by default."""

from __future__ import annotations

import pytest
import structlog

from agentswf.actors import Supervisor, Tracer, add_trace_sink, capture_trace, enable_tracing, tracing
from agentswf.errors import ActorCrashed

from .kit import Add, Boom, Counter, Get

pytestmark = pytest.mark.anyio


async def test_capture_trace_records_each_mailbox_event_with_its_fields() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Counter, name="c", capacity=4)
        with capture_trace() as events:
            await ref.ask(Add(1))
            with pytest.raises(ActorCrashed):
                await ref.ask(Boom())
        assert not tracing.enabled
    names = [e["event"] for e in events]
    assert names[:3] == ["mailbox.enqueue", "mailbox.dequeue", "mailbox.handled"]
    assert names[3:6] == ["mailbox.enqueue", "mailbox.dequeue", "mailbox.failed"]
    enqueue, dequeue, handled = events[:3]
    assert enqueue == {"event": "mailbox.enqueue", "actor": "c", "message_type": "Add", "depth": 1}
    assert dequeue["depth"] == 0 and dequeue["queued_s"] >= 0
    assert handled["handling_s"] >= 0 and handled["message_type"] == "Add"
    assert events[5]["message_type"] == "Boom"


async def test_dead_letters_are_traced() -> None:
    async with Supervisor("t") as sup:
        ref = sup.spawn(Counter, name="c", capacity=4)
        await ref.stop()
        with capture_trace() as events:
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


async def test_tracing_is_off_by_default_and_goes_through_structlog_when_on() -> None:
    seen: list[str] = []
    remove = add_trace_sink(lambda event, fields: seen.append(event))
    try:
        async with Supervisor("t") as sup:
            ref = sup.spawn(Counter, capacity=4)
            await ref.ask(Get())
            assert seen == []
            with structlog.testing.capture_logs() as logs:
                enable_tracing(True)
                try:
                    await ref.ask(Get())
                finally:
                    enable_tracing(False)
            assert [log["event"] for log in logs] == ["mailbox.enqueue", "mailbox.dequeue", "mailbox.handled"]
            assert logs[0]["log_level"] == "debug"
            assert seen == ["mailbox.enqueue", "mailbox.dequeue", "mailbox.handled"]
    finally:
        remove()
    remove()  # removing twice is harmless


# A supervisor's own tracer ---------------------------------------------------------------------


def _collector() -> tuple[Tracer, list[tuple[str, str]]]:
    events: list[tuple[str, str]] = []
    return Tracer(lambda event, fields: events.append((event, fields["actor"]))), events


async def test_two_supervisors_trace_apart_and_process_sinks_see_neither() -> None:
    first, first_events = _collector()
    second, second_events = _collector()
    process_wide: list[str] = []
    remove = add_trace_sink(lambda event, fields: process_wide.append(event))
    try:
        with first, second:
            assert tracing.enabled
            async with Supervisor("a", tracer=first) as a, Supervisor("b", tracer=second) as b, Supervisor("c") as c:
                await a.spawn(Counter, name="in-a", capacity=4).ask(Add(1))
                await b.spawn(Counter, name="in-b", capacity=4).ask(Get())
                await c.spawn(Counter, name="in-c", capacity=4).ask(Get())  # no tracer: nowhere
        assert not tracing.enabled
    finally:
        remove()
    assert first_events == [("mailbox.enqueue", "in-a"), ("mailbox.dequeue", "in-a"), ("mailbox.handled", "in-a")]
    assert [actor for _, actor in second_events] == ["in-b"] * 3
    assert process_wide == []


async def test_a_closed_tracer_hears_nothing_and_tracing_is_off_again() -> None:
    tracer, events = _collector()
    async with Supervisor("t", tracer=tracer) as sup:
        ref = sup.spawn(Counter, capacity=4)
        await ref.ask(Get())  # not open yet
        with tracer:
            await ref.ask(Get())
        await ref.ask(Get())
    assert len(events) == 3 and not tracing.enabled


async def test_the_process_switch_and_a_tracer_both_hear_a_traced_supervisor() -> None:
    tracer, events = _collector()
    async with Supervisor("t", tracer=tracer) as sup:
        ref = sup.spawn(Counter, name="c", capacity=4)
        with tracer, capture_trace() as captured:
            await ref.ask(Get())
        assert not tracing.enabled
    assert len(events) == len(captured) == 3
