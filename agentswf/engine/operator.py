"""The run's operator socket (its side: what it says is operator_wire.py): how `awf approve`, `awf reject`, `awf inbox`, `awf send`,
`awf reply`, `awf status` and `awf stop` reach a live run.

One socket per run, beside the agents' sockets, answering one JSON line with one JSON
line. Its path is in the run's record (run.json `control`), so a person finds it by
run id. A process of any agent's live attempt is refused (`admission.operator_admit`):
the approval a person gives must not be an agent's.

Its connections are bounded as an agent's are (see `launcher.listener`), with a budget of
their own, `MAX_OPERATOR_CONNECTIONS`, so nothing at the agents' sockets can keep a person
out, nor this socket the agents: the request must arrive within
`REQUEST_LINE_TIMEOUT_SECONDS`, a stalled connection is the first evicted, and a request
is answered within `OPERATOR_TIMEOUT_SECONDS`, plus its own wait for `awf inbox --wait` (or for
a call to approve, `Pending(wait_ms)`), which is at most `MAX_INBOX_WAIT_SECONDS`.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import msgspec
import structlog
from anyio.abc import SocketListener, SocketStream

from ..actors import ActorRef
from ..harnesses.said import Said
from ..launcher.listener import Admit, ConnectionBudget, accept, deliver, identified, raw_socket, receive
from ..launcher.peer import NOBODY, Peer
from ..wire.nesting import too_deep
from .mail.switchboard import Inbox, Participants, Receive, Standing
from .mail.words import Post, Posted
from .operator_wire import (
    MAX_INBOX_WAIT_SECONDS,
    NOT_A_PARTICIPANT,
    OPERATOR_TIMEOUT_SECONDS,
    Approve,
    OperatorRequest,
    OperatorResponse,
    Pending,
    PostAs,
    ReadInbox,
    Status,
    Stop,
)
from .record.lines import ApprovalDecision, ApprovalRequest
from .rules import Refusal
from .tools.approvals import AwaitPending, Decide, ListPending

_log = structlog.get_logger("agentswf.operator")
MAX_OPERATOR_REQUEST_BYTES = 64 * 1024
MAX_OPERATOR_CONNECTIONS = 16  # open at once on the operator socket; it has no share in the agents'


@dataclass(frozen=True, slots=True)
class RunControl:
    """What the operator socket reads of the run beyond the desk and the board, and its stop.

    Read between two messages on the run's one event loop, as `Standings` is.
    """

    agents: Callable[[], Collection[str]]  # the keys of the open agents
    in_turn: Callable[[], Mapping[str, bool]]  # agent -> whether it is in a turn (working, or awaiting a reply)
    stop: Callable[[str], bool]  # False when the run is already stopping
    tools: Callable[[], Mapping[str, list[str]]] = dict  # agent -> the tools its calls run now (handlers running)
    said: Callable[[], Mapping[str, Said | None]] = dict  # agent -> its latest attempt's output (harnesses/said.py)


_decoder = msgspec.json.Decoder(OperatorRequest)


async def _handle(
    request: OperatorRequest, desk: ActorRef, board: ActorRef, control: RunControl | None
) -> OperatorResponse:
    if isinstance(request, Status | Stop):
        if control is None:
            return OperatorResponse(False, f"this run does not answer {type(request).__name__.lower()}")
        return await (_status(control, desk, board) if isinstance(request, Status) else _stop(request, control))
    if isinstance(request, ReadInbox):
        return await _inbox(request, board)
    if isinstance(request, PostAs):
        if request.key not in await board.ask(Participants()):  # a person speaks as a participant, never as an agent
            return _not_a_participant(request.key)
        answer = await board.ask(
            Post(
                sender=request.key,
                peer=request.peer,
                text=request.text,
                reply=request.reply,
                question=False,
                until=math.inf,
                in_turn=True,
            )
        )
        return posted(request, answer)
    if isinstance(request, Pending):
        pending = await _pending(request, desk)
        return OperatorResponse(True, f"{len(pending)} call(s) waiting for approval", msgspec.to_builtins(pending))
    approved = isinstance(request, Approve)
    decided = await desk.ask(Decide(request.call_id, ApprovalDecision(approved, request.reason, request.by)))
    verb = "approved" if approved else "rejected"
    if decided:
        return OperatorResponse(True, f"call {request.call_id} {verb}")
    return OperatorResponse(False, f"no call {request.call_id} is waiting for approval")


async def _pending(request: Pending, desk: ActorRef) -> list[ApprovalRequest]:
    if request.wait_ms <= 0:
        return await desk.ask(ListPending())  # type: ignore[no-any-return]
    with anyio.move_on_after(min(request.wait_ms / 1000, MAX_INBOX_WAIT_SECONDS)):
        return await desk.ask(AwaitPending(frozenset(request.known)))  # type: ignore[no-any-return]
    return await desk.ask(ListPending())  # type: ignore[no-any-return]


async def _status(control: RunControl, desk: ActorRef, board: ActorRef) -> OperatorResponse:
    in_turn, tools, said = control.in_turn(), control.tools(), control.said()
    agents = []
    for key in sorted(control.agents()):
        standing = await board.ask(Standing(key))
        agents.append(
            {
                "key": key,
                "in_turn": in_turn.get(key, False),
                "tools": tools.get(key, []),
                "owes": list(standing.owes),
                "awaits": standing.awaits,
                "awaits_until": standing.awaits_until,
                "said": _latest(said.get(key)),
            }
        )
    participants = sorted(set(await board.ask(Participants())) - {agent["key"] for agent in agents})
    pending = msgspec.to_builtins(await desk.ask(ListPending()))
    value = {"agents": agents, "participants": participants, "pending": pending}
    return OperatorResponse(True, f"{len(agents)} agent(s), {len(pending)} call(s) waiting for approval", value)


def _latest(said: Said | None) -> dict[str, Any] | None:
    """An agent's latest line of output (its agent's bytes, cut to a line) and when it said it."""
    line = said.latest_line() if said is not None else None
    return None if said is None or line is None else {"line": line, "at": said.at}


async def _stop(request: Stop, control: RunControl) -> OperatorResponse:
    reason = f"stopped by {request.by}" + (f": {request.reason}" if request.reason else "")
    if not control.stop(reason):
        return OperatorResponse(True, "the run is already stopping")
    _log.info("run stopped from its operator socket", reason=reason)
    return OperatorResponse(True, f"stopping the run ({reason}); its agents are being stopped")


async def _inbox(request: ReadInbox, board: ActorRef) -> OperatorResponse:
    if request.wait_ms > MAX_INBOX_WAIT_SECONDS * 1000:
        return OperatorResponse(
            False, f"a wait is at most {MAX_INBOX_WAIT_SECONDS:g} seconds (MAX_INBOX_WAIT_SECONDS); wait again after"
        )
    if request.key not in await board.ask(Participants()):
        return _not_a_participant(request.key)
    mail = await board.ask(Inbox(request.key))
    if not mail and request.wait_ms > 0:
        with anyio.move_on_after(request.wait_ms / 1000):
            mail = [await board.ask(Receive(request.key))]
    return OperatorResponse(True, f"{len(mail)} message(s)", msgspec.to_builtins(mail))


def posted(request: PostAs, answer: Posted | Refusal) -> OperatorResponse:
    """What a person is told of their message as a participant (on either engine): where it went, or why not."""
    if isinstance(answer, Refusal):
        told = for_a_person(answer.message, request.key)
        return OperatorResponse(False, f"refused ({answer.code}): {told}", {"code": answer.code})
    verb = "replied to" if request.reply else "sent to"
    return OperatorResponse(True, f"{verb} {request.peer}; it reads it {answer.read}")


def _not_a_participant(key: str) -> OperatorResponse:
    return OperatorResponse(
        False,
        f"{key} is not a participant of this run (awf status lists them; a workflow adds one with wf.participants.open)",
        {"code": NOT_A_PARTICIPANT},
    )


# The message rules name a command before ")" or at the end of their sentence; a key may end in ".".
_WFA_POST = re.compile(r"\bwfa (send|reply) (\S+?)(?=\)|\.?$|[,;]?\s)")
_WFA_PEERS = "wfa peers lists the peers you can message"


def for_a_person(refusal: str, key: str) -> str:
    """A refusal's next step in the words of a person's command: the message rules speak to an
    agent (`wfa send architect`); a person at `awf send … --as KEY` is told `awf send architect --as KEY`,
    quoted as a shell needs it."""
    as_key = shlex.quote(key)
    told = _WFA_POST.sub(lambda match: f"awf {match[1]} {shlex.quote(match[2])} --as {as_key}", refusal)
    return told.replace(_WFA_PEERS, "the workflow's wf.route calls say whom a participant can message")


def _encode(response: OperatorResponse) -> bytes:
    return msgspec.json.encode(response) + b"\n"


async def _respond(
    data: bytes, peer: Peer | OSError, desk: ActorRef, board: ActorRef, admit: Admit | None, control: RunControl | None
) -> OperatorResponse:
    refusal = None
    if admit is not None:
        try:
            if isinstance(peer, OSError):
                raise peer
            refusal = await admit(peer)
        except OSError as error:  # out of descriptors to look the process up with
            return OperatorResponse(False, f"the run could not check who is asking ({error.strerror}); try again")
    if refusal is not None:
        return OperatorResponse(False, f"refused (wrong-agent): {refusal}", {"code": "wrong-agent"})
    deep = too_deep(data)
    if deep is not None:
        return OperatorResponse(False, f"not an operator request: {deep}")
    try:
        request = _decoder.decode(data)
    except msgspec.DecodeError as error:
        return OperatorResponse(False, f"not an operator request: {error}")
    wait = min(request.wait_ms / 1000, MAX_INBOX_WAIT_SECONDS) if isinstance(request, ReadInbox | Pending) else 0.0
    with anyio.move_on_after(OPERATOR_TIMEOUT_SECONDS + wait):
        return await _handle(request, desk, board, control)
    return OperatorResponse(False, f"the run did not answer within {OPERATOR_TIMEOUT_SECONDS:g} seconds; try again")


async def _answer(
    stream: SocketStream,
    desk: ActorRef,
    board: ActorRef,
    admit: Admit | None,
    budget: ConnectionBudget,
    control: RunControl | None,
) -> None:
    """One operator connection; whatever goes wrong with it ends it, never the run."""
    async with stream:
        sock = raw_socket(stream)
        slot = budget.take(sock)
        if slot is None:
            await deliver(sock, _encode(OperatorResponse(False, budget.full_text())))
            return
        try:
            peer = identified(sock) if admit is not None else NOBODY
            data, refusal = await receive(budget, slot, MAX_OPERATOR_REQUEST_BYTES)
            if refusal is not None:
                response = OperatorResponse(False, refusal)
            else:
                response = await _respond(data, peer, desk, board, admit, control)
            await deliver(sock, _encode(response))
        except Exception:  # the run is stopping, or a bug: this connection ends, the run doesn't
            try:
                _log.warning("an operator connection failed", exc_info=True)
            except OSError:  # out of descriptors, the log's renderer may fail to load what it needs (rich)
                pass
        finally:
            budget.release(slot)


async def serve_operator(
    listener: SocketListener,
    desk: ActorRef,
    board: ActorRef,
    admit: Admit | None = None,
    control: RunControl | None = None,
) -> None:
    budget = ConnectionBudget(MAX_OPERATOR_CONNECTIONS, "MAX_OPERATOR_CONNECTIONS")
    async with listener, anyio.create_task_group() as connections:
        while True:
            connections.start_soon(_answer, await accept(listener, budget), desk, board, admit, budget, control)
