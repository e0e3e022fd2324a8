"""A busy actor takes its queued messages in a row, with a checkpoint every `GET_BURST`: cheaper
than a scheduler round a message, and still fair to the tasks beside it; and the kernel's own
`checkpoint` is one, as anyio's is (a schedule point and a cancel point)."""

from __future__ import annotations

import itertools

import anyio
import msgspec
import pytest

from agentswf.actors import Actor, Supervisor, handler
from agentswf.actors.mailbox import GET_BURST
from agentswf.actors.wakeup import checkpoint

pytestmark = pytest.mark.anyio
QUEUED = GET_BURST * 6 + 5


class Note(msgspec.Struct):
    i: int


class Noter(Actor):
    def __init__(self, seen: list[str]) -> None:
        super().__init__()
        self.seen = seen

    @handler
    def note(self, msg: Note) -> None:
        self.seen.append("handled")


async def test_queued_messages_are_taken_in_bursts_with_the_others_let_in_between() -> None:
    seen: list[str] = []
    async with Supervisor("t") as sup:
        ref = sup.spawn(Noter, seen, capacity=QUEUED)
        for i in range(QUEUED):
            ref.tell_nowait(Note(i))
        with anyio.fail_after(5):
            while seen.count("handled") < QUEUED:
                seen.append("other task")
                await checkpoint()
    runs = [len(list(group)) for kind, group in itertools.groupby(seen) if kind == "handled"]
    # A scheduler round runs each task once, in an order trio shuffles: two bursts can meet.
    assert GET_BURST <= max(runs) <= 2 * GET_BURST  # in a row, not a scheduler round each
    assert sum(runs) == QUEUED and len(runs) >= QUEUED // (2 * GET_BURST)  # the other task ran between


async def test_the_kernels_checkpoint_is_a_schedule_point_and_a_cancel_point() -> None:
    ran: list[str] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: _append(ran))
        await checkpoint()
        await checkpoint()  # a round runs every ready task once (trio in either order)
        assert ran == ["other"]  # the other task ran at them
    with anyio.CancelScope() as scope:
        scope.cancel()
        await checkpoint()
        pytest.fail("a cancelled scope did not stop at the checkpoint")


async def _append(ran: list[str]) -> None:
    ran.append("other")
