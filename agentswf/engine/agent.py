"""The AgentActor: one agent's turns, its socket, and what its `wfa` may do now.

Every request an agent's `wfa` sends arrives here as a message, so the agent's state
(in a turn or not, answer accepted, call ids) changes one message at a time. What is
allowed is decided by the pure rules in `rules.py`; this actor does the I/O around
them: it runs the harness, keeps the deadline, and tells the Recorder. Its socket admits
only the run's own process and what runs under the keeper of its live attempt (the run's
`LiveAttempts`, `admission.py`); anything else is refused before it becomes a message.
The socket listens only during a turn (from its first attempt until it settles), so an
agent that isn't in a turn holds no file descriptor.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import msgspec

from ..actors import Actor, ActorRef, Reply, handler
from ..errors import ActorError
from ..harnesses.base import Attempt, AttemptResult, Harness
from ..launcher.identity import LiveAttempts
from ..launcher.listener import ConnectionBudget, bind, serve
from ..launcher.place import agent_paths, make_agent_dir
from ..wire import (
    DEFAULT_WAITING_SECONDS,
    MIN_WAITING_SECONDS,
    PeersRequest,
    Request,
    Response,
    ResultRequest,
    ToolRequest,
    WaitingRequest,
    accepted,
    refused,
)
from ..wire.prompts import OWED_REMINDER, continuation_prompt, message_turn_prompt, usage_line
from ..wire.teaching import ReadError, Taught
from . import rules
from .admission import agent_admit
from .agent_mail import AgentMail
from .agent_tools import AgentTools, ToolRun
from .broker import CancelTool
from .clock import wall_ms
from .notice import notice
from .outcomes import Answered, Blocked, Cancelled, Failed, Outcome, TimedOut, Turn, Unanswered, add_usage
from .recorder import CallOpened, CandidateSeen, ResultAccepted, TurnEnded
from .switchboard import (
    DropAwait,
    GiveUp,
    MailWaiting,
    Presence,
    Register,
    Standings,
    StandingView,
    StateChanged,
    TakeMail,
)

RELEASE_GRACE_SECONDS = 30.0  # after an accepted answer, for the CLI to finish on its own
AGENT_MAILBOX_CAPACITY = 128


class WfaCall(msgspec.Struct, frozen=True):
    """A decoded `wfa` request that arrived on this agent's socket."""

    request: Request


class StartTurn(msgspec.Struct, frozen=True):
    call_id: str
    n: int
    prompt: str
    nudge_prompt: str
    taught: Any  # wire.teaching.Taught
    deadline: float  # on the event loop's clock; math.inf for none
    nudge: bool = True


class Describe(msgspec.Struct, frozen=True):
    """Asked once the agent is open: where its launcher is."""


class CancelTurn(msgspec.Struct, frozen=True):
    call_id: str
    reason: str
    timed_out: bool = False  # the caller's deadline passed: the turn ends timed-out


class CallRegistered(msgspec.Struct, frozen=True):
    """Told to the run: a call id is this agent's."""

    call_id: str
    agent: str


class WhoseCall(msgspec.Struct, frozen=True):
    """Asked of the run: which agent a call id belongs to, if any."""

    call_id: str


class _AttemptEnded(msgspec.Struct, frozen=True):
    call_id: str
    result: Any  # AttemptResult


class _TurnTimer(msgspec.Struct, frozen=True):
    call_id: str
    what: str  # "deadline", "release" or "wait"


class _TurnSettled(msgspec.Struct, frozen=True):
    call_id: str


class _QueuedExpired(msgspec.Struct, frozen=True):
    call_id: str


def _cancelled(msg: CancelTurn) -> Outcome:
    return TimedOut(msg.reason) if msg.timed_out else Cancelled(msg.reason)


@dataclass
class _Turn:
    call_id: str
    n: int
    prompt: str
    nudge_prompt: str
    taught: Taught
    deadline: float
    nudge_allowed: bool
    reply: Reply | None  # None for a turn a message started: nobody awaits it
    started_at: float
    kind: str = "workflow"  # or "message"
    nudged: bool = False
    reminded: bool = False  # of a reply it owes, once
    next_prompt: str | None = None  # the next attempt's prompt, when mail continues the turn
    last_refusal: str | None = None  # why its last answer was refused, for the outcome's reason
    accepted: bool = False
    value: Any = None
    attempt_running: bool = False
    waiting_until: float | None = None
    outcome: Outcome | None = None
    session: str | None = None
    usage: Any = None
    attempt_done: anyio.Event = field(default_factory=anyio.Event)
    scopes: list[anyio.CancelScope] = field(default_factory=list)
    settle_waiters: list[Reply] = field(default_factory=list)


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
    tools: Mapping[str, Any]  # name -> workflow.tools.Tool
    board: ActorRef  # the switchboard
    run_deadline: float
    attempts: LiveAttempts  # the run's, shared: whose processes the sockets admit


class AgentActor(AgentTools, AgentMail, Actor):
    def __init__(self, setup: AgentSetup) -> None:
        super().__init__()
        self.key = setup.key
        self.harness = setup.harness
        self.cwd = setup.cwd
        self.env = dict(setup.env)
        self.run = setup.run
        self.recorder = setup.recorder
        self.budget = setup.budget
        self.broker = setup.broker
        self.tools = dict(setup.tools)
        self.tool_run: ToolRun | None = None
        self.socket_path, self.launcher = agent_paths(setup.sockets)  # written at its first turn
        self.dir_made = False
        self.accepting: anyio.CancelScope | None = None  # while its socket listens: in a turn
        self.calls: dict[str, rules.CallView] = {}
        self.turn: _Turn | None = None
        self.pending: deque[tuple[StartTurn, Reply]] = deque()
        self.session: str | None = None
        self.board = setup.board
        self.run_deadline = setup.run_deadline
        self.attempts = setup.attempts
        self.message_turns = 0
        self.presence = Presence()  # the switchboard reads it: see _announce
        self.standings: Standings  # and the agent reads the switchboard's standing of it, from on_start

    async def on_start(self) -> None:
        self.standings = await self.board.ask(Register(self.key, "agent", self.ref, self.harness.can_await, self.presence))

    def _listen(self) -> None:
        """Open the agent's socket for its turn (its directory and launcher too, at the first):
        an agent holds a descriptor only while in a turn. Bound now, so a connection queues
        even before the task serving it runs."""
        if self.accepting is not None:
            return
        if not self.dir_made:
            make_agent_dir(self.socket_path, self.launcher)
            self.dir_made = True
        sock = bind(self.socket_path)
        self.accepting = anyio.CancelScope()

        async def handle(request: Request) -> Response:
            return await self.ref.ask(WfaCall(request))

        admit = agent_admit(self.key, self.attempts, self.recorder)
        self.start_soon(serve, sock, handle, self.budget, admit, self.accepting)

    def _unlisten(self) -> None:
        """The turn is over: its socket stops listening and gives its descriptor back (a
        connection then finds nobody there, as after the run). Requests already taken are answered."""
        if self.accepting is not None:
            self.accepting.cancel()
            self.accepting = None

    async def on_stop(self) -> None:
        """The agent is closing: a turn it hadn't settled, and turns still queued, end cancelled, on the record."""
        self._announce("stopped", "its agent was closed")
        await self.board.tell(StateChanged(self.key, "stopped", "its agent was closed"))  # its questions end
        reason = "the agent was closed (the run ended) before the turn did"
        try:
            if self.turn is not None:
                await self.recorder.ask(TurnEnded(self._record_of(self.turn, self.turn.outcome or Cancelled(reason))))
            for start, _ in self.pending:
                now = time.time()
                record: Turn[Any] = Turn(outcome=Cancelled(reason), agent=self.key, call_id=start.call_id, n=start.n, started_at=now, ended_at=now)
                await self.recorder.ask(TurnEnded(record))
        except ActorError:
            pass  # the whole run is going down at once: the record has its ending already

    def _record_of(self, turn: _Turn, outcome: Outcome) -> Turn:
        return Turn(
            outcome=outcome,
            agent=self.key,
            call_id=turn.call_id,
            n=turn.n,
            nudged=turn.nudged,
            started_at=time.time() - (anyio.current_time() - turn.started_at),
            ended_at=time.time(),
            usage=turn.usage,
            session=turn.session,
            started_by=turn.kind,
        )

    def _announce(self, state: str, reason: str = "") -> None:
        """Set the agent's state as `wfa peers` shows it to its peers: a slot, never a message that can overflow."""
        self.presence.state, self.presence.reason = state, reason

    @handler
    def describe(self, msg: Describe) -> Path:
        """The agent's launcher, once its socket is listening."""
        return self.launcher

    # Turns --------------------------------------------------------------------------

    @handler
    async def start_turn(self, msg: StartTurn) -> None:
        """Start a turn, or queue it behind the one running; its deadline runs while queued."""
        reply = self.defer()
        if self.turn is not None:
            self.pending.append((msg, reply))
            if not math.isinf(msg.deadline):
                self.start_soon(self._queued_timer, msg.call_id, msg.deadline)
            return
        await self._begin(msg, reply)

    def _new_turn(
        self,
        call_id: str,
        n: int,
        prompt: str,
        taught: Taught,
        deadline: float,
        *,
        kind: str = "workflow",
        nudge_prompt: str = "",
        nudge: bool = False,
        reply: Reply | None = None,
    ) -> _Turn:
        turn = _Turn(call_id, n, prompt, nudge_prompt, taught, deadline, nudge, reply, anyio.current_time(), kind)
        turn.attempt_done.set()
        self.turn = turn
        return turn

    async def _register_call(self, call_id: str) -> None:
        await self.run.tell(CallRegistered(call_id, self.key))

    async def _begin(self, msg: StartTurn, reply: Reply) -> None:
        turn = self._new_turn(
            msg.call_id, msg.n, msg.prompt, msg.taught, msg.deadline,
            nudge_prompt=msg.nudge_prompt, nudge=msg.nudge, reply=reply,
        )
        self.calls[msg.call_id] = rules.CallView(self.key, "open", msg.deadline)
        await self._register_call(msg.call_id)
        await self.recorder.ask(
            CallOpened(msg.call_id, self.key, msg.n, msg.prompt, msg.taught.schema, wall_ms(msg.deadline))
        )
        if anyio.current_time() >= msg.deadline:
            self._finish(turn, TimedOut("the turn's deadline passed while it waited for the agent's earlier turns"))
            return
        if not math.isinf(msg.deadline):
            self._spawn(turn, self._timer, turn.call_id, "deadline", msg.deadline)
        self._launch(turn)

    async def _queued_timer(self, call_id: str, at: float) -> None:
        await anyio.sleep_until(at)
        await self.ref.tell(_QueuedExpired(call_id))

    @handler
    async def queued_expired(self, msg: _QueuedExpired) -> None:
        """A queued turn's deadline passed before it could start: it ends timed-out now."""
        for index, (start, reply) in enumerate(self.pending):  # noqa: B007 (the match is used after the loop)
            if start.call_id == msg.call_id:
                del self.pending[index]
                break
        else:
            return
        outcome = TimedOut("the turn's deadline passed while it waited for the agent's earlier turns")
        await self._end_queued(start, reply, "expired", outcome)

    async def _end_queued(self, start: StartTurn, reply: Reply, state: rules.CallState, outcome: Outcome) -> None:
        """A turn that never started ends now: its call is recorded, and so is how it ended."""
        self.calls[start.call_id] = rules.CallView(self.key, state, start.deadline)
        await self.run.tell(CallRegistered(start.call_id, self.key))
        await self.recorder.ask(
            CallOpened(start.call_id, self.key, start.n, start.prompt, start.taught.schema, wall_ms(start.deadline))
        )
        now = time.time()
        record = Turn(outcome=outcome, agent=self.key, call_id=start.call_id, n=start.n, started_at=now, ended_at=now)
        await self.recorder.ask(TurnEnded(record))
        reply.set(record)

    async def _next(self) -> None:
        """After a turn: mail first (in a turn of its own), then the workflow's next turn."""
        mail = await self.board.ask(TakeMail(self.key))
        if mail:
            await self._message_turn(mail, self.standings.of(self.key))
        elif self.pending:
            start, reply = self.pending.popleft()
            await self._begin(start, reply)
        else:
            self._announce("idle")

    def _launch(self, turn: _Turn) -> None:
        attempt = Attempt(
            agent=self.key,
            call_id=turn.call_id,
            turn=turn.n,
            nudge=turn.nudged,
            prompt=turn.next_prompt or (turn.nudge_prompt if turn.nudged else turn.prompt),
            launcher=self.launcher,
            cwd=self.cwd,
            env=self.env,
            session=self.session,
            started_by=turn.kind,
        )
        turn.next_prompt = None
        try:
            self._listen()
        except OSError as error:  # no descriptor, or no room on disk: this turn fails, not the run
            self._finish(turn, Failed(f"the agent's socket could not be opened: {error}", False))
            return
        turn.attempt_running = True
        turn.attempt_done = anyio.Event()
        self._announce("working")
        self._spawn(turn, self._run_attempt, turn, attempt)

    async def _run_attempt(self, turn: _Turn, attempt: Attempt) -> None:
        keepers: list[int] = []

        def started(pid: int) -> None:  # from now on the socket admits what runs under `pid`
            keepers.append(pid)
            self.attempts.add(pid, self.key)

        if self.harness.spawns:  # until `started`: a connection waits for the keeper's pid
            self.attempts.begin(self.key)
        try:
            try:
                result = await self.harness.run(replace(attempt, started=started))
            except Exception as error:  # a harness that breaks fails the turn, not the run
                result = AttemptResult(
                    rules.AttemptEnding("failed", reason=f"the agent could not be run: {error}", retryable=False)
                )
            await self.ref.tell(_AttemptEnded(turn.call_id, result))
        finally:
            if not keepers and self.harness.spawns:  # it never started
                self.attempts.end(self.key)
            for pid in keepers:  # the harness is done: nothing under them is left
                self.attempts.remove(pid)
            turn.attempt_done.set()

    async def _timer(self, call_id: str, what: str, at: float) -> None:
        await anyio.sleep_until(at)
        await self.ref.tell(_TurnTimer(call_id, what))

    def _spawn(self, turn: _Turn, fn: Callable[..., Any], *args: Any) -> None:
        scope = anyio.CancelScope()
        turn.scopes.append(scope)

        async def in_scope() -> None:
            with scope:
                await fn(*args)

        self.start_soon(in_scope)

    def _current(self, call_id: str) -> _Turn | None:
        turn = self.turn
        if turn is None or turn.call_id != call_id or turn.outcome is not None:
            return None
        return turn

    @handler
    async def attempt_ended(self, msg: _AttemptEnded) -> None:
        turn = self._current(msg.call_id)
        if turn is None:
            return
        result: AttemptResult = msg.result
        turn.attempt_running = False
        self.session = result.session or self.session
        turn.session = self.session
        turn.usage = add_usage(turn.usage, result.usage)
        ending = result.ending
        if not turn.accepted and ending.kind == "exited" and ending.exit_code == 0:
            if await self._continue_with_mail(turn):
                return
            standing: StandingView = self.standings.of(self.key)
            if standing.awaits is not None:
                self._announce("awaiting-reply")  # the reply (or word that none comes) continues the turn
                return
            if standing.owes and not turn.reminded:
                turn.reminded = True
                turn.next_prompt = await self._reminder(turn, standing)
                self._launch(turn)
                return
            if standing.owes:
                await self.board.tell(GiveUp(self.key))
            if turn.kind == "message":
                self._finish(turn, Answered(None))
                return
        waiting = turn.waiting_until is not None and anyio.current_time() < turn.waiting_until
        step = rules.after_attempt(
            ending, accepted=turn.accepted, nudged=turn.nudged, nudge_allowed=turn.nudge_allowed, waiting=waiting
        )
        self._take(turn, step, ending)

    async def _continue_with_mail(self, turn: _Turn) -> bool:
        """Start the turn's next attempt with its unread mail, if it has any."""
        mail = await self.board.ask(TakeMail(self.key))
        if not mail:
            return False
        peers = await self._peers_block()
        if turn.kind == "message":
            turn.next_prompt = message_turn_prompt(mail, launcher=self.launcher, peers=peers, tools=self.tools)
        else:
            turn.next_prompt = continuation_prompt(
                mail, launcher=self.launcher, call_id=turn.call_id, taught=turn.taught, peers=peers, tools=self.tools
            )
        turn.waiting_until = None
        self._launch(turn)
        return True

    async def _reminder(self, turn: _Turn, standing: StandingView) -> str:
        text = OWED_REMINDER.format(peers=", ".join(standing.owes), first=standing.owes[0])
        peers = await self._peers_block()
        if turn.kind == "message":
            return message_turn_prompt([], launcher=self.launcher, peers=peers, tools=self.tools, reminder=text)
        return f"{text}\n\n{turn.nudge_prompt or turn.prompt}"

    @handler
    async def mail_waiting(self, msg: MailWaiting) -> None:
        """Mail arrived: read now if the agent has nothing running, else when its attempt ends."""
        turn = self.turn
        if turn is None:
            await self._next()
        elif turn.outcome is None and not turn.attempt_running and not turn.accepted:
            await self._continue_with_mail(turn)

    def _take(self, turn: _Turn, step: rules.TurnNext, ending: rules.AttemptEnding) -> None:
        if step == "answered":
            self._finish(turn, Answered(turn.value))
        elif step == "nudge":
            turn.nudged = True
            turn.waiting_until = None
            self._launch(turn)
        elif step == "wait":
            assert turn.waiting_until is not None
            self._spawn(turn, self._timer, turn.call_id, "wait", turn.waiting_until)
        elif step == "unanswered":
            after = " after a nudge" if turn.nudged else ""
            refused = f"; its last answer was refused: {turn.last_refusal}" if turn.last_refusal else ""
            self._finish(turn, Unanswered(f"the agent finished{after} without an accepted answer{refused}"))
        elif step == "failed":
            self._finish(turn, Failed(ending.reason, ending.retryable))
        elif step == "blocked":
            self._finish(turn, Blocked(ending.reason))
        else:
            self._finish(turn, TimedOut(ending.reason))

    @handler
    def turn_timer(self, msg: _TurnTimer) -> None:
        turn = self._current(msg.call_id)
        if turn is None:
            return
        if msg.what == "deadline" and not turn.accepted:
            self.calls[turn.call_id] = rules.CallView(self.key, "expired", turn.deadline)
            self._finish(turn, TimedOut("the turn's deadline passed before an answer was accepted"))
        elif msg.what in ("deadline", "release"):
            self._finish(turn, Answered(turn.value))
        elif msg.what == "wait" and not turn.attempt_running and anyio.current_time() < turn.deadline:
            # a wait that runs to the deadline ends there: the deadline, not a nudge, ends the turn
            turn.waiting_until = None
            ending = rules.AttemptEnding("exited")
            step = rules.after_attempt(
                ending, accepted=turn.accepted, nudged=turn.nudged, nudge_allowed=turn.nudge_allowed, waiting=False
            )
            self._take(turn, step, ending)

    @handler
    async def cancel_turn(self, msg: CancelTurn) -> None:
        """Cancel a running or queued turn; answered once its CLI is gone."""
        reply = self.defer()
        for index, (start, queued) in enumerate(self.pending):
            if start.call_id == msg.call_id:
                del self.pending[index]
                await self._end_queued(start, queued, "ended", _cancelled(msg))
                reply.set(None)
                return
        turn = self.turn
        if turn is None or turn.call_id != msg.call_id:
            reply.set(None)
            return
        turn.settle_waiters.append(reply)
        if turn.outcome is None:
            self._finish(turn, _cancelled(msg))

    def _finish(self, turn: _Turn, outcome: Outcome) -> None:
        """End the turn: stop its CLI and timers, then settle once the CLI is gone."""
        turn.outcome = outcome
        if self.calls[turn.call_id].state == "open":
            self.calls[turn.call_id] = rules.CallView(self.key, "ended", turn.deadline)
        for scope in turn.scopes:
            scope.cancel()
        if self.tool_run is not None:  # told beside the handler, waiting for room: never dropped, never a crash
            self.start_soon(self.broker.tell, CancelTool(self.tool_run.call.id))

        async def settle() -> None:
            await turn.attempt_done.wait()
            await self.ref.tell(_TurnSettled(turn.call_id))

        self.start_soon(settle)

    @handler
    async def turn_settled(self, msg: _TurnSettled) -> None:
        turn = self.turn
        if turn is None or turn.call_id != msg.call_id or turn.outcome is None:
            return
        self.turn = None
        self._unlisten()
        record = self._record_of(turn, turn.outcome)
        await self.recorder.ask(TurnEnded(record))
        standing: StandingView = self.standings.of(self.key)
        if standing.owes:  # its askers get no answer from this turn, and are told so
            why = f"{self.key}'s turn ended {turn.outcome.kind} without replying"
            await self.board.tell(GiveUp(self.key, why))
        if standing.awaits is not None:  # a question dies with the turn that asked it
            await self.board.tell(DropAwait(self.key))
        if turn.reply is not None:
            turn.reply.set(record)
        for waiter in turn.settle_waiters:
            waiter.set(None)
        await self._next()

    # wfa ----------------------------------------------------------------------------

    def _view(self, standing: StandingView | None = None) -> rules.AgentView:
        return rules.AgentView(
            self.key,
            tool_running=self.tool_run is not None,
            owes=standing.owes if standing else (),
            supports_waiting=self.harness.supports_waiting,
            owed_text=standing.owed_text if standing else "",
        )

    async def _call(self, call_id: str) -> rules.CallView | None:
        call = self.calls.get(call_id)
        if call is not None:
            return call
        owner = await self.run.ask(WhoseCall(call_id))
        return None if owner is None else rules.CallView(owner, "open")

    @handler
    async def wfa(self, msg: WfaCall) -> Response:
        request = msg.request
        if isinstance(request, PeersRequest):
            return await self._peers(request)  # its table says what the agent owes
        if isinstance(request, ToolRequest):
            response = await self._tool(request)
            if response is None:  # the call runs: tool_done answers it, notice and all
                return accepted("tool")
            lead = notice(self.standings.of(self.key))
            return msgspec.structs.replace(response, stderr=lead + response.stderr) if lead else response
        standing: StandingView = self.standings.of(self.key)
        if isinstance(request, ResultRequest):
            response = await self._result(request, standing)
        elif isinstance(request, WaitingRequest):
            response = await self._waiting(request, standing)
        else:
            response = await self._post(request)
            standing = self.standings.of(self.key)
        lead = notice(standing)
        return msgspec.structs.replace(response, stdout=lead + response.stdout) if lead else response

    async def _result(self, request: ResultRequest, standing: StandingView) -> Response:
        now = anyio.current_time()
        view = self._view(standing)
        refusal = rules.judge_result(view, request.call_id, await self._call(request.call_id), now)
        if refusal is not None:
            return refused("result", refusal.code, refusal.message)
        turn = self.turn
        assert turn is not None and turn.call_id == request.call_id
        try:
            value = turn.taught.read(request.args, request.input)
        except ReadError as error:
            await self.recorder.ask(
                CandidateSeen(request.call_id, time.time(), request.args, request.input, False, str(error))
            )
            turn.last_refusal = str(error)
            return refused("result", "invalid-result", self._fix_hint(turn, str(error)))
        if not await self.recorder.ask(ResultAccepted(request.call_id, value)):
            return refused(
                "result", "internal-error", "the run couldn't record your answer, so it isn't accepted; try again."
            )
        await self.recorder.ask(CandidateSeen(request.call_id, time.time(), request.args, request.input, True))
        turn.accepted = True
        turn.value = value
        self.calls[turn.call_id] = rules.CallView(self.key, "accepted", turn.deadline)
        if standing.awaits is not None:
            await self.board.tell(DropAwait(self.key))  # answered: the wait for a reply is dropped
        if not turn.attempt_running:
            self._finish(turn, Answered(value))
        else:
            release_at = min(turn.deadline, now + RELEASE_GRACE_SECONDS)
            self._spawn(turn, self._timer, turn.call_id, "release", release_at)
        return accepted("result", stdout="wfa: result accepted.\n")

    def _fix_hint(self, turn: _Turn, error: str) -> str:
        usage = usage_line(f"{self.launcher} result {turn.call_id}", turn.taught)
        return f"the answer doesn't fit: {error}\nFix it and run wfa result again.\n{usage}"

    async def _waiting(self, request: WaitingRequest, standing: StandingView) -> Response:
        now = anyio.current_time()
        view = self._view(standing)
        refusal = rules.judge_waiting(view, request.call_id, await self._call(request.call_id), now)
        if refusal is not None:
            return refused("waiting", refusal.code, refusal.message)
        if standing.awaits is not None:
            return accepted("waiting", stdout=f"wfa: {standing.awaits}'s reply is already awaited; nothing changed.\n")
        reason = request.reason.strip()
        if not reason or len(request.reason.encode()) > 2048:
            return refused("waiting", "invalid-request", "--reason must be non-blank text of at most 2,048 bytes.")
        turn = self.turn
        assert turn is not None
        requested = None if request.timeout_ms is None else request.timeout_ms / 1000
        turn.waiting_until = rules.waiting_until(
            now, turn.deadline, requested, default=DEFAULT_WAITING_SECONDS, minimum=MIN_WAITING_SECONDS
        )
        until_ms, deadline_ms = wall_ms(turn.waiting_until), wall_ms(turn.deadline)
        text = f"wfa: waiting granted until {until_ms}"
        text += f"; the turn's deadline is {deadline_ms}.\n" if deadline_ms is not None else ".\n"
        return accepted("waiting", stdout=text, value={"wait_until_ms": until_ms, "deadline_ms": deadline_ms})
