"""The messaging side of an AgentActor: `wfa peers`, `wfa send`, `wfa reply`, and mail arriving.

The switchboard decides (routes, inboxes, questions, cycles); this side passes the
agent's requests to it and starts the turns mail calls for: a continuation of a turn
still open, or a turn of its own for an agent with nothing to do.
"""

from __future__ import annotations

import math
import secrets
from typing import Any

import anyio
import msgspec

from ..wire import PeersRequest, ReplyRequest, Response, SendRequest, accepted, refused
from ..wire.prompts import message_turn_prompt, peers_block
from ..wire.teaching import Taught
from . import rules
from .clock import wall_ms
from .mailrules import MESSAGE_TURN_SECONDS
from .recorder import CallOpened
from .switchboard import Mail, PeersOf, Post, Posted, StandingView

_PEER_COLUMNS = ("peer", "can", "kind", "state", "queued", "purpose")
NO_RESULT = Taught(str)  # a message turn takes no result; this only fills the slot


def peers_text(table: dict[str, Any]) -> str:
    """`wfa peers` as a table: one row per route, then what the agent owes and awaits."""
    rows = [[str(row.get(column, "-")) for column in _PEER_COLUMNS] for row in table["peers"]]
    for row, source in zip(rows, table["peers"], strict=False):
        if "awaits" in source:
            row[3] += f" (awaits {source['awaits']})"
        if "reason" in source:
            row[3] += f" ({source['reason']})"
    widths = [max([len(column), *(len(row[i]) for row in rows)]) for i, column in enumerate(_PEER_COLUMNS)]
    lines = ["  ".join(column.ljust(widths[i]) for i, column in enumerate(_PEER_COLUMNS)).rstrip()]
    lines += ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    if not rows:
        lines = ["no peers: the workflow opened no routes for you."]
    for peer in table["owes"]:
        lines.append(f"you owe {peer} a reply (wfa reply {peer}).")
    if "awaits" in table:
        lines.append(f"you await {table['awaits']['peer']}'s reply.")
    return "\n".join(lines) + "\n"


class AgentMail:
    """Mixed into AgentActor: its state (turn, board, launcher, tools, key) lives there."""

    async def _peers_block(self: Any) -> str:
        table = await self.board.ask(PeersOf(self.key))
        return peers_block(self.launcher, table["peers"], can_await=self.harness.can_await)

    async def _peers(self: Any, request: PeersRequest) -> Response:
        table = await self.board.ask(PeersOf(self.key))
        if request.json:
            text = msgspec.json.format(msgspec.json.encode(table), indent=2).decode() + "\n"
        else:
            text = peers_text(table)
        return accepted("peers", stdout=text, value=table)

    async def _post(self: Any, request: SendRequest | ReplyRequest) -> Response:
        command = "reply" if isinstance(request, ReplyRequest) else "send"
        turn = self.turn
        in_turn = turn is not None and turn.outcome is None
        now = anyio.current_time()
        until = turn.deadline if in_turn else math.inf
        if request.timeout_ms is not None:
            until = min(until, now + request.timeout_ms / 1000)
        answer = await self.board.ask(
            Post(self.key, request.peer, request.message, command == "reply", request.await_reply, until, in_turn)
        )
        if isinstance(answer, rules.Refusal):
            return refused(command, answer.code, answer.message)
        posted: Posted = answer
        verb = "replied to" if command == "reply" else "sent to"
        text = f"wfa: {verb} {request.peer}; it reads it {posted.read}.\n"
        if request.await_reply:
            when = wall_ms(until)
            text += "wfa: its reply starts your next turn"
            text += f"; the wait ends at {when} (Unix ms).\n" if when is not None else ".\n"
        return accepted(command, stdout=text, value={"message_id": posted.message_id, "read": posted.read})

    async def _message_turn(self: Any, mail: list[Mail], standing: StandingView) -> None:
        """A turn of its own for mail that found the agent with nothing to do; it takes no result."""
        now = anyio.current_time()
        deadline = now + MESSAGE_TURN_SECONDS
        if standing.latest_asker_until is not None and not math.isinf(standing.latest_asker_until):
            deadline = max(deadline, standing.latest_asker_until)  # an asker waiting longer lengthens it
        deadline = min(deadline, self.run_deadline)
        call_id = secrets.token_hex(4)
        self.message_turns += 1
        prompt = message_turn_prompt(mail, launcher=self.launcher, peers=await self._peers_block(), tools=self.tools)
        turn = self._new_turn(call_id, self.message_turns, prompt, NO_RESULT, deadline, kind="message")
        self.calls[call_id] = rules.CallView(self.key, "open", deadline, takes_result=False)
        await self._register_call(call_id)
        await self.recorder.ask(CallOpened(call_id, self.key, turn.n, prompt, None, wall_ms(deadline)))
        if not math.isinf(deadline):
            self._spawn(turn, self._timer, call_id, "deadline", deadline)
        self._launch(turn)
