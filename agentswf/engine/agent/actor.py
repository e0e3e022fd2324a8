"""The AgentActor: the shell around one agent's turns, which `turn.py` decides.

Every message it gets becomes an event; `turn.step` says what follows, and one match carries
out its effects: the records and the messages to its peers here, the processes, timers and
socket in `agent/ops.py` (an attempt, a fork's copy or compaction, a stop). An effect that
asks (the record of an answer, the agent's mail, a message posted) is stepped again with its
answer, in the same handler. A tool call the turn starts is handed back to the connection
that asked (`_handle`), which runs it through the run's `ToolCalls` in its own task and then
asks the actor `ToolDone`, stepped like any other event. What the agent owes or awaits it is
told: the switchboard keeps it in the agent's `StandingSlot`, read on every request with no
round trip.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import msgspec

from ...actors import Actor, Reply, backend, handler
from ...errors import ActorError
from ...harnesses.said import Said
from ...wire import PeersRequest, Request, Response, ToolRequest
from .. import turn as t
from ..clock import now
from ..ids import new_id
from ..mail.switchboard import MailWaiting, PeersOf, TakeMail
from ..outcomes import Cancelled, TimedOut
from ..record.lines import AttemptOutput, CallOpened, CandidateSeen, ResultAccepted, TurnEnded
from ..rules import CallView
from ..tell import tell
from ..tools.broker import RunTool, ToolDone
from ..tools.call import ToolCall
from .messages import AgentSetup, CancelTurn, SetTools, StartOp, StartTurn, StopAgent, WfaCall
from .ops import AgentOps, AttemptReported, OpReported, Receipt, TimerDue, TurnStopped
from .text import peers_response

if TYPE_CHECKING:
    from ..tools.tool import Tool



def _timeouts(tools: Mapping[str, Tool]) -> dict[str, float | None]:
    return {name: tool.timeout for name, tool in tools.items()}


class AgentActor(Actor):
    def __init__(self, setup: AgentSetup) -> None:
        super().__init__()
        self.setup = setup
        self.key = setup.key
        self.ops = AgentOps(setup, self.start_soon, lambda msg: tell(self.ref, msg), lambda msg: self.ref.tell_nowait(msg))
        model, effort = setup.harness.settings()
        self.state = t.AgentState(
            self.key, str(self.ops.launcher), setup.harness.supports_waiting, setup.run_deadline,
            _timeouts(self.ops.tools), session=setup.session, model=model, effort=effort,
            forked_from=setup.forked_from,
            liveness=msgspec.structs.replace(t.DEFAULT_LIVENESS, **setup.harness.check_ins)
            if setup.harness.confirms_delivery else None,
        )
        self.standing = setup.standing  # the switchboard sets it, the agent reads it
        self.starters: dict[str, Reply] = {}  # who asked for each turn
        self.settle_waiters: dict[str, list[Reply]] = {}
        self.tool_waiters: list[Reply] = []  # the same call asked again, joined to the running one
        self.tool_call: ToolCall | None = None  # the one running: cancelled when its turn ends
        # Once a mailbox ask of the Recorder's is answered, the sessions line told as the agent
        # opened is queued (it was ahead in that mailbox): its lines may then go through Appends
        # and still come after it (record/layout.py). Before (an operation first), they go behind it.
        self.behind_sessions_line = False

    async def on_stop(self) -> None:
        try:
            await self._step(t.Closing(now()))
        except ActorError:
            pass  # the whole run is going down at once: the record has its ending already
        with backend.cancel_scope(shield=True):
            await self.ops.close()

    # Messages become events -----------------------------------------------------------

    async def _step(self, event: t.Event) -> Response | RunTool | None:
        """Step the turn and carry out its effects; the answer to the request, if one is given."""
        self.state, effects = t.step(self.state, event)
        answer = None
        for effect in effects:
            done = await self._do(effect)
            answer = done if done is not None else answer
        return answer

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
    async def op_ended(self, msg: OpReported) -> None:
        await self._step(t.OpEnded(msg.call_id, msg.result, now()))

    @handler
    async def cancel_turn(self, msg: CancelTurn) -> None:
        outcome = TimedOut(msg.reason) if msg.timed_out else Cancelled(msg.reason)
        await self._step(t.CancelAsked(msg.call_id, outcome, now()))

    @handler
    async def attempt_ended(self, msg: AttemptReported) -> None:
        at = now()
        if self.ops.said is msg.said:
            self.ops.said = None
        # whatever the turn makes of it (a stopped turn's attempt too): its output is on the record
        await self._record_output(msg.call_id, at.wall, msg.result.ending.kind, msg.result.output, msg.said)
        await self._step(t.AttemptEnded(msg.call_id, msg.result, at))

    async def _record_output(self, call_id: str, at: float, ending: str, output: str, said: Said) -> None:
        """An attempt's line in its call's attempts.jsonl, where it output anything."""
        stderr = said.text("stderr")
        said.let_go()
        if output or stderr:
            await self.setup.appends.ask(AttemptOutput(call_id, at, ending, output, stderr))

    @handler
    async def timer_fired(self, msg: TimerDue) -> None:
        event = t.QueuedExpired(msg.call_id, now()) if msg.queued else t.TimerFired(msg.call_id, msg.timer, now())
        await self._step(event)

    @handler
    async def received(self, msg: Receipt) -> None:
        await self._step(t.DeliveryReceived(msg.call_id, now()))

    @handler
    async def turn_settled(self, msg: TurnStopped) -> None:
        said, self.ops.said = self.ops.said, None  # an attempt the turn stopped, which never reported
        last: tuple[str, ...] = ()
        if said is not None:
            last = tuple(said.last_lines())
            await self._record_output(msg.call_id, now().wall, "stopped", said.text("stdout"), said)
        await self._step(t.Settled(msg.call_id, self.standing.view, now(), last))

    @handler
    async def mail_waiting(self, msg: MailWaiting) -> None:
        await self._step(t.MailArrived(now()))

    @handler
    async def set_tools(self, msg: SetTools) -> None:
        self.ops.tools = dict(msg.tools)
        await self._step(t.ToolsSet(_timeouts(self.ops.tools)))

    @handler
    async def tool_done(self, msg: ToolDone) -> Response | RunTool | None:
        return await self._step(t.ToolFinished(msg.call_id, msg.response, self.standing.view))

    @handler
    async def wfa(self, msg: WfaCall) -> Response | RunTool | None:
        request = msg.request
        if isinstance(request, PeersRequest):
            table = await self.setup.board.ask(PeersOf(self.key))
            return peers_response(table, as_json=request.json, now_ms=int(now().wall * 1000))
        if isinstance(request, ToolRequest):
            return await self._step(self._tool_asked(request))
        return await self._step(t.asked(request, self.standing.view, self._whose(request), now(), ""))

    def _whose(self, request: t.TurnRequest) -> CallView | None:
        """The call `request` names as the run knows it, where it isn't this agent's."""
        call_id = getattr(request, "call_id", None)
        owner = None if call_id is None or call_id in self.state.calls else self.setup.calls.get(call_id)
        return None if owner is None else CallView(owner, "open")

    async def _handle(self, request: Request) -> Response:
        """A request on the agent's socket, in its connection's task. A tool call the turn starts
        runs here (`ToolCalls.call`: recorded before it returns), then the turn is told it ended:
        told, not asked, as the answer is the call's own (led as `turn` leads it), and queued at
        once where there is room (a tell yields first): the agent's next request, sent once this
        is answered, is queued behind it.

        Where the actor is idle (`Actor.idle`), a tool call's start and end are stepped here, at
        once (`_step_now`), not through the mailbox: they decide without awaiting, so the actor
        would have done the same next; a step that would await (a refusal is recorded first)
        goes through the mailbox as any request does."""
        stepped, answer = self._step_now(self._tool_asked(request)) if isinstance(request, ToolRequest) else (False, None)
        if not stepped:
            answer = await self.ref.ask(WfaCall(request))
        if not isinstance(answer, RunTool):
            assert answer is not None, "every request is answered"
            return answer
        response = await self.setup.broker.call(answer)
        done = ToolDone(answer.call.id, response)
        if not self._step_now(t.ToolFinished(done.call_id, done.response, self.standing.view))[0]:
            await tell(self.ref, done)
        return t.tool_answer(response, self.standing.view)

    def _tool_asked(self, request: ToolRequest) -> t.Event:
        return t.asked(request, self.standing.view, None, now(), new_id())

    def _step_now(self, event: t.Event) -> tuple[bool, Response | RunTool | None]:
        """Step the turn in the calling task while the actor is idle and every effect is one done
        without awaiting (`_NOW`): (True, the answer); (False, None), with nothing changed, where
        the actor must step it (the step is pure: its result is dropped)."""
        if not self.idle():
            return False, None
        state, effects = t.step(self.state, event)
        if not all(type(effect) in _NOW for effect in effects):
            return False, None
        self.state = state
        answer = None
        for effect in effects:
            done = self._do_now(effect)
            answer = done if done is not None else answer
        return True, answer

    # Effects ------------------------------------------------------------------------

    async def _do(self, effect: t.Effect) -> Response | RunTool | None:
        if type(effect) in _NOW:
            return self._do_now(effect)
        setup, recorder, ops = self.setup, self.setup.recorder, self.ops
        match effect:
            case t.StartAttempt(call_id):
                error = await ops.start_attempt(effect, self._handle)
                if error is not None:
                    return await self._step(t.AttemptNotStarted(call_id, error))
                await self._runs_with(call_id)
            case t.RunOp(op, session):
                ops.run_op(op, session)
                await self._runs_with(op.call_id)
            case t.SwitchSettings(model, effort):
                ops.switch_settings(model, effort)
            case t.ArmTimer(call_id, timer, at):
                ops.arm_timer(call_id, timer, at)
            case t.ArmQueuedTimer(call_id, at):
                ops.arm_queued_timer(call_id, at)
            case t.StopTurn(call_id):
                ops.stop_turn(call_id)
            case t.Unlisten():
                ops.socket.close()
            case t.Announce(state, reason):
                ops.announce(state, reason)
            case t.RegisterCall(call_id):
                setup.calls[call_id] = self.key
            case t.RecordCallOpened(call_id, n, prompt, schema, deadline_ms):
                await recorder.ask(CallOpened(call_id, self.key, n, prompt, schema, deadline_ms))
                self.behind_sessions_line = True
            case t.RecordTurnEnded(record):
                await (setup.appends if self.behind_sessions_line else recorder).ask(TurnEnded(record))
            case t.RecordCandidate(call_id, at, args, input, ok, error):  # a turn's, so after its call.json's ask
                await setup.appends.ask(CandidateSeen(call_id, at, args, input, ok, error))
            case t.RecordAnswer(request, value, standing):
                ok = await recorder.ask(ResultAccepted(request.call_id, value))
                return await self._step(t.AnswerRecorded(request, value, ok, standing, now()))
            case t.RecordToolRefused(request, code, message, turn_call_id):
                # Recorded before the refusal is answered; one that can't be is answered all the same
                # (nothing ran), and the run ends failed for the gap.
                await recorder.ask(ops.refused_tool(request, code, message, turn_call_id))
            case t.JoinTool():
                self.tool_waiters.append(self.defer())
            case t.StopTool(call_id):
                if self.tool_call is not None and self.tool_call.id == call_id:
                    self.tool_call.cancel()  # its handler, if running, is stopped as when its time runs out
            case t.TakeMail():
                if self.state.turn is None and not self.standing.unread:  # settled, nothing to read: no round trip
                    return await self._step(t.MailTaken((), self.standing.view, now()))
                mail = await setup.board.ask(TakeMail(self.key))
                return await self._step(t.MailTaken(tuple(mail), self.standing.view, now()))
            case t.OpenMessageTurn(mail, deadline):
                prompt = await ops.message_prompt(mail)
                return await self._step(t.MessageTurnReady(new_id(), prompt, deadline, now()))
            case t.SendPost(post, request):
                answer = await setup.board.ask(post)
                return await self._step(t.PostAnswered(request, post.until, answer, self.standing.view, now()))
            case t.TellBoard(message):
                await tell(setup.board, message)
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

    async def _runs_with(self, call_id: str) -> None:
        """What just started runs with the settings its harness has: where they aren't the agent's
        (a fork's agent switches at its first real turn), the turn is told, and its record says so
        however the attempt ends."""
        settings = self.ops.harness.settings()
        if settings != (self.state.model, self.state.effort):
            await self._step(t.RunsWith(call_id, *settings))

    def _do_now(self, effect: t.Effect) -> Response | RunTool | None:
        """An effect of `_NOW`: done without awaiting, from the actor or from `_step_now`."""
        match effect:
            case t.Respond(response):
                return response
            case t.StartTool(call_id, request, deadline, turn_call_id):
                run = self.ops.run_tool(call_id, request, deadline, turn_call_id, self.ref)
                self.tool_waiters, self.tool_call = [], run.call
                return run  # the connection that asked runs it (`_handle`)
            case t.AnswerTool(response):
                waiters, self.tool_waiters, self.tool_call = self.tool_waiters, [], None
                for waiter in waiters:
                    waiter.set(response)
                return response
        raise AssertionError(f"{type(effect).__name__} is not done at once")


_NOW: frozenset[type] = frozenset({t.Respond, t.StartTool, t.AnswerTool})
"""The effects `_do_now` does: none awaits, none answers later (`defer`)."""
