"""The per-agent listener: one connection, one request line, one response line.

An agent's socket listens only while the agent is in a turn (`serve`'s `accepting` scope
closes it after), so an idle agent holds no descriptor; a `wfa` run then finds nobody
listening and says the turn, or the run, is over.

The socket a connection arrives on says which agent is calling; the request only says
what it asks. Every connection is answered, even one refused (a silent close would look
like a crashed run).

Exhaustion. Any process of the user can connect to any agent's socket, and every byte
from that side is hostile, so what one connection can cost the run is bounded:

- A connection takes its slot in the run's `ConnectionBudget` as it is accepted, before a
  byte is read: a slot holds at most one request (`MAX_REQUEST_BYTES`) in memory, and the
  budget (`MAX_OPEN_CONNECTIONS`, and at most `MAX_CONNECTION_FD_SHARE` of the process's
  file descriptors) leaves the run the descriptors its records and agents need. Requests
  still arriving hold at most `MAX_READING_BYTES` across the run.
- The whole request must arrive within `REQUEST_LINE_TIMEOUT_SECONDS` of the accept,
  and the answer be taken within `ANSWER_DELIVERY_TIMEOUT_SECONDS`; a trickle of bytes
  extends neither.
- Stalling buys nothing: when the budget is full (or the bytes still arriving are over
  theirs), the waiting connection whose request is least along is closed with a refusal
  naming the limit, and its slot goes to the newcomer (`eviction_rank`, `choose_eviction`):
  one that isn't making progress goes first, the one accepted first; then, every one making
  progress, the one with the fewest bytes; and of the MAX_EVICTION_PEEKS least along, one whose
  bytes are in the socket unread is spared while another waits (asking a socket is a system
  call: asking them all would cost a flood whose bytes are always pending one per waiting
  connection at every accept, quadratic in the flood). Making progress is a request arriving
  over more than one read (or a read's whole chunk at once), its last within
  `RECENT_PROGRESS_SECONDS`: one line's worth sent and stopped is not. So a flood of empty or
  stalled connections, on any agent's socket, only evicts itself: it can't close a sibling's
  large request still arriving (a tool's input bigger than the socket's buffer, read over many
  turns of the loop while the flood is accepted), however slowly the run gets to read it; nor
  a wfa client accepted after it whose line is a moment behind its connect (a flood that sends
  half a line at once and stops is older than it, and goes first). A wfa client writes its
  whole line as it connects, so a small one is read whole as it is accepted. A connection
  whose request is in (a tool call running, an answer being sent) is never evicted; only when
  every slot is one of those is a newcomer refused, unread (its first bytes are peeked at, to
  name the command refused).

  Why eviction and not a budget per agent: before the request is read the listener knows
  only whose socket was dialled, not who dialled it (the identity check needs the decoded
  request), and any process can dial any agent's socket, so a per-socket budget would let
  agent b starve agent a by stalling on a's socket. Eviction needs no identity, and no
  split of the stalls across sockets or processes gets around it.
- `accept` failing for want of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) is
  survived: the least along of the waiting connections is closed, its descriptor being the first to
  give back; the listener waits (from `ACCEPT_RETRY_MIN_SECONDS`, doubling up to
  `ACCEPT_RETRY_MAX_SECONDS`) and tries again, answering the open connections meanwhile.
"""

from __future__ import annotations

import asyncio
import errno
import heapq
import os
import resource
import socket
from collections.abc import Awaitable, Callable, Iterable
from contextlib import suppress
from pathlib import Path

import anyio
import anyio.lowlevel
import sniffio
import structlog
from anyio.abc import SocketListener, SocketStream

from ..actors import backend
from ..actors.wakeup import Wakeup, checkpoint
from ..wire import (
    ANSWER_DELIVERY_TIMEOUT_SECONDS,
    COMMANDS,
    MAX_OPEN_CONNECTIONS,
    MAX_REQUEST_BYTES,
    REQUEST_LINE_TIMEOUT_SECONDS,
    Code,
    Request,
    Response,
    decode_request,
    encode_response,
    refused,
)
from ..wire.framing import COMMAND_HINT_BYTES
from .peer import NOBODY, Peer, identify

Handler = Callable[[Request], Awaitable[Response]]
Admit = Callable[[Peer], Awaitable[str | None]]
"""Given the connecting process, as read when its connection was taken: None to admit it, or
why not (awaited, so that a refusal can be recorded before it is answered)."""
_log = structlog.get_logger("agentswf.launcher")
_READ_CHUNK_BYTES = 65536
MAX_CONNECTION_FD_SHARE = 0.25  # of the process's file-descriptor limit, what connections may hold
COMMAND_PEEK_SECONDS = 0.1  # how long a refusal before reading waits for the first bytes, to name the command
ACCEPT_RETRY_MIN_SECONDS = 0.01  # after accept fails for want of descriptors or memory
ACCEPT_RETRY_MAX_SECONDS = 1.0
MAX_READING_BYTES = 16 * 1024 * 1024  # across the run, of requests still arriving
RECENT_PROGRESS_SECONDS = 1.0  # a waiting connection that received bytes this recently is making progress
MAX_EVICTION_PEEKS = 8  # waiting connections an eviction asks at most whether bytes are in their socket unread
_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def connection_limit(cap: int = MAX_OPEN_CONNECTIONS) -> int:
    """`cap`, or fewer where the process's file-descriptor limit is low."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return cap
    return max(1, min(cap, int(soft * MAX_CONNECTION_FD_SHARE)))


def raw_socket(stream: SocketStream) -> socket.socket:
    """`stream`'s socket. Looked up once a connection, and as the property anyio's socket
    streams all provide it by (`_SocketProvider._raw_socket`, what their `extra` reads):
    `stream.extra(SocketAttribute.raw_socket)` builds the whole attribute table and reads
    the peer's address each time."""
    sock: socket.socket = stream._raw_socket
    return sock


class Slot:
    """One connection's place in a budget; `evicted` says why it was closed to make room.
    While it waits for its request, `held` is the bytes of it received so far, in `reads`
    reads, and `progressed_at` the time the last of them came, on the loop's clock."""

    __slots__ = ("sock", "accepted", "evicted", "held", "reads", "progressed_at")

    def __init__(self, sock: socket.socket, accepted: int) -> None:
        self.sock, self.accepted = sock, accepted
        self.evicted: str | None = None
        self.held = 0
        self.reads = 0
        self.progressed_at = 0.0


def making_progress(held: int, reads: int, progressed_at: float, now: float) -> bool:
    """Whether a waiting connection's request is still arriving at `now`: bytes over more than
    one read, or a read's whole chunk (more is coming), the last within RECENT_PROGRESS_SECONDS.
    A line's worth sent at the connect and stopped is not: that is a stall, not a request."""
    return (reads >= 2 or held >= _READ_CHUNK_BYTES) and now - progressed_at <= RECENT_PROGRESS_SECONDS


def eviction_rank(held: int, reads: int, progressed_at: float, accepted: int, now: float) -> tuple[int, int, int]:
    """Where a waiting connection stands for eviction at `now`, the lowest evicted first: one
    not `making_progress`, the first accepted first (a newcomer whose line is a moment behind
    its connect is the last of them); then, every one making progress, the one with the fewest
    bytes. A connection's bytes over time are what an attacker pays for: no number of
    connections that send nothing, or a little and stop, outranks one still sending."""
    if not making_progress(held, reads, progressed_at, now):
        return (0, 0, accepted)
    return (1, held, accepted)


def ranked_at(now: float) -> Callable[[Slot], tuple[int, int, int]]:
    """`eviction_rank` of a waiting connection at `now`, as a sort key."""

    def rank(slot: Slot) -> tuple[int, int, int]:
        return eviction_rank(slot.held, slot.reads, slot.progressed_at, slot.accepted, now)

    return rank


def choose_eviction(waiting: Iterable[Slot], now: float, arriving: Callable[[Slot], bool]) -> Slot | None:
    """The connection of `waiting` to evict at `now`: of the MAX_EVICTION_PEEKS lowest by
    `eviction_rank`, the lowest whose bytes aren't `arriving` (in its socket, not read yet: the
    run, not the client, is behind), or the lowest of all where every one of those is; None
    where none waits. `arriving` is a system call, asked of the lowest first (found by `min`: a
    flood of stalls costs one pass and one call), and of the next few only where it says yes,
    so a flood whose bytes are always pending costs an accept a bounded number of calls, not
    one per waiting connection."""
    candidates = list(waiting)
    rank = ranked_at(now)
    lowest = min(candidates, key=rank, default=None)
    if lowest is None or not arriving(lowest):
        return lowest
    next_lowest = heapq.nsmallest(MAX_EVICTION_PEEKS, candidates, key=rank)
    return next((slot for slot in next_lowest if slot is not lowest and not arriving(slot)), lowest)


def bytes_arriving(slot: Slot) -> bool:
    """Whether `slot`'s socket has bytes not read yet: its request is coming. Its end alone
    (the client closed, sending nothing more) is not: that connection is over."""
    try:
        return bool(slot.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except OSError:  # none yet (BlockingIOError), or reset: nothing is coming
        return False


class ConnectionBudget:
    """The connections open across a whole run, against a fixed limit, and which of them
    are waiting for their request: those are the ones a newcomer may evict (`choose_eviction`)."""

    def __init__(self, limit: int | None = None, name: str = "MAX_OPEN_CONNECTIONS") -> None:
        self.limit = connection_limit() if limit is None else limit
        self.name = name
        self.open = 0
        self.refused = 0
        self.evicted = 0
        self.accepts = 0  # connections taken or accepted so far: their order, for eviction
        self.peeking = 0  # refusals waiting a moment for the command to refuse
        self.reading_bytes = 0  # held for the requests still arriving
        self._waiting: set[Slot] = set()  # the connections waiting for their request, the evictable ones

    def statistics(self) -> dict[str, int]:
        return {
            "open": self.open,
            "limit": self.limit,
            "refused": self.refused,
            "evicted": self.evicted,
            "waiting": len(self._waiting),
            "reading_bytes": self.reading_bytes,
        }

    def take(self, sock: socket.socket, accepted: int | None = None) -> Slot | None:
        """A slot for a connection just accepted: a free one, or else the one of the
        waiting connection whose request is least along; None if every slot is busy."""
        why = f"the run has {self.limit} connections open, its limit ({self.name})"
        if self.open >= self.limit and not self.evict(why):
            self.refused += 1
            return None
        self.open += 1
        self.accepts += 1
        return Slot(sock, self.accepts if accepted is None else accepted)

    def accepted(self) -> int:
        """A connection's place in the order of accepts, taken as it is accepted: its task may
        start after a later one's (trio starts a batch of tasks in any order)."""
        self.accepts += 1
        return self.accepts

    def evict(self, why: str, sparing: Slot | None = None) -> bool:
        """End the wait of the connection whose request is least along (`choose_eviction`;
        never `sparing`), because `why`; False if none is waiting. Its slot and bytes are
        free at once; its own task answers and closes it."""
        others = self._waiting if sparing is None else (slot for slot in self._waiting if slot is not sparing)
        slot = choose_eviction(others, backend.current_time(), bytes_arriving)
        if slot is None:
            return False
        self._waiting.discard(slot)
        self.reading_bytes -= slot.held
        slot.evicted = why
        self.open -= 1
        self.evicted += 1
        try:  # the read ends as at the client's EOF
            slot.sock.shutdown(socket.SHUT_RD)
        except OSError:
            pass  # the client is gone already: its read is ending anyway
        return True

    def release(self, slot: Slot) -> None:
        if not slot.evicted:
            self.open -= 1

    def wait_for(self, slot: Slot) -> None:
        """`slot`'s connection waits for its request from now: evictable until `received`."""
        self._waiting.add(slot)

    def received(self, slot: Slot) -> None:
        """`slot`'s request is in (or its wait is over): no longer evictable, its bytes given back."""
        if slot in self._waiting:
            self._waiting.discard(slot)
            self.reading_bytes -= slot.held

    def hold(self, slot: Slot, size: int) -> None:
        """`slot` holds `size` more bytes of its request, received now; over MAX_READING_BYTES
        across the run, the least along of the others waiting are evicted."""
        if slot not in self._waiting:
            return
        slot.held += size
        slot.reads += 1
        slot.progressed_at = backend.current_time()
        self.reading_bytes += size
        if self.reading_bytes > MAX_READING_BYTES:
            why = f"the run holds {MAX_READING_BYTES} bytes of requests still arriving, its limit (MAX_READING_BYTES)"
            while self.reading_bytes > MAX_READING_BYTES and self.evict(why, sparing=slot):
                pass

    def full_text(self) -> str:
        return (
            f"the run has {self.limit} connections open, its limit ({self.name}), each being answered; "
            "nothing was done. Run the command again in a moment."
        )


def _read_ready(buffer: bytearray, limit: int, budget: ConnectionBudget, slot: Slot) -> bool:
    """What has arrived on `slot`'s socket into `buffer`; True once the request is over (the
    client half-closed or went away, or `buffer` is one chunk past `limit`), False when the
    rest is still to come."""
    sock = slot.sock
    while len(buffer) <= limit:
        try:
            chunk = sock.recv(_READ_CHUNK_BYTES)
        except BlockingIOError:
            return False
        except OSError:  # reset by the client
            return True
        if not chunk:
            return True
        buffer += chunk
        budget.hold(slot, len(chunk))
    return True


async def _read_into(buffer: bytearray, limit: int, budget: ConnectionBudget, slot: Slot) -> None:
    """Bytes into `buffer` until the client half-closes, stopping one chunk past `limit`.

    Read from the raw socket when it is readable, not with `stream.receive`: on asyncio a
    receive cancelled (by the deadline, or the run stopping) just as its socket turns
    readable raises in the event loop (anyio's raw-socket streams), and a hostile client
    can time that."""
    while not _read_ready(buffer, limit, budget, slot):
        await anyio.wait_readable(slot.sock)


async def receive(budget: ConnectionBudget, slot: Slot, limit: int) -> tuple[bytes, str | None]:
    """What came of the request on `slot`'s connection, and, where it didn't come whole in
    time, the refusal's text. A wfa client has written its whole line and half-closed by the
    time it is accepted, as a rule, or a turn of the loop later (its connect is what woke the
    run): that is read at once, with no deadline to keep and no wait to arm."""
    buffer = bytearray()
    budget.wait_for(slot)
    try:
        whole = _read_ready(buffer, limit, budget, slot)
        if not whole:
            await checkpoint()
            whole = _read_ready(buffer, limit, budget, slot)
        if whole:
            timed_out = False
        else:
            with anyio.move_on_after(REQUEST_LINE_TIMEOUT_SECONDS) as scope:
                await _read_into(buffer, limit, budget, slot)
            timed_out = scope.cancelled_caught
    finally:
        budget.received(slot)
    data = bytes(buffer)
    if slot.evicted:
        return data, (
            f"{slot.evicted}, and this one's request was the least along (nothing sent, or nothing for a while), "
            "so it was closed to make room; "
            "nothing was done. Run the command again."
        )
    if timed_out:
        return data, (
            f"the whole request did not arrive within {REQUEST_LINE_TIMEOUT_SECONDS:g} seconds of connecting "
            "(REQUEST_LINE_TIMEOUT_SECONDS); nothing was done."
        )
    return data, None


def _sent(sock: socket.socket, data: memoryview) -> int | None:
    """How much of `data` the socket took now; None once the client is gone."""
    try:
        return sock.send(data, socket.MSG_DONTWAIT)
    except BlockingIOError:
        return 0
    except OSError:
        return None


async def deliver(sock: socket.socket, data: bytes) -> None:
    """Send `data` on the connection's socket, giving up after ANSWER_DELIVERY_TIMEOUT_SECONDS.
    An answer is a line that fits the socket's buffer, as a rule: sent at once, it needs no
    wait and no deadline. The rest, if any, is sent as the socket takes it (a raw socket's
    wait, as `_read_into` reads, not a stream's)."""
    rest = memoryview(data)
    sent = _sent(sock, rest)
    if sent is not None and sent < len(rest):
        with anyio.move_on_after(ANSWER_DELIVERY_TIMEOUT_SECONDS) as scope:
            while sent is not None and sent < len(rest):
                rest = rest[sent:]
                await anyio.wait_writable(sock)
                sent = _sent(sock, rest)
        if scope.cancelled_caught:
            _log.debug("a client did not take its answer", timeout_seconds=ANSWER_DELIVERY_TIMEOUT_SECONDS)
            return
    if sent is None:  # debug, not warning: a hostile client can make one of these per connection
        _log.debug("a client went away before its answer")


def command_hint(head: bytes) -> str:
    """The command the first bytes of a request name ("result" if none)."""
    head = head[:COMMAND_HINT_BYTES]
    for command in COMMANDS:
        if b'"command":"' + command.encode() + b'"' in head:
            return command
    return "result"


async def _peeked_command(sock: socket.socket, budget: ConnectionBudget) -> str:
    """The command a connection refused unread names in what has arrived, left unread.

    wfa writes its line as it connects, but the run may accept it a moment before: it waits
    up to COMMAND_PEEK_SECONDS for a first byte, while fewer refusals than the budget's limit
    are waiting so (so they hold at most that many more descriptors), then decides."""

    def peek() -> bytes:
        try:
            return sock.recv(COMMAND_HINT_BYTES, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except OSError:
            return b""

    head = peek()
    if not head and budget.peeking < budget.limit:
        budget.peeking += 1
        try:
            with anyio.move_on_after(COMMAND_PEEK_SECONDS):
                await anyio.wait_readable(sock)
        finally:
            budget.peeking -= 1
        head = peek()
    return command_hint(head)


def _command_of(request: Request | Response) -> str:
    return "result" if isinstance(request, Response) else type(request).__struct_config__.tag  # type: ignore[return-value]


def identified(sock: socket.socket) -> Peer | OSError:
    """Who connected `sock` (`identify`), read as its connection is taken, before a byte of it
    is read or anything awaited: what its request is later admitted by. Out of descriptors to
    read it with, the error, for the request to be answered `internal-error` once it is in."""
    try:
        return identify(sock)
    except OSError as error:
        return error


async def _respond(request: Request | Response, peer: Peer | OSError, handle: Handler, admit: Admit | None) -> Response:
    if isinstance(request, Response):
        return request
    try:
        if admit is not None:
            if isinstance(peer, OSError):
                raise peer  # as any failure to check it: internal-error, try again
            refusal = await admit(peer)
            if refusal is not None:
                return refused(_command_of(request), "wrong-agent", refusal)
        return await handle(request)
    except Exception as error:  # the agent must get an answer, never a dropped line
        try:
            _log.exception("wfa request failed", command=_command_of(request))
        except OSError:  # out of descriptors, the log's renderer may fail to load what it needs (rich)
            pass
        return refused(
            _command_of(request), "internal-error", f"the run could not answer ({type(error).__name__}); try again later."
        )


async def _answer(
    sock: socket.socket, accepted: int, handle: Handler, budget: ConnectionBudget, admit: Admit | None
) -> None:
    """One connection, on its raw socket, closed at the end: no stream is made for it (on trio
    a stream's accept, close and wrappers cost as much again as the rest of the exchange), and
    nothing but this task ever waits on it, so it is closed with no one to tell."""
    try:
        slot = budget.take(sock, accepted)
        if slot is None:
            response = refused(await _peeked_command(sock, budget), "internal-error", budget.full_text())
            await deliver(sock, encode_response(response))
            return
        try:
            peer = identified(sock) if admit is not None else NOBODY
            data, refusal = await receive(budget, slot, MAX_REQUEST_BYTES)
            if refusal is None:
                response = await _respond(decode_request(data), peer, handle, admit)
            else:
                code: Code = "internal-error" if slot.evicted else "invalid-request"
                response = refused(command_hint(data), code, refusal)
            await deliver(sock, encode_response(response))
        finally:
            budget.release(slot)
    finally:
        sock.close()


def bind(socket_path: Path) -> socket.socket:
    """A socket listening at `socket_path` (a stale one there replaced), readable and writable
    by its owner only: bound here, at once, with no worker thread (anyio's own listener binds
    in one, on the pool user code shares), so connections queue from now on."""
    with suppress(FileNotFoundError):
        os.unlink(socket_path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.bind(str(socket_path))
        os.chmod(socket_path, 0o600)
        sock.listen(socket.SOMAXCONN)
    except BaseException:
        sock.close()
        raise
    return sock


async def listen(socket_path: Path) -> SocketListener:
    """Listen at `socket_path` (see `bind`), as an anyio listener (the operator socket's)."""
    return await SocketListener.from_socket(bind(socket_path))


def _out_of_resources(error: BaseException) -> bool:
    cause = error if isinstance(error, OSError) else error.__cause__
    return isinstance(cause, OSError) and cause.errno in _OUT_OF_RESOURCES


async def _accept_failed(error: BaseException, budget: ConnectionBudget, retry: float) -> float:
    """An accept failed with `error`: raised again unless for want of descriptors or memory,
    when the least along of the waiting connections is closed and the next try waits `retry` seconds;
    the wait after that."""
    if not _out_of_resources(error):
        raise error
    evicted = budget.evict("the run is out of file descriptors")
    if retry == ACCEPT_RETRY_MIN_SECONDS:  # once a spell, not once a retry
        _log.warning("accept failed; retrying until it works", error=str(error.__cause__ or error), evicted=evicted)
    await anyio.sleep(retry)
    return min(retry * 2, ACCEPT_RETRY_MAX_SECONDS)


async def accept(listener: SocketListener, budget: ConnectionBudget) -> SocketStream:
    """The next connection to the anyio `listener`, waiting out an accept that fails for want
    of descriptors or memory (closing the least along of the waiting connections each time)."""
    retry = ACCEPT_RETRY_MIN_SECONDS
    while True:
        try:
            return await listener.accept()
        except (OSError, anyio.BrokenResourceError) as error:
            retry = await _accept_failed(error, budget, retry)


class _Acceptor:
    """Connections to a listening socket on asyncio, accepted by a reader that stays
    registered with the selector across waits: `anyio.wait_readable` adds and removes it for
    every wait, and an agent's listener waits once a call (it is idle between them), which
    costs more than the accept. The reader accepts for the task waiting; with no task waiting
    it is removed (the selector is level-triggered: it would call back on every turn of the
    loop while a connection is queued)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._loop = asyncio.get_running_loop()
        self._fd = sock.fileno()
        self._waiter: asyncio.Future[socket.socket] | None = None
        self._registered = False

    async def accept(self) -> socket.socket:
        """The next connection (OSError as `accept` raises it)."""
        self._waiter = waiter = self._loop.create_future()
        if not self._registered:
            self._loop.add_reader(self._fd, self._ready)
            self._registered = True
        try:
            return await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                waiter.result().close()  # accepted just as this wait was cancelled: given back
            raise
        finally:
            self._waiter = None

    def _ready(self) -> None:
        waiter = self._waiter
        if waiter is None or waiter.done():
            self.close()
            return
        try:
            conn, _ = self._sock.accept()
        except BlockingIOError:  # taken already, by the task's own first try
            return
        except OSError as error:
            waiter.set_exception(error)
            return
        waiter.set_result(conn)

    def close(self) -> None:
        if self._registered:
            self._registered = False
            self._loop.remove_reader(self._fd)


def acceptor(sock: socket.socket) -> _Acceptor | None:
    """An `_Acceptor` of `sock` on asyncio; None where `anyio.wait_readable` waits as cheaply (trio)."""
    return _Acceptor(sock) if sniffio.current_async_library() == "asyncio" else None


async def _next_connection(listener: socket.socket, waiting: _Acceptor | None) -> socket.socket:
    """One connection, waited for only when none is queued (as the client's connect has
    woken the run, one usually is); OSError as `accept` raises it."""
    while True:
        try:
            return listener.accept()[0]
        except BlockingIOError:
            if waiting is not None:
                return await waiting.accept()
            await anyio.wait_readable(listener)


async def accept_raw(listener: socket.socket, budget: ConnectionBudget, waiting: _Acceptor | None = None) -> socket.socket:
    """The next connection to the raw, non-blocking `listener` (through `waiting` where it
    waits), as `accept` waits for one; its socket is non-blocking."""
    retry = ACCEPT_RETRY_MIN_SECONDS
    while True:
        try:
            conn = await _next_connection(listener, waiting)
        except OSError as error:
            retry = await _accept_failed(error, budget, retry)
            continue
        conn.setblocking(False)
        return conn


MAX_ACCEPTS_IN_A_ROW = 16  # connections accepted at most between two yields of the accepting task
MAX_IDLE_ANSWERERS = 2  # answering tasks of one listener kept waiting for its next connection


class _Answerers:
    """The tasks answering one listener's connections, kept between connections: a task handed
    the next connection costs one wakeup, where a new task costs its start (anyio's task
    handle, cancel scope and event, and the backend's task) on every call of an agent that
    calls in turn. A connection finding no task idle gets a new one; at most
    MAX_IDLE_ANSWERERS wait for more, the rest end with their connection."""

    def __init__(
        self, group: backend.Tasks, handle: Handler, budget: ConnectionBudget, admit: Admit | None
    ) -> None:
        self._group, self._handle, self._budget, self._admit = group, handle, budget, admit
        self._idle: list[_Idle] = []
        self.closed = False

    def hand(self, sock: socket.socket, accepted: int) -> None:
        """Answer `sock` in an idle task, or else in a new one."""
        if self._idle:
            idle = self._idle.pop()
            idle.conn = (sock, accepted)
            idle.woken.set()
        else:
            self._group.start_soon(self._run, sock, accepted)

    def close(self) -> None:
        """No connection comes after these: the idle tasks end."""
        self.closed = True
        while self._idle:
            self._idle.pop().woken.set()

    async def _run(self, sock: socket.socket, accepted: int) -> None:
        conn: tuple[socket.socket, int] | None = (sock, accepted)
        while conn is not None:
            await _answer(conn[0], conn[1], self._handle, self._budget, self._admit)
            if self.closed or len(self._idle) >= MAX_IDLE_ANSWERERS:
                return
            idle = _Idle()
            self._idle.append(idle)
            try:
                await idle.woken.wait()
            except BaseException:
                if idle in self._idle:
                    self._idle.remove(idle)
                elif idle.conn is not None:  # handed a connection as this task was cancelled
                    idle.conn[0].close()
                raise
            conn = idle.conn


class _Idle:
    """An answering task waiting for a connection: `conn` is set as `woken` is (None: end)."""

    __slots__ = ("woken", "conn")

    def __init__(self) -> None:
        self.woken = Wakeup()
        self.conn: tuple[socket.socket, int] | None = None


async def serve(
    listener: socket.socket,
    handle: Handler,
    budget: ConnectionBudget,
    admit: Admit | None = None,
    accepting: anyio.CancelScope | None = None,
) -> None:
    """Answer each connection to the raw, non-blocking `listener` until cancelled; `handle`
    answers each request that `admit` lets through (every request, without one). The
    listener is closed as this returns; cancelling `accepting` closes it at once (its
    descriptor is given back) and returns once the connections already accepted are answered.
    An accept yields only when it waits, so a burst of connections is taken
    MAX_ACCEPTS_IN_A_ROW at a time between the other tasks' turns."""
    in_a_row = 0
    waiting = acceptor(listener)
    async with backend.task_group() as connections:
        answerers = _Answerers(connections, handle, budget, admit)
        try:
            with accepting or backend.cancel_scope():
                while True:
                    sock = await accept_raw(listener, budget, waiting)
                    answerers.hand(sock, budget.accepted())
                    in_a_row += 1
                    if in_a_row >= MAX_ACCEPTS_IN_A_ROW:
                        in_a_row = 0
                        await anyio.lowlevel.checkpoint()
        finally:
            answerers.close()
            if waiting is not None:
                waiting.close()
            anyio.notify_closing(listener)
            listener.close()
