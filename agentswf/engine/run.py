"""The RunActor and the run's actor tree.

A run's Supervisor starts the Recorder first, then the approval desk, the ToolBroker,
the Switchboard and the RunActor, then one AgentActor per opened agent (and a
RouteActor per route); stopping goes in reverse, so
agents (and their CLIs) are gone before the run stops answering and the Recorder
writes last. The RunActor knows
every agent and every call id of the run, which is what `wrong-agent` needs. The run's
directory of sockets has a watchdog (`engine.watchdog`) for as long as the run lives, so
that a run killed with `kill -9` leaves no process carrying its mark and no directory.

A run leaves the process's cyclic garbage collector as it found it: the process is its
program's, which paces it for many agents (`engine.collector`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import msgspec

from ..actors import Actor, ActorRef, Supervisor, Tracer, handler
from ..harnesses.base import Harness
from ..harnesses.keeper import MARK_VARIABLE
from ..harnesses.pane_keep import RUN_PANES, PanesToKeep
from ..harnesses.said import Said
from ..launcher.identity import LiveAttempts
from ..launcher.listener import ConnectionBudget, connection_limit, listen
from ..launcher.place import agent_paths, make_run_dir, remove_run_dir
from ..wire import MAX_OPEN_CONNECTIONS
from .accounting import Ledger
from .admission import operator_admit
from .agent.actor import AgentActor
from .agent.attempt import RUN_TIMERS, RunTimers
from .agent.messages import AGENT_MAILBOX_CAPACITY, AgentSetup
from .mail.rules import IN_A_TURN
from .mail.switchboard import Presence, Register, StandingSlot, Switchboard
from .operator import RunControl, serve_operator
from .operator_wire import OPERATOR_SOCKET_NAME
from .record.recorder import Appends, LogLines, Recorder, disk_waits
from .tell import tell
from .tools.approvals import ApprovalDesk
from .tools.broker import Replay, ToolBroker, ToolCalls
from .tools.policy import Policy
from .watchdog import watched

RUN_MAILBOX_CAPACITY = 256
RECORDER_MAILBOX_CAPACITY = 1024
STOP_GRACE_SECONDS = 5.0
CONNECTIONS_PER_AGENT = 4
"""Each open agent's share of the run's connection budget (never below MAX_OPEN_CONNECTIONS):
a fixed budget for the whole run refuses well-behaved agents once enough of them call at once.
Never more than the share of file descriptors `connection_limit` allows."""


class OpenAgent(msgspec.Struct, frozen=True):
    key: str
    harness: Harness
    cwd: Path
    env: Mapping[str, str]
    tools: Mapping[str, Any]
    session: str | None = None  # a fork's copy of its parent's session, or a continued run's on record
    forked_from: str | None = None


class CloseAgent(msgspec.Struct, frozen=True):
    """Stop these agents, one after another; answered once all of them have stopped (one
    message and one task for a run's thousand agents at its end, not one each)."""

    keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class OpenedAgent:
    ref: ActorRef
    launcher: Path
    standing: StandingSlot  # the switchboard sets it, the agent (and its turns' prompts) read it


class RunActor(Actor):
    def __init__(
        self, supervisor: Supervisor, recorder: ActorRef, appends: Appends, services: RunServices, sockets: Path,
        timers: RunTimers,
    ) -> None:
        super().__init__()
        self.timers = timers  # every turn's timers of the run, on a task of this actor's
        self.supervisor = supervisor
        self.recorder = recorder
        self.appends = appends
        self.broker = services.broker
        self.desk = services.desk
        self.board = services.board
        self.slots_kept = services.slots_kept
        self.deadline = services.deadline
        self.stop_run = services.stop
        self.sockets = sockets
        self.budget = ConnectionBudget()
        self.attempts = LiveAttempts()
        self.agents: dict[str, ActorRef] = {}
        self.presences: dict[str, Presence] = {}  # each open agent's state as it sets it: in a turn, or not
        self.calls: dict[str, str] = {}  # every call id of the run, its agent's: each agent adds its own
        self.agent_dirs: set[str] = set()  # the names given its agents' directories: never one twice
        self._env: tuple[Mapping[str, str], Mapping[str, str]] | None = None  # the last env given, and it marked

    def _marked(self, env: Mapping[str, str]) -> Mapping[str, str]:
        """`env` with the run's mark, on every agent process; the run's agents mostly share one env,
        so one copy serves them (an AgentSetup's env is only read)."""
        if self._env is None or self._env[0] is not env:
            self._env = (env, {**env, MARK_VARIABLE: self.sockets.name})
        return self._env[1]

    async def on_start(self) -> None:
        listener = await listen(self.sockets / OPERATOR_SOCKET_NAME)
        admit = operator_admit(self.attempts, self.recorder, self.sockets.name)
        control = RunControl(lambda: tuple(self.agents), self.in_turn, self.stop_run, self.running_tools, self.said)
        self.start_soon(serve_operator, listener, self.desk, self.board, admit, control)
        self.start_soon(self.timers.run, self.start_soon)

    def in_turn(self) -> dict[str, bool]:
        """Which agents are in a turn, as they say it (working, or awaiting a reply within it): what
        `awf status` says, as the record's turn started and not ended says it to `awf tail` and the live view."""
        return {key: presence.state in IN_A_TURN for key, presence in self.presences.items()}

    def said(self) -> dict[str, Said | None]:
        """Each agent's latest attempt's output, as it comes (`awf status`: its latest line)."""
        return {key: presence.said for key, presence in self.presences.items()}

    def running_tools(self) -> dict[str, list[str]]:
        """The tools whose handlers run now, by the agent that called them (`awf status`, the live view)."""
        running: dict[str, list[str]] = {}
        for handling in self.broker.handling.values():
            running.setdefault(handling.msg.call.agent, []).append(handling.msg.call.tool)
        return running

    @handler
    async def open_agent(self, msg: OpenAgent) -> OpenedAgent:
        """The agent, started and registered on the switchboard: told, so before any later
        message of the board's (the workflow's first `PeersOf` of it among them) is handled,
        and with no wait for the agent's own task to run."""
        socket_path, launcher = agent_paths(self.sockets, self.agent_dirs)
        self.agent_dirs.add(socket_path.parent.name)
        presence, standing = Presence(), StandingSlot()
        if self.slots_kept:  # a new agent has no mail and no route until its Register is handled, and none comes before
            standing.unread = standing.routed = False
        setup = AgentSetup(
            key=msg.key,
            harness=msg.harness,
            cwd=msg.cwd,
            env=self._marked(msg.env),
            socket_path=socket_path,
            launcher=launcher,
            presence=presence,
            standing=standing,
            calls=self.calls,
            recorder=self.recorder,
            appends=self.appends,
            budget=self.budget,
            broker=self.broker,
            tools=msg.tools,
            board=self.board,
            run_deadline=self.deadline,
            attempts=self.attempts,
            session=msg.session,
            forked_from=msg.forked_from,
        )
        ref = self.supervisor.spawn(AgentActor, setup, name=f"agent:{msg.key}", capacity=AGENT_MAILBOX_CAPACITY)
        self.agents[msg.key] = ref
        self.presences[msg.key] = presence
        self._size_budget()
        register = Register(
            key=msg.key, kind="agent", ref=ref, can_await=msg.harness.can_await, presence=presence, standing=standing
        )
        await tell(self.board, register)
        return OpenedAgent(ref, launcher, standing)

    @handler
    def close_agent(self, msg: CloseAgent) -> None:
        """Stop the agents beside the handlers, so they can still ask the run while they stop."""
        reply = self.defer()
        refs = [ref for ref in (self.agents.pop(key, None) for key in msg.keys) if ref is not None]
        for key in msg.keys:
            self.presences.pop(key, None)
        self._size_budget()
        if not refs:
            reply.set(None)
            return

        async def stop() -> None:
            try:
                for ref in refs:
                    await ref.stop()
            finally:
                reply.set(None)

        self.start_soon(stop)

    def _size_budget(self) -> None:
        self.budget.limit = connection_limit(max(MAX_OPEN_CONNECTIONS, CONNECTIONS_PER_AGENT * len(self.agents)))



@dataclass(frozen=True, slots=True)
class RunServices:
    """The run-wide actors an agent works with, the run's deadline (loop clock), and its stop
    (`awf stop`: False when the run is already stopping)."""

    broker: ToolCalls  # called in each agent's connection task; its watchdog in the ToolBroker's cell
    desk: ActorRef
    board: ActorRef
    deadline: float
    stop: Callable[[str], bool]
    slots_kept: bool = False  # the board is the local Switchboard, which keeps `StandingSlot.unread` and `routed` exact


def _no_stop(reason: str) -> bool:
    return False


@dataclass(frozen=True, slots=True)
class RunActors:
    run: ActorRef
    recorder: ActorRef
    desk: ActorRef
    broker: ActorRef
    board: ActorRef
    supervisor: Supervisor
    control: Path  # the operator socket: awf approve / reject
    log_lines: LogLines  # wf.log's way to the Recorder
    ledger: Ledger  # what the run spent, kept by the Recorder as turns end


@asynccontextmanager
async def run_actors(
    record_dir: Path,
    *,
    deadline: float,
    policies: Sequence[Policy] = (),
    replay: Replay | None = None,
    stop: Callable[[str], bool] = _no_stop,
    tracer: Tracer | None = None,
    ledger: Ledger | None = None,
    board: tuple[type[Actor], tuple[Any, ...]] | None = None,
) -> AsyncIterator[RunActors]:
    """The run's actors, for as long as the block lasts; nothing of them outlives it.

    `board` is the switchboard to start instead of the local one, with its arguments (a
    Temporal worker's, whose board is its run's workflow).

    With `tracer`, every mailbox event of these actors goes to it (`--trace`). `ledger` is the
    one the Recorder keeps (a continued run's goes on from its earlier attempts')."""
    sockets = make_run_dir()
    timers = RunTimers()
    started_with = RUN_TIMERS.set(timers)  # what the actors started here run inherits: their turns' timers
    panes = PanesToKeep()
    panes_set = RUN_PANES.set(panes)  # and the panes their agents keep
    try:
        async with watched(sockets), Supervisor("run", stop_grace=STOP_GRACE_SECONDS, tracer=tracer) as supervisor:
            log_lines, appends, ledger = LogLines(), Appends(), ledger or Ledger()
            recorder = supervisor.spawn(
                Recorder, record_dir, log_lines, appends, ledger, *disk_waits(), name="recorder",
                capacity=RECORDER_MAILBOX_CAPACITY,
            )
            desk = supervisor.spawn(ApprovalDesk, recorder, name="approvals", capacity=RUN_MAILBOX_CAPACITY)
            calls = ToolCalls(recorder, appends, desk, policies, replay)
            broker = supervisor.spawn(ToolBroker, calls, name="tools", capacity=RUN_MAILBOX_CAPACITY)
            factory, args = board or (Switchboard, (supervisor, appends.ask))
            switchboard = supervisor.spawn(factory, *args, name="switchboard", capacity=RUN_MAILBOX_CAPACITY)
            services = RunServices(calls, desk, switchboard, deadline, stop, slots_kept=board is None)
            run = supervisor.spawn(
                RunActor, supervisor, recorder, appends, services, sockets, timers, name="run",
                capacity=RUN_MAILBOX_CAPACITY,
            )
            yield RunActors(
                run, recorder, desk, broker, switchboard, supervisor, sockets / OPERATOR_SOCKET_NAME, log_lines, ledger
            )
    finally:
        RUN_TIMERS.reset(started_with)
        RUN_PANES.reset(panes_set)
        remove_run_dir(sockets)
        with anyio.CancelScope(shield=True):
            await panes.keep_all()  # its agents' kept panes, now nothing of the run is there to reach

