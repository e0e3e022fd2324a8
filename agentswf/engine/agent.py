"""The AgentActor: the I/O shell around one agent's turns, which `turn.py` decides.

Every message it gets becomes an event; `turn.step` says what follows, and the actor does
it: runs an attempt (`attempt.py`), arms timers, answers `wfa`, asks the Recorder, tells the
switchboard. An effect that asks (the record of an answer, the agent's mail, a message
posted) is stepped again with its answer, in the same handler. What the agent owes or
awaits it is told: the switchboard keeps it in the agent's `StandingSlot`, read on every
request with no round trip.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import msgspec

from ..actors import Actor, Reply, handler
from ..errors import ActorError
from ..harnesses.base import Attempt, AttemptResult, Operation, OperationResult
from ..launcher.place import agent_paths
from ..wire import PeersRequest, ReplyRequest, Request, Response, ResultRequest, SendRequest, ToolRequest
from ..wire.prompts import message_turn_prompt, peers_block
from . import turn as t
from .admission import agent_admit
from .agent_messages import (
    AgentSetup,
    CallRegistered,
    CancelTurn,
    Describe,
    SetTools,
    StartOp,
    StartTurn,
    StopAgent,
    WfaCall,
    WhoseCall,
)
from .agent_text import needs_peers, peers_response, prompt_text
from .attempt import AgentSocket, TurnTasks, fire_at, run_attempt, run_operation
from .broker import CancelTool, RunTool, ToolDone
from .clock import now
from .outcomes import Cancelled, TimedOut
from .recorder import CallOpened, CandidateSeen, ResultAccepted, TurnEnded
from .rules import CallView
from .switchboard import MailWaiting, PeersOf, Presence, Register, StandingSlot, TakeMail
from .toolcall import ToolCall, tool_record

if TYPE_CHECKING:
    from ..workflow.tools import Tool



class _AttemptEnded(msgspec.Struct, frozen=True):
    call_id: str
    result: AttemptResult


class _TimerFired(msgspec.Struct, frozen=True, kw_only=True):
    call_id: str
    timer: t.Timer
    queued: bool = False  # a queued turn's deadline


class _OpEnded(msgspec.Struct, frozen=True):
    call_id: str
    result: OperationResult


class _TurnSettled(msgspec.Struct, frozen=True):
    call_id: str


class _Received(msgspec.Struct, frozen=True):
    call_id: str


def _timeouts(tools: Mapping[str, Tool]) -> dict[str, float | None]:
    return {name: tool.timeout for name, tool in tools.items()}


class AgentActor(Actor):
    def __init__(self, setup: AgentSetup) -> None:
        super().__init__()
        self.setup = setup
        self.key = setup.key
        self.tools = dict(setup.tools)
        socket_path, self.launcher = agent_paths(setup.sockets)  # written at its first turn
        self.socket = AgentSocket(socket_path, self.launcher)
        model, effort = setup.harness.settings()
        self.state = t.AgentState(
            self.key, str(self.launcher), setup.harness.supports_waiting, setup.run_deadline, _timeouts(self.tools),
            session=setup.session, model=model, effort=effort, forked_from=setup.forked_from,
            liveness=msgspec.structs.replace(t.DEFAULT_LIVENESS, **setup.harness.check_ins)
            if setup.harness.confirms_delivery else None,
        )
        self.presence = Presence()  # the agent sets it, the switchboard reads it
        self.standing = StandingSlot()  # the switchboard sets it, the agent reads it
        self.starters: dict[str, Reply] = {}  # who asked for each turn
        self.settle_waiters: dict[str, list[Reply]] = {}
        self.tool_waiters: list[Reply] = []
        self.tasks = TurnTasks(self.start_soon)  # the turn's attempt and timers
        self.attempt_done = anyio.Event()
        self.attempt_done.set()

    async def on_start(self) -> None:
        await self.setup.board.ask(Register(
            key=self.key, kind="agent", ref=self.ref, can_await=self.setup.harness.can_await,
            presence=self.presence, standing=self.standing,
        ))

    async def on_stop(self) -> None:
        try:
            await self._step(t.Closing(now()))
        except ActorError:
            pass  # the whole run is going down at once: the record has its ending already
        with anyio.CancelScope(shield=True):
            await self.setup.harness.close()  # what it keeps between turns (a pane) is gone with it

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
    async def start_op(self, msg: StartOp) -> None:
        self.starters[msg.call_id] = self.defer()
        await self._step(t.OpAsked(msg, now()))

    @handler
    async def stop_agent(self, msg: StopAgent) -> None:
        await self._step(t.StopAsked(msg.call_id, msg.reason, now()))

    @handler
    async def op_ended(self, msg: _OpEnded) -> None:
        await self._step(t.OpEnded(msg.call_id, msg.result, now()))

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
    async def received(self, msg: _Received) -> None:
        await self._step(t.DeliveryReceived(msg.call_id, now()))

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
            return peers_response(await self.setup.board.ask(PeersOf(self.key)), as_json=request.json)
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
            case t.RunOp(op, session):
                self._run_op(op, session)
            case t.SwitchSettings(model, effort):
                self.setup = replace(self.setup, harness=self.setup.harness.with_settings(model, effort))
            case t.ArmTimer(call_id, timer, at):
                self.tasks.spawn(fire_at, at, partial(self.ref.tell, _TimerFired(call_id=call_id, timer=timer)))
            case t.ArmQueuedTimer(call_id, at):
                expired = _TimerFired(call_id=call_id, timer=t.Timer.DEADLINE, queued=True)
                self.start_soon(fire_at, at, partial(self.ref.tell, expired))
            case t.StopTurn(call_id):
                self._stop_turn(call_id)
            case t.Unlisten():
                self.socket.close()
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
            case t.RecordToolRefused(request, code, message, turn_call_id):
                # Recorded before the refusal is answered; one that can't be is answered all the same
                # (nothing ran), and the run ends failed for the gap.
                tool, at = self.tools.get(request.name), now().wall
                await recorder.ask(tool_record(
                    call_id=secrets.token_hex(4), turn_call_id=turn_call_id, agent=self.key, tool=request.name,
                    input=request.args or request.input, redacted=tool.sensitive_fields if tool else frozenset(),
                    read=False, outcome="refused", error=message, code=code, started_at=at, ended_at=at,
                ))
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
                setup.harness.turn_settled(record.outcome.kind)
                starter = self.starters.pop(call_id, None)
                if starter is not None:
                    starter.set(record)
                for waiter in self.settle_waiters.pop(call_id, []):
                    waiter.set(None)
        return None

    async def _peers_block(self) -> str:
        table = await self.setup.board.ask(PeersOf(self.key))
        return peers_block(self.launcher, table["peers"], can_await=self.setup.harness.can_await)

    def _stop_turn(self, call_id: str) -> None:
        """Its attempt and timers are cancelled; it settles once its CLI is gone."""
        self.tasks.stop()
        done = self.attempt_done

        async def settle() -> None:
            await done.wait()
            await self.ref.tell(_TurnSettled(call_id))

        self.start_soon(settle)

    def _run_op(self, op: t.StartOp, session: str | None) -> None:
        """Run a compaction or a fork's copy beside the handlers, as an attempt is: stopped with the turn's tasks."""
        setup = self.setup
        operation = Operation(
            agent=self.key, kind="fork" if op.kind == "fork" else "compact", session=session, cwd=setup.cwd,
            env=setup.env, focus=op.focus,
        )
        self.attempt_done = anyio.Event()
        self.tasks.spawn(run_operation, setup.harness, operation, partial(self._op_report, op.call_id),
                         self.attempt_done)

    async def _op_report(self, call_id: str, result: OperationResult) -> None:
        await self.ref.tell(_OpEnded(call_id, result))

    async def _start_attempt(self, effect: t.StartAttempt) -> Response | None:
        setup = self.setup
        peers = await self._peers_block() if needs_peers(effect.prompt) else ""
        prompt = prompt_text(effect.prompt, call_id=effect.call_id, launcher=self.launcher, peers=peers, tools=self.tools)
        attempt = Attempt(
            agent=self.key, call_id=effect.call_id, turn=effect.n, nudge=effect.nudge, prompt=prompt,
            launcher=self.launcher, cwd=setup.cwd, env=setup.env, session=effect.session, started_by=effect.started_by,
            received=partial(self.start_soon, self.ref.tell, _Received(effect.call_id)),
        )
        try:
            self.socket.listen(self._handle, setup.budget, agent_admit(self.key, setup.attempts, setup.recorder), self.start_soon)
        except OSError as error:  # no descriptor, or no room on disk: this turn fails, not the run
            return await self._step(t.AttemptNotStarted(effect.call_id, str(error)))
        self.attempt_done = anyio.Event()
        self.presence.state, self.presence.reason = "working", ""

        async def report(result: AttemptResult) -> None:
            await self.ref.tell(_AttemptEnded(effect.call_id, result))

        self.tasks.spawn(run_attempt, setup.harness, setup.attempts, attempt, report, self.attempt_done)
        return None

    async def _handle(self, request: Request) -> Response:
        response: Response = await self.ref.ask(WfaCall(request))
        return response
