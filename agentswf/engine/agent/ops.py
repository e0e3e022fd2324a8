"""What an AgentActor runs for its turns beside its handlers: the turn's effects that are processes and timers.

`turn.step` decides; the actor matches its effects and hands these here: an attempt of the
CLI (its prompt written, the socket listening), an operation (a fork's copy, a compaction),
the harness as `agent.set` left it, the turn's timers, a stop that settles once the CLI is
gone, and the tool call or refusal put in the broker's and the record's terms. What ends
comes back to the actor as one of the messages below, stepped like any other.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import anyio
import msgspec

from ...actors import ActorRef
from ...errors import MailboxFull
from ...harnesses.base import Attempt, AttemptResult, Operation, OperationResult
from ...harnesses.said import Said
from ...wire import Code, Request, Response, ToolRequest
from ...wire.prompts import message_turn_prompt, peers_block
from .. import rules
from .. import turn as t
from ..admission import agent_admit
from ..clock import now
from ..ids import new_id
from ..mail.switchboard import PeersOf
from ..mail.words import Mail
from ..record.lines import ToolCalled
from ..tools.broker import RunTool
from ..tools.call import ToolCall, tool_record
from .attempt import AgentSocket, TurnTasks, fire_at, run_attempt, run_operation
from .messages import AgentSetup
from .text import needs_peers, prompt_text

__all__ = ["AgentOps", "AttemptReported", "OpReported", "Receipt", "TimerDue", "TurnStopped"]

TellSelf = Callable[[msgspec.Struct], Awaitable[None]]
TellNow = Callable[[msgspec.Struct], None]  # MailboxFull when there is no room
StartSoon = Callable[..., None]


class AttemptReported(msgspec.Struct, frozen=True):
    call_id: str
    result: AttemptResult
    said: Said  # what its processes said for a person: its output's tails


class OpReported(msgspec.Struct, frozen=True):
    call_id: str
    result: OperationResult


class TimerDue(msgspec.Struct, frozen=True, kw_only=True):
    call_id: str
    timer: t.Timer
    queued: bool = False  # a queued turn's deadline


class TurnStopped(msgspec.Struct, frozen=True):
    """The stopped turn's CLI is gone: it can settle."""

    call_id: str


class Receipt(msgspec.Struct, frozen=True):
    """The harness confirmed the agent received the attempt's prompt (a pane's transcript)."""

    call_id: str


class AgentOps:
    """One agent's processes, timers and socket, for the actor that owns it (never shared)."""

    def __init__(self, setup: AgentSetup, start_soon: StartSoon, tell_self: TellSelf, tell_now: TellNow) -> None:
        self.setup = setup
        self.harness = setup.harness  # as the last `agent.set` left it
        self.tools = dict(setup.tools)
        self.launcher = setup.launcher  # written at its first turn
        self.socket = AgentSocket(setup.socket_path, self.launcher)
        self.presence = setup.presence  # the agent sets it, the switchboard reads it
        self.start_soon, self.tell_self, self.tell_now = start_soon, tell_self, tell_now
        self.tasks = TurnTasks(start_soon)  # the turn's attempt or operation, and its timers
        self.done = anyio.Event()  # set once nothing of the last attempt or operation is left
        self.done.set()
        self.said: Said | None = None  # the running attempt's output, until it reports (a stopped one's: till its turn settles)

    async def close(self) -> None:
        await self.harness.close()  # what it keeps between turns (a pane) is gone with it

    def announce(self, state: str, reason: str = "") -> None:
        self.presence.state, self.presence.reason = state, reason

    def switch_settings(self, model: str | None, effort: str | None) -> None:
        self.harness = self.harness.with_settings(model, effort)

    def arm_timer(self, call_id: str, timer: t.Timer, at: float) -> None:
        """A timer of the turn's: it stops with the turn."""
        self.tasks.at(at, partial(self.tell_self, TimerDue(call_id=call_id, timer=timer)))

    def arm_queued_timer(self, call_id: str, at: float) -> None:
        """A queued turn's deadline: it outlives the turn running now."""
        due = TimerDue(call_id=call_id, timer=t.Timer.DEADLINE, queued=True)
        self.start_soon(fire_at, at, partial(self.tell_self, due))

    def stop_turn(self, call_id: str) -> None:
        """Its attempt and timers are cancelled; `TurnStopped` once its CLI is gone."""
        self.tasks.stop()
        done = self.done
        if done.is_set():  # the usual end: the attempt reported, then ended; no task to wait for it
            try:
                self.tell_now(TurnStopped(call_id))
                return
            except MailboxFull:
                pass

        async def settle() -> None:
            await done.wait()
            await self.tell_self(TurnStopped(call_id))

        self.start_soon(settle)

    def run_op(self, op: t.StartOp, session: str | None) -> None:
        """A compaction or a fork's copy, run as an attempt is: stopped with the turn's tasks."""
        setup = self.setup
        operation = Operation(
            agent=setup.key, kind="fork" if op.kind == "fork" else "compact", session=session, cwd=setup.cwd,
            env=setup.env, focus=op.focus, launcher=self.launcher,
        )
        self.done = anyio.Event()

        async def report(result: OperationResult) -> None:
            await self.tell_self(OpReported(op.call_id, result))

        self.tasks.spawn(run_operation, self.harness, self.setup.attempts, operation, report, self.done)

    async def peers_block(self) -> str:
        if not self.setup.standing.routed:  # no route of its was ever open: no peers (`StandingSlot.routed`)
            return ""
        table = await self.setup.board.ask(PeersOf(self.setup.key))
        return peers_block(self.launcher, table["peers"], can_await=self.harness.can_await)

    async def message_prompt(self, mail: tuple[Mail, ...]) -> str:
        return message_turn_prompt(list(mail), launcher=self.launcher, peers=await self.peers_block(), tools=self.tools)

    async def start_attempt(self, effect: t.StartAttempt, handle: Callable[[Request], Awaitable[Response]]) -> str | None:
        """Listen on the socket and run the attempt; why it couldn't start, if it couldn't."""
        setup = self.setup
        peers = await self.peers_block() if needs_peers(effect.prompt) else ""
        prompt = prompt_text(effect.prompt, call_id=effect.call_id, launcher=self.launcher, peers=peers, tools=self.tools)
        attempt = Attempt(
            agent=setup.key, call_id=effect.call_id, turn=effect.n, nudge=effect.nudge, prompt=prompt,
            launcher=self.launcher, cwd=setup.cwd, env=setup.env, session=effect.session, started_by=effect.started_by,
            reason=t.attempt_reason(effect), received=partial(self.start_soon, self.tell_self, Receipt(effect.call_id)),
            said=Said(),
        )
        try:
            self.socket.listen(handle, setup.budget, agent_admit(setup.key, setup.attempts, setup.recorder), self.start_soon)
        except OSError as error:  # no descriptor, or no room on disk: this turn fails, not the run
            return str(error)
        self.done = anyio.Event()
        self.announce("working")
        self.said = self.presence.said = attempt.said

        async def report(result: AttemptResult) -> None:
            await self.tell_self(AttemptReported(effect.call_id, result, attempt.said))

        self.tasks.spawn(run_attempt, self.harness, setup.attempts, attempt, report, self.done)
        return None

    def run_tool(
        self, call_id: str, request: ToolRequest, deadline: float, turn_call_id: str, agent_ref: ActorRef
    ) -> RunTool:
        """What the broker is told to run the call, whose input it reads."""
        return RunTool(
            call=ToolCall(call_id, self.setup.key, request.name), tool=self.tools[request.name], args=request.args,
            input=request.input, deadline=deadline, turn_call_id=turn_call_id, agent_ref=agent_ref,
            launcher=str(self.launcher),
        )

    def refused_tool(self, request: ToolRequest, code: Code, message: str, turn_call_id: str) -> ToolCalled:
        """The record of a tool call refused before the broker saw it: its input as given, redacted."""
        tool, at = self.tools.get(request.name), now().wall
        given: Any = request.args or request.input
        return tool_record(
            call_id=new_id(), turn_call_id=turn_call_id, agent=self.setup.key, tool=rules.recorded_tool_name(request.name),
            input=given, redacted=tool.sensitive_fields if tool else frozenset(), read=False, outcome="refused",
            error=message, code=code, started_at=at, ended_at=at,
        )
