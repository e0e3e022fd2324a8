"""The AgentActor: the I/O shell around one agent's turns (`turn.py` decides them).

Every message it gets becomes an event; `turn.step` says what follows, and the actor does
it: runs the harness, arms timers, answers `wfa`, asks the Recorder and tells the
switchboard. An effect that asks (the record of an answer, the agent's mail, a message
posted) is stepped again with its answer, in the same handler. What the agent owes or awaits
it is told: the switchboard keeps it in the agent's `StandingSlot`, read on every request.
Its socket admits only the run's own process and what runs under the keeper of its live
attempt (the run's `LiveAttempts`, `admission.py`), and listens only during a turn, so an
agent that isn't in one holds no file descriptor.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import msgspec

from ..actors import Actor, ActorRef, Reply, handler
from ..errors import ActorError
from ..harnesses.base import Attempt, AttemptEnding, AttemptResult, Harness
from ..launcher.identity import LiveAttempts
from ..launcher.listener import ConnectionBudget, bind, serve
from ..launcher.place import agent_paths, make_agent_dir
from ..wire import PeersRequest, ReplyRequest, Request, Response, ResultRequest, SendRequest, ToolRequest, accepted
from ..wire.prompts import message_turn_prompt, peers_block
from . import turn as t
from .admission import agent_admit
from .agent_text import needs_peers, peers_text, prompt_text
from .broker import CancelTool, RunTool, ToolDone
from .clock import now
from .outcomes import Cancelled, TimedOut
from .recorder import CallOpened, CandidateSeen, ResultAccepted, TurnEnded
from .rules import CallView
from .switchboard import MailWaiting, PeersOf, Presence, Register, StandingSlot, TakeMail
from .toolcall import ToolCall, tool_record
from .turn import StartTurn

if TYPE_CHECKING:
    from ..workflow.tools import Tool

__all__ = ["AGENT_MAILBOX_CAPACITY", "AgentActor", "AgentSetup", "CallRegistered", "CancelTurn", "Describe", "SetTools",
           "StartTurn", "WhoseCall"]

AGENT_MAILBOX_CAPACITY = 128


class WfaCall(msgspec.Struct, frozen=True):
    """A decoded `wfa` request that arrived on this agent's socket."""

    request: Request


class Describe(msgspec.Struct, frozen=True):
    """Asked once the agent is open: where its launcher is."""


class CancelTurn(msgspec.Struct, frozen=True):
    call_id: str
    reason: str
    timed_out: bool = False  # the caller's deadline passed: the turn ends timed-out


class SetTools(msgspec.Struct, frozen=True):
    """The agent was reopened with the same tools: the new handlers replace the old."""

    tools: dict[str, Tool]


class CallRegistered(msgspec.Struct, frozen=True):
    """Told to the run: a call id is this agent's."""

    call_id: str
    agent: str


class WhoseCall(msgspec.Struct, frozen=True):
    """Asked of the run: which agent a call id belongs to, if any."""

    call_id: str


class _AttemptEnded(msgspec.Struct, frozen=True):
    call_id: str
    result: AttemptResult


class _TimerFired(msgspec.Struct, frozen=True):
    call_id: str
    timer: t.Timer
    queued: bool = False  # a queued turn's deadline


class _TurnSettled(msgspec.Struct, frozen=True):
    call_id: str


@dataclass(frozen=True, slots=True)
class AgentSetup:
    """Everything an AgentActor is started with."""

    key: str
    harness: Harness
    cwd: Path
    env: Mapping[str, str]
    sockets: Path  # the run's directory of agent sockets
    run: ActorRef
    recorder: ActorRef
    budget: ConnectionBudget
    broker: ActorRef
    tools: Mapping[str, Tool]
    board: ActorRef  # the switchboard
    run_deadline: float
    attempts: LiveAttempts  # the run's, shared: whose processes the sockets admit


def _timeouts(tools: Mapping[str, Tool]) -> dict[str, float | None]:
    return {name: tool.timeout for name, tool in tools.items()}


class AgentActor(Actor):
    def __init__(self, setup: AgentSetup) -> None:
        super().__init__()
        self.setup = setup
        self.key = setup.key
        self.tools = dict(setup.tools)
        self.socket_path, self.launcher = agent_paths(setup.sockets)  # written at its first turn
        self.dir_made = False
        self.accepting: anyio.CancelScope | None = None  # while its socket listens: in a turn
        self.state = t.AgentState(
            self.key, str(self.launcher), setup.harness.supports_waiting, setup.run_deadline, _timeouts(self.tools)
        )
        self.presence = Presence()  # the agent sets it, the switchboard reads it
        self.standing = StandingSlot()  # the switchboard sets it, the agent reads it
        self.starters: dict[str, Reply] = {}  # who asked for each turn
        self.settle_waiters: dict[str, list[Reply]] = {}
        self.tool_waiters: list[Reply] = []
        self.scopes: list[anyio.CancelScope] = []  # the turn's attempt and timers
        self.attempt_done = anyio.Event()
        self.attempt_done.set()

    async def on_start(self) -> None:
        await self.setup.board.ask(Register(self.key, "agent", self.ref, self.setup.harness.can_await, self.presence, self.standing))

    async def on_stop(self) -> None:
        try:
            await self._step(t.Closing(now()))
        except ActorError:
            pass  # the whole run is going down at once: the record has its ending already

    # Messages become events -----------------------------------------------------------

    async def _step(self, event: t.Event) -> Response | None:
        """Step the turn and carry out its effects; the answer to the request, if one is given."""
        self.state, effects = t.step(self.state, event)
        answer = None
        for effect in effects:
            done = await self._do(effect)
            answer = done if done is not None else answer
        return answer

    @handler
    def describe(self, msg: Describe) -> Path:
        return self.launcher

    @handler
    async def start_turn(self, msg: StartTurn) -> None:
        self.starters[msg.call_id] = self.defer()
        await self._step(t.TurnAsked(msg, now()))

    @handler
    async def cancel_turn(self, msg: CancelTurn) -> None:
        outcome = TimedOut(msg.reason) if msg.timed_out else Cancelled(msg.reason)
        await self._step(t.CancelAsked(msg.call_id, outcome, now()))

    @handler
    async def attempt_ended(self, msg: _AttemptEnded) -> None:
        await self._step(t.AttemptEnded(msg.call_id, msg.result, now()))

    @handler
    async def timer_fired(self, msg: _TimerFired) -> None:
        event = t.QueuedExpired(msg.call_id, now()) if msg.queued else t.TimerFired(msg.call_id, msg.timer, now())
        await self._step(event)

    @handler
    async def turn_settled(self, msg: _TurnSettled) -> None:
        await self._step(t.Settled(msg.call_id, self.standing.view, now()))

    @handler
    async def mail_waiting(self, msg: MailWaiting) -> None:
        await self._step(t.MailArrived(now()))

    @handler
    async def set_tools(self, msg: SetTools) -> None:
        self.tools = dict(msg.tools)
        await self._step(t.ToolsSet(_timeouts(self.tools)))

    @handler
    async def tool_done(self, msg: ToolDone) -> None:
        await self._step(t.ToolFinished(msg.call_id, msg.response, self.standing.view))

    @handler
    async def wfa(self, msg: WfaCall) -> Response | None:
        request = msg.request
        if isinstance(request, PeersRequest):
            table = await self.setup.board.ask(PeersOf(self.key))  # its table says what the agent owes
            text = msgspec.json.format(msgspec.json.encode(table), indent=2).decode() + "\n" if request.json else peers_text(table)
            return accepted("peers", stdout=text, value=table)
        if isinstance(request, ToolRequest):
            return await self._step(t.ToolAsked(request, self.standing.view, secrets.token_hex(4), now()))
        if isinstance(request, SendRequest | ReplyRequest):
            return await self._step(t.PostAsked(request, now()))
        foreign = None if request.call_id in self.state.calls else await self._whose(request.call_id)
        if isinstance(request, ResultRequest):
            return await self._step(t.ResultAsked(request, self.standing.view, foreign, now()))
        return await self._step(t.WaitingAsked(request, self.standing.view, foreign, now()))

    async def _whose(self, call_id: str) -> CallView | None:
        owner = await self.setup.run.ask(WhoseCall(call_id))
        return None if owner is None else CallView(owner, "open")

    # Effects ------------------------------------------------------------------------

    async def _do(self, effect: t.Effect) -> Response | None:
        setup, recorder = self.setup, self.setup.recorder
        match effect:
            case t.Respond(response):
                return response
            case t.StartAttempt():
                return await self._start_attempt(effect)
            case t.ArmTimer(call_id, timer, at):
                self._in_turn(self._fire_at, at, _TimerFired(call_id, timer))
            case t.ArmQueuedTimer(call_id, at):
                self.start_soon(self._fire_at, at, _TimerFired(call_id, t.Timer.DEADLINE, queued=True))
            case t.StopTurn(call_id):
                self._stop_turn(call_id)
            case t.Unlisten():
                if self.accepting is not None:  # requests already taken are answered
                    self.accepting.cancel()
                    self.accepting = None
            case t.Announce(state, reason):
                self.presence.state, self.presence.reason = state, reason
            case t.RegisterCall(call_id):
                await setup.run.tell(CallRegistered(call_id, self.key))
            case t.RecordCallOpened(call_id, n, prompt, schema, deadline_ms):
                await recorder.ask(CallOpened(call_id, self.key, n, prompt, schema, deadline_ms))
            case t.RecordTurnEnded(record):
                await recorder.ask(TurnEnded(record))
            case t.RecordCandidate(call_id, at, args, input, ok, error):
                await recorder.ask(CandidateSeen(call_id, at, args, input, ok, error))
            case t.RecordAnswer(request, value, standing):
                ok = await recorder.ask(ResultAccepted(request.call_id, value))
                return await self._step(t.AnswerRecorded(request, value, ok, standing, now()))
            case t.RecordToolRefused():
                await self._record_refused(effect)
            case t.StartTool(call_id, request, deadline, turn_call_id):
                self.tool_waiters = [self.defer()]
                run = RunTool(
                    call=ToolCall(call_id, self.key, request.name), tool=self.tools[request.name], args=request.args,
                    input=request.input, deadline=deadline, turn_call_id=turn_call_id, agent_ref=self.ref,
                    launcher=str(self.launcher),
                )
                await setup.broker.tell(run)
            case t.JoinTool():
                self.tool_waiters.append(self.defer())
            case t.AnswerTool(response):
                waiters, self.tool_waiters = self.tool_waiters, []
                for waiter in waiters:
                    waiter.set(response)
            case t.StopTool(call_id):  # told beside the handler, waiting for room: never dropped, never a crash
                self.start_soon(setup.broker.tell, CancelTool(call_id))
            case t.TakeMail():
                mail = await setup.board.ask(TakeMail(self.key))
                return await self._step(t.MailTaken(tuple(mail), self.standing.view, now()))
            case t.OpenMessageTurn(mail, deadline):
                prompt = message_turn_prompt(list(mail), launcher=self.launcher, peers=await self._peers_block(), tools=self.tools)
                return await self._step(t.MessageTurnReady(secrets.token_hex(4), prompt, deadline, now()))
            case t.SendPost(post, request):
                answer = await setup.board.ask(post)
                return await self._step(t.PostAnswered(request, post.until, answer, self.standing.view, now()))
            case t.TellBoard(message):
                await setup.board.tell(message)
            case t.HoldUntilSettled(call_id):
                self.settle_waiters.setdefault(call_id, []).append(self.defer())
            case t.Finished(call_id, record):
                starter = self.starters.pop(call_id, None)
                if starter is not None:
                    starter.set(record)
                for waiter in self.settle_waiters.pop(call_id, []):
                    waiter.set(None)
        return None

    async def _record_refused(self, effect: t.RecordToolRefused) -> None:
        """A refused call goes in the record too, before the refusal is answered; one that can't be
        recorded is answered all the same (nothing ran), and the run ends failed for the gap."""
        request, at = effect.request, now().wall
        tool = self.tools.get(request.name)
        await self.setup.recorder.ask(
            tool_record(
                call_id=secrets.token_hex(4), turn_call_id=effect.turn_call_id, agent=self.key, tool=request.name,
                input=request.args or request.input, redacted=tool.sensitive_fields if tool else frozenset(),
                read=False, outcome="refused", error=effect.message, code=effect.code, started_at=at, ended_at=at,
            )
        )

    async def _peers_block(self) -> str:
        table = await self.setup.board.ask(PeersOf(self.key))
        return peers_block(self.launcher, table["peers"], can_await=self.setup.harness.can_await)

    # The turn's tasks -----------------------------------------------------------------

    def _in_turn(self, fn: Callable[..., Awaitable[None]], *args: object) -> None:
        """Run `fn` beside the handlers until the turn stops."""
        scope = anyio.CancelScope()
        self.scopes.append(scope)

        async def in_scope() -> None:
            with scope:
                await fn(*args)

        self.start_soon(in_scope)

    async def _fire_at(self, at: float, message: _TimerFired) -> None:
        await anyio.sleep_until(at)
        await self.ref.tell(message)

    def _stop_turn(self, call_id: str) -> None:
        scopes, self.scopes = self.scopes, []
        for scope in scopes:
            scope.cancel()
        done = self.attempt_done

        async def settle() -> None:
            await done.wait()
            await self.ref.tell(_TurnSettled(call_id))

        self.start_soon(settle)

    async def _start_attempt(self, effect: t.StartAttempt) -> Response | None:
        peers = await self._peers_block() if needs_peers(effect.prompt) else ""
        prompt = prompt_text(effect.prompt, call_id=effect.call_id, launcher=self.launcher, peers=peers, tools=self.tools)
        setup = self.setup
        attempt = Attempt(
            agent=self.key, call_id=effect.call_id, turn=effect.n, nudge=effect.nudge, prompt=prompt,
            launcher=self.launcher, cwd=setup.cwd, env=dict(setup.env), session=effect.session,
            started_by=effect.started_by,
        )
        try:
            self._listen()
        except OSError as error:  # no descriptor, or no room on disk: this turn fails, not the run
            return await self._step(t.AttemptNotStarted(effect.call_id, str(error)))
        self.attempt_done = anyio.Event()
        self.presence.state, self.presence.reason = "working", ""
        self._in_turn(self._run_attempt, attempt, self.attempt_done)
        return None

    def _listen(self) -> None:
        """Open the agent's socket for its turn (its directory and launcher too, at the first).
        Bound now, so a connection queues even before the task serving it runs."""
        if self.accepting is not None:
            return
        if not self.dir_made:
            make_agent_dir(self.socket_path, self.launcher)
            self.dir_made = True
        sock = bind(self.socket_path)
        self.accepting = anyio.CancelScope()

        async def handle(request: Request) -> Response:
            response: Response = await self.ref.ask(WfaCall(request))
            return response

        admit = agent_admit(self.key, self.setup.attempts, self.setup.recorder)
        self.start_soon(serve, sock, handle, self.setup.budget, admit, self.accepting)

    async def _run_attempt(self, attempt: Attempt, done: anyio.Event) -> None:
        harness, attempts, keepers = self.setup.harness, self.setup.attempts, list[int]()

        def started(pid: int) -> None:  # from now on the socket admits what runs under `pid`
            keepers.append(pid)
            attempts.add(pid, self.key)

        if harness.spawns:  # until `started`: a connection waits for the keeper's pid
            attempts.begin(self.key)
        try:
            try:
                result = await harness.run(replace(attempt, started=started))
            except Exception as error:  # a harness that breaks fails the turn, not the run
                result = AttemptResult(AttemptEnding("failed", reason=f"the agent could not be run: {error}", retryable=False))
            await self.ref.tell(_AttemptEnded(attempt.call_id, result))
        finally:
            if not keepers and harness.spawns:  # it never started
                attempts.end(self.key)
            for pid in keepers:  # the harness is done: nothing under them is left
                attempts.remove(pid)
            done.set()
