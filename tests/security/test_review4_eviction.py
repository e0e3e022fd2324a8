"""Review 4: an agent flooding its own socket with empty connections evicted a sibling's large request.

The run's connection budget is shared by every agent's socket, and a newcomer over it evicted the
connection accepted first of those still waiting for their request (`ConnectionBudget.evict_oldest`).
The listener's module says a wfa client "is read within milliseconds and is never the oldest one
waiting": true of a line that fits the socket's buffer, which the run finds whole as it accepts. A
request larger than that (an answer or a tool's input of a few hundred KiB, well under
MAX_REQUEST_BYTES) is still arriving while the attacker's connections come in, and once
`limit` newer ones have been accepted it is the oldest waiting: it is closed, refused
`internal-error`, however fast its bytes were coming. The attacker needs no access to the
sibling's socket: its own, whose admission is checked only after a request is read, is enough.

Real sockets, the run's own `serve` on two sockets sharing one budget, on either backend; the
attacker is another process connecting in a loop, sending nothing, and holding more connections
than the listen backlog (a flood that closes them sooner only queues dead ones, read at once);
the sibling is a process of its own, as wfa is. Measured here: 8 to 38 of 60 calls evicted;
ranking the stalls by their bytes' arrival rate still lost 1 in 60 (a sibling's client waits
on the run's reads, so it looks slow when the flood keeps the run busy).

Now the choice is `listener.choose_eviction`, a pure decision tested below over every waiting
set hypothesis makes: a connection not making progress (nothing sent, or a line's worth at
once and then nothing) is evicted before any that is, the first accepted first, and one whose
bytes sit in its socket unread is spared while any other waits. So no flood of empty
connections can evict a request that is arriving, whatever the timing, and the real-socket
test is strict. Ranking every connection that had sent nothing first (this fix's first form)
evicted a wfa client accepted a moment before its line came, under a flood that sends half a
line at once and stops (tests/engine/test_exhaustion.py failed in a CI run): such a flood is
now older than the client, and goes first.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentswf.launcher.listener import (
    MAX_EVICTION_PEEKS,
    RECENT_PROGRESS_SECONDS,
    ConnectionBudget,
    Slot,
    bind,
    choose_eviction,
    eviction_rank,
    making_progress,
    serve,
)
from agentswf.wire import Request, Response, refused

# Connects to the socket over and over, never sending, keeping the newest HELD open.
FLOOD = """
import resource, socket, sys, time
path, held = sys.argv[1], int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, held + 64)), hard))
open_ = []
print("flooding", flush=True)
end = time.monotonic() + 60
while time.monotonic() < end:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError:
        s.close()
        time.sleep(0.001)
        continue
    open_.append(s)
    if len(open_) > held:
        open_.pop(0).close()
"""

CALLS = 60
INPUT_BYTES = 900_000  # a tool's input under MAX_STDIN_BYTES, a few times a unix socket's buffer

# The sibling: a process of its own (as wfa is) making CALLS large tool calls, one answer a line.
CALLER = f"""
import json, sys
from agentswf.launcher import client
fields = client.build_request(["tool", "lint"], lambda: json.dumps({{"text": "x" * {INPUT_BYTES}}}))
for _ in range({CALLS}):
    try:
        answer = client.call(sys.argv[1], fields)
    except client.Unreached as error:  # closed mid-send: its refusal was not in yet
        answer = {{"stderr": f"unreached, waited longest: {{error}}"}}
    print(json.dumps(answer), flush=True)
"""
HELD = 6000  # the flood's connections held open: more than the listen backlog (4096), so those accepted are live


async def handled(request: Request) -> Response:
    return refused("tool", "no-operation", "the handler ran")


@pytest.mark.anyio
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the flood's rate is Linux's")
async def test_a_flood_on_a_siblings_own_socket_doesnt_evict_a_large_request(tmp_path: Path) -> None:
    budget = ConnectionBudget()
    mine, theirs = tmp_path / "a.sock", tmp_path / "b.sock"
    async with anyio.create_task_group() as group:
        group.start_soon(serve, bind(mine), handled, budget)
        group.start_soon(serve, bind(theirs), handled, budget)
        flood = subprocess.Popen([sys.executable, "-c", FLOOD, str(theirs), str(HELD)], stdout=subprocess.PIPE)
        try:
            assert flood.stdout is not None
            await anyio.to_thread.run_sync(flood.stdout.readline)
            with anyio.fail_after(30):
                while budget.evicted < 20 * budget.limit:  # the flood is under way: stalls evict stalls
                    await anyio.sleep(0.01)
            caller = await anyio.run_process([sys.executable, "-c", CALLER, str(mine)], check=False)
            answers = [json.loads(line) for line in caller.stdout.splitlines()]
            assert len(answers) == CALLS, caller.stderr.decode()
        finally:
            flood.kill()
            flood.wait()
        group.cancel_scope.cancel()
    evicted = [answer for answer in answers if "the handler ran" not in answer["stderr"]]
    assert not evicted, f"{len(evicted)} of {CALLS} large requests evicted: {evicted[0]['stderr']}"
    assert all("the handler ran" in answer["stderr"] for answer in answers), answers


NOW = 1000.0
MAX_HELD = 16 * 1024 * 1024


def _slot(accepted: int, held: int, idle: float, reads: int = 1) -> Slot:
    """A waiting connection, its socket never touched: `arriving` is given to the choice."""
    slot = Slot(None, accepted)  # type: ignore[arg-type]
    slot.held, slot.reads, slot.progressed_at = held, reads if held else 0, NOW - idle
    return slot


def _progressing(slot: Slot) -> bool:
    return making_progress(slot.held, slot.reads, slot.progressed_at, NOW)


# A waiting set: each connection's bytes so far (0 for most: a flood), in how many reads,
# seconds since its last bytes (either side of RECENT_PROGRESS_SECONDS), and whether bytes
# sit in its socket unread.
WAITING = st.lists(
    st.tuples(
        st.sampled_from([0, 0, 1, 10, 65536, 900_000]),
        st.sampled_from([1, 2, 7]),
        st.sampled_from([0.0, 0.001, RECENT_PROGRESS_SECONDS / 2, RECENT_PROGRESS_SECONDS * 2, 4.0]),
        st.booleans(),
    ),
    max_size=40,
)


def _choice(waiting: list[tuple[int, int, float, bool]]) -> tuple[list[Slot], set[Slot], Slot | None]:
    slots = [_slot(n, held, idle, reads) for n, (held, reads, idle, _) in enumerate(waiting)]
    arriving = {slot for slot, (_, _, _, pending) in zip(slots, waiting) if pending}
    return slots, arriving, choose_eviction(slots, NOW, arriving.__contains__)


def _rank(slot: Slot) -> tuple[int, int, int]:
    return eviction_rank(slot.held, slot.reads, slot.progressed_at, slot.accepted, NOW)


@given(WAITING)
def test_a_connection_not_making_progress_never_evicts_one_that_is(waiting: list[tuple[int, int, float, bool]]) -> None:
    slots, arriving, chosen = _choice(waiting)
    assert (chosen is None) == (not slots)
    if chosen is None:
        return
    asked = sorted(slots, key=_rank)[:MAX_EVICTION_PEEKS]  # the least along, the ones the choice may ask
    idle = [slot for slot in asked if slot not in arriving] or slots  # every one asked arriving: the least along goes
    assert chosen in idle, "a connection whose bytes are arriving is evicted while another asked waits idle"
    stalled = [slot for slot in idle if not _progressing(slot)]
    if stalled:  # a flood of empty or stalled connections evicts only its own, the first accepted first
        assert chosen is min(stalled, key=lambda slot: slot.accepted)
        return
    assert chosen.held == min(slot.held for slot in idle)  # every one sending: the one least along


@given(st.integers(min_value=1, max_value=200), st.sampled_from([1, 18, 400]))
def test_a_newcomer_whose_line_lags_its_connect_outlasts_a_flood_of_stalled_lines(flood: int, sent: int) -> None:
    """A flood that sends part of a line at once and stops, accepted before a wfa client whose
    line is a moment behind its connect (nothing read of it yet): each later newcomer evicts
    one of the flood, never the client, until every connection of the flood older than it is
    gone (by then its line is in; tests/engine/test_exhaustion.py runs it for real)."""
    client = _slot(flood, 0, 0.0)
    waiting = [_slot(n, sent, 0.0) for n in range(flood)] + [client]
    for newcomer in range(flood + 1, 2 * flood + 1):
        chosen = choose_eviction(waiting, NOW, lambda slot: False)
        assert chosen is not None and chosen is not client
        waiting.remove(chosen)
        waiting.append(_slot(newcomer, sent, 0.0))


@given(st.integers(min_value=1, max_value=200), st.integers(min_value=1, max_value=MAX_HELD), st.floats(0, 0.999))
def test_a_request_arriving_outlasts_any_flood_of_empty_connections(flood: int, held: int, idle: float) -> None:
    """The sibling's large request, however long since its last bytes were read (under
    RECENT_PROGRESS_SECONDS, or its bytes sit unread), against a flood's empty connections
    accepted before and after it: each newcomer evicts one of the flood, never the request."""
    request = _slot(flood // 2, held, idle, reads=2)
    waiting = [_slot(n if n < flood // 2 else n + 1, 0, 0.0) for n in range(flood)] + [request]
    for newcomer in range(flood + 1, 3 * flood + 1):
        chosen = choose_eviction(waiting, NOW, lambda slot: False)
        assert chosen is not None and chosen is not request
        waiting.remove(chosen)
        waiting.append(_slot(newcomer, 0, 0.0))


def _asked(slots: list[Slot], arriving: Callable[[Slot], bool]) -> tuple[Slot | None, int]:
    """The choice over `slots`, and how many sockets it asked whether bytes are arriving."""
    asked: list[Slot] = []

    def counted(slot: Slot) -> bool:
        asked.append(slot)
        return arriving(slot)

    return choose_eviction(slots, NOW, counted), len(asked)


@given(WAITING, st.integers(min_value=0, max_value=300), st.sampled_from([0, 1, 65536]))
def test_an_eviction_asks_a_bounded_number_of_sockets(
    waiting: list[tuple[int, int, float, bool]], flood: int, held: int
) -> None:
    """Asking is a system call (`recv(MSG_PEEK)`): with a flood whose bytes are always pending
    added to any waiting set, accepted before or after it, at most MAX_EVICTION_PEEKS are asked
    an accept, and the one chosen is still the least along of those asked that isn't arriving."""
    slots = [_slot(n, h, idle, reads) for n, (h, reads, idle, _) in enumerate(waiting)]
    flooding = [_slot(len(waiting) + n if n % 2 else -n - 1, held, 0.0, reads=2) for n in range(flood)]
    pending = {slot for slot, (*_, arrives) in zip(slots, waiting) if arrives} | set(flooding)
    everyone = slots + flooding
    chosen, asked = _asked(everyone, pending.__contains__)
    assert asked <= MAX_EVICTION_PEEKS
    lowest = sorted(everyone, key=_rank)[:MAX_EVICTION_PEEKS]
    expected = next((slot for slot in lowest if slot not in pending), lowest[0] if lowest else None)
    assert chosen is expected


def test_the_sockets_an_eviction_asks_dont_grow_with_a_flood_whose_bytes_are_always_pending() -> None:
    """Every waiting connection's bytes are in its socket unread (a flood that trickles, the
    run behind): asking each one cost the run one system call per waiting connection an accept."""
    counts = []
    for n in (10, 100, 1000, 10_000):
        flood = [_slot(accepted, 1, 0.0, reads=2) for accepted in range(n)]
        chosen, asked = _asked(flood, lambda slot: True)
        assert chosen is flood[0]  # every one arriving: the least along goes
        counts.append(asked)
    assert counts == [MAX_EVICTION_PEEKS] * 4, f"sockets asked at 10, 100, 1,000 and 10,000 waiting: {counts}"
