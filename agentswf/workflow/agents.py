"""`wf.agents.open(...)` and the `Agent` a workflow gives turns to."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar, overload

import msgspec

from ..actors import ActorRef, backend
from ..engine import clock
from ..engine.accounting import Ledger
from ..engine.agent.messages import StopAgent
from ..engine.ids import new_id
from ..engine.mail.switchboard import WORKFLOW_KEY
from ..engine.outcomes import Turn
from ..engine.run import CloseAgent, OpenAgent, OpenedAgent
from ..engine.tools.call import CURRENT_TOOL_CALL
from ..errors import ActorStopped, AgentClosed, DefinitionError, WorkflowError
from ..harnesses.base import Harness
from ..harnesses.capabilities import EFFORT_LEVELS, TABLE, refusal
from ..harnesses.cli_version import CliChecks, CliVersion
from ..harnesses.pane import PaneHarness, in_a_pane
from ..harnesses.runtime import Runtime, resolve_runtime
from ..harnesses.usage import Usage
from ..harnesses.versions import TESTED
from ..sandbox.copies import forkable
from ..sandbox.runner import Sandbox, SandboxedHarness
from ..sandbox.spec import SandboxSpec
from ..wire.teaching import Taught
from .budgets import Budgets
from .durable import Durable
from .durations import Duration
from .loading import type_text
from .local import LocalDriver
from .port import AgentDriver, AgentsPort
from .sandboxes import Sandboxes, sandbox_cwd
from .tools import Tool, check_tools
from .worktrees import LOCAL_GIT_VARIABLES

MAX_KEY_CHARS = 64
_KEY_CHARACTERS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-")

HarnessResolver = Callable[[str, Runtime], Harness]
T = TypeVar("T")


def check_key(key: str) -> str:
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS or not set(key) <= _KEY_CHARACTERS:
        raise DefinitionError(
            f"{key!r} is not an agent key: use letters, digits, '.', '_', ':' and '-', "
            f"at most {MAX_KEY_CHARS} characters"
        )
    return key


def check_turn(key: str, prompt: object, schema: Any, timeout: Duration | None, deadline: object) -> Taught:
    """What `agent.run` is given, checked (on every engine): its prompt text, one bound, its schema taught."""
    if timeout is not None and deadline is not None:
        raise DefinitionError("a turn takes a timeout or a deadline, not both")
    if not isinstance(prompt, str):
        raise DefinitionError(f"agent {key}: a turn's prompt is text (a str), not {type(prompt).__name__}")
    if not prompt.strip():
        raise DefinitionError(f"agent {key}: a turn needs a prompt")
    return taught_of(schema)


TAUGHT_KEPT = 256  # turn schemas whose teaching is kept: a thousand agents' turns of one type teach it once


def taught_of(schema: Any) -> Taught:
    try:
        hash(schema)
    except TypeError:  # no type msgspec takes is unhashable: Taught says what is wrong with it
        return _teach(schema)
    return _taught_once(schema)


@functools.lru_cache(maxsize=TAUGHT_KEPT)
def _taught_once(schema: Any) -> Taught:
    """A schema's Taught is read-only once made, so turns of the same type share one."""
    return _teach(schema)


def _teach(schema: Any) -> Taught:
    try:
        return Taught(str if schema is None else schema)
    except (TypeError, ValueError) as error:
        raise DefinitionError(f"{type_text(schema)} can't be a turn's schema: {error}") from None


class AgentSpec(msgspec.Struct, frozen=True):
    runtime: Runtime
    instructions: str | None
    cwd: str


class ForkSpec(msgspec.Struct, frozen=True):
    """What a fork was asked with: the same key, parent and spec give the same agent."""

    parent: str
    tools: tuple[tuple[str, str], ...] | None  # names and descriptions; None: the parent's
    instructions: str | None
    effort: str | None
    cwd: str | None


def _capable(harness: str, name: str) -> str | None:
    """Why `harness` can't do `name` (a harness outside the table, e.g. a test's, can)."""
    return refusal(harness, name) if harness in TABLE else None


def check_effort(key: str, harness: str, effort: str | None) -> None:
    if effort is None:
        return
    levels = EFFORT_LEVELS.get(harness)
    if levels is None:
        why = _capable(harness, "effort") or "it lists no effort levels"
        raise DefinitionError(f"agent {key}: {harness} can't take effort={effort!r}: {why}")
    if effort not in levels:
        raise DefinitionError(f"agent {key}: {harness} has no effort {effort!r}; its levels are {', '.join(levels)}")


def _not_from_own_handler(key: str, what: str) -> None:
    call = CURRENT_TOOL_CALL.get()
    if call is not None and call.agent == key:
        raise WorkflowError(
            f"a tool handler can't {what} agent {key}: it is the agent that called {call.tool}, "
            "and it is waiting for this handler. Another agent can be run."
        )


class Agent:
    """One agent of the run, from `wf.agents.open`. Its turns run one at a time, in the order given.

    What it is given is checked here, on either engine; its engine's driver (port.AgentDriver) runs it.

    Attributes:
        key: the agent's key in the run (a route's end, a peer's name).
        tools: the tools it can call, by name.
        launcher: the path of its `wfa` launcher, as its prompts teach it (None on Temporal: a
            launcher is made on each turn's worker).
        closed: whether it was closed; a closed agent takes no more turns.
        sandbox: the sandbox its turns run in, or None.
    """

    def __init__(
        self, key: str, spec: AgentSpec, tools: dict[str, Tool], agents: Agents, driver: AgentDriver, *,
        settings: tuple[str | None, str | None], launcher: Path | None = None, sandbox: Any = None,
        resumed: str | None = None,
    ) -> None:
        self.key = key
        self.spec = spec
        self.tools = tools
        self._agents = agents  # the run's Agents: its budgets, ledger, durable records and forks
        self._driver = driver
        self.launcher = launcher
        self.sandbox = sandbox
        self._turns = 0
        self._history = resumed is not None  # its session has an earlier attempt's turns: it forks before one of its own
        self._ops = 0  # compactions, sets and forks, numbered apart from turns
        self._by_id: dict[str, tuple[Any, Turn[Any]]] = {}
        self._compactions: dict[str, tuple[str, Turn[Any]]] = {}
        self.closed = False
        self.stopped: str | None = None  # why `wf.agents.stop` stopped it
        self.model, self.effort = settings  # as `set` left them

    def count_from(self, n: int) -> None:
        """Number its next turn `n`: an agent a Temporal worker opens for one turn goes on with the
        workflow's count (WFA_TURN, a script's `turn.n`)."""
        self._turns = n - 1

    @property
    def usage(self) -> Usage | None:
        """What this agent's ended turns spent, every turn a message started too; None while unknown."""
        return self._agents.ledger.agent(self.key)

    @overload
    async def run(
        self,
        prompt: str,
        *,
        schema: None = None,
        timeout: Duration | None = None,
        deadline: datetime | float | None = None,
        id: str | None = None,
        nudge: bool = True,
    ) -> Turn[str]: ...

    @overload
    async def run(
        self,
        prompt: str,
        *,
        schema: type[T],
        timeout: Duration | None = None,
        deadline: datetime | float | None = None,
        id: str | None = None,
        nudge: bool = True,
    ) -> Turn[T]: ...

    @overload
    async def run(
        self,
        prompt: str,
        *,
        schema: Any,
        timeout: Duration | None = None,
        deadline: datetime | float | None = None,
        id: str | None = None,
        nudge: bool = True,
    ) -> Turn[Any]: ...

    async def run(
        self,
        prompt: str,
        *,
        schema: Any = None,
        timeout: Duration | None = None,
        deadline: datetime | float | None = None,
        id: str | None = None,
        nudge: bool = True,
    ) -> Turn[Any]:
        """Give the agent a turn and wait for how it ends; never raises for the outcome.

        `schema` is a msgspec type the answer must fit (a Struct, a list of them, a
        Literal, ...); without one the answer is text. The turn is a `Turn[schema]`:
        `turn.value` is the validated answer. `timeout` or `deadline` (a datetime, or Unix
        seconds) bounds it; `id` makes it idempotent (the same turn given again returns
        the first one's Turn); `nudge=False` doesn't nudge an agent that ends silent.
        """
        self._check_usable("run")
        taught = check_turn(self.key, prompt, schema, timeout, deadline)
        identity = None if id is None else (prompt, msgspec.json.encode(taught.schema), timeout, deadline, nudge)
        if id is not None and id in self._by_id:
            earlier, given = self._by_id[id]
            if earlier != identity:
                raise DefinitionError(f"agent {self.key}: turn id {id!r} was used before for a different turn")
            return given
        driver = self._driver
        driver.check_schema(self.key, taught)
        durable = self._agents.durable
        if durable is not None:  # an id'd turn answered in an earlier attempt is given back, not run
            recorded = durable.given(self.key, id, prompt, taught.schema, taught.type)
            if recorded is not None:
                if id is not None:
                    self._by_id[id] = (identity, recorded)
                return recorded
        own_deadline = driver.deadline(timeout, deadline)
        budgets = self._agents.budgets
        wall_left, wall_scope = budgets.wall_left(self.key)
        turn_deadline = min(own_deadline, driver.clock() + wall_left)  # a wall budget stops it in flight
        self._turns += 1
        n = self._turns  # taken before any await: turns given at once each get their own number
        stage = budgets.stage
        refusal = budgets.refusal(self.key)
        if refusal is not None:  # past a budget: the turn doesn't start
            now = driver.wall()
            refused = budgets.refused_turn(self.key, n, driver.new_id(), refusal)
            return msgspec.structs.replace(refused, started_at=now, ended_at=now)
        budgets.begin(self.key, stage)
        turn = await driver.turn(self, n, prompt, taught, turn_deadline, nudge)
        budgets.spend(self.key, stage, turn)
        if turn.outcome.kind == "timed-out" and turn_deadline < own_deadline:
            turn = budgets.stopped_turn(turn, wall_scope)
        driver.ended(turn, n)
        if durable is not None:
            await durable.ended(self.key, self.spec.runtime.harness, id, prompt, taught.schema, turn)
        if id is not None:
            self._by_id[id] = (identity, turn)
        return turn

    def _check_usable(self, what: str) -> None:
        _not_from_own_handler(self.key, what)
        if self.stopped is not None:
            raise AgentClosed(f"agent {self.key} was stopped ({self.stopped}); its key is not opened again")
        if self.closed:
            raise AgentClosed(f"agent {self.key} is closed; open another key to give it work")

    async def compact(
        self, focus: str, *, timeout: Duration | None = None, deadline: datetime | float | None = None,
        id: str | None = None,
    ) -> Turn[str]:
        """Have the harness compact the agent's context with `focus`; never raises for the outcome.

        `answered` means it compacted: the value is the summary where the CLI gives one (`""`
        where it keeps it private). Any other outcome leaves the context as it was. Where the
        harness can't compact, it fails at once, sending nothing. `id` makes it idempotent.
        """
        self._check_usable("compact")
        if not isinstance(focus, str):
            raise DefinitionError(f"agent {self.key}: a compaction's focus is text")
        if timeout is not None and deadline is not None:
            raise DefinitionError("a compaction takes a timeout or a deadline, not both")
        if id is not None and id in self._compactions:
            earlier, given = self._compactions[id]
            if earlier != focus:
                raise DefinitionError(f"agent {self.key}: compaction id {id!r} was reused with a different focus")
            return given
        limit = self._driver.deadline(timeout, deadline)
        self._ops += 1
        why = _capable(self.spec.runtime.harness, "compact")
        record = await self._driver.compact(self, self._ops, focus, limit, why)
        if id is not None:
            self._compactions[id] = (focus, record)
        return record

    async def set(self, *, model: str | None = None, effort: str | None = None) -> Turn[None]:
        """Switch the model and/or effort of every later operation; the session is kept.

        Refused before it runs for an effort the harness doesn't list, a harness that can't
        switch (the capability table says why), or an agent in a pane.
        """
        self._check_usable("set")
        harness = self.spec.runtime.harness
        why = _capable(harness, "set")
        if why is not None:
            raise DefinitionError(f"agent {self.key}: {harness} can't switch model or effort: {why}")
        if self.spec.runtime.placement == "pane":
            raise DefinitionError(f"agent {self.key}: {in_a_pane(harness, 'switch model or effort')}")
        if model is None and effort is None:
            raise DefinitionError(f"agent {self.key}: set needs a model or an effort")
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise DefinitionError(f"agent {self.key}: {model!r} is not a model name")
        check_effort(self.key, harness, effort)
        self._ops += 1
        record = await self._driver.set(self, self._ops, model, effort)
        if record.answered:
            self.model, self.effort = record.model, record.effort
        return record

    async def fork(
        self,
        key: str,
        *,
        tools: Mapping[str, Tool] | None = None,
        instructions: str | None = None,
        effort: str | None = None,
        cwd: str | Path | None = None,
    ) -> Agent:
        """A new agent on a copy of this one's session, copied after the operations queued before it.

        It inherits the runtime, model, effort (as `set` left them), cwd and tools unless
        given (`tools=None` inherits too; `tools={}` gives none), and has its own socket,
        launcher and call ids. The same key with the same parent and spec returns the same agent.
        """
        self._check_usable("fork")
        return await self._agents._fork(self, key, tools, instructions, effort, cwd)

    async def close(self) -> None:
        """Stop the agent: a turn still running ends, and its key is not opened again."""
        _not_from_own_handler(self.key, "close")
        await self._agents.close(self.key)

    async def _replace_tools(self, tools: dict[str, Tool]) -> None:
        if set(tools) != set(self.tools) or any(not tools[name].same_as(self.tools[name]) for name in tools):
            raise DefinitionError(
                f"agent {self.key} is already open with other tools: reopening it must give the same names, "
                "descriptions and schemas"
            )
        self.tools = tools
        await self._driver.set_tools(tools)

    def __repr__(self) -> str:
        return f"<Agent {self.key} turns={self._turns}{' closed' if self.closed else ''}>"


class Opened(msgspec.Struct, frozen=True):
    """What an engine opened an agent as: the driver below it and what it starts with."""

    driver: AgentDriver
    settings: tuple[str | None, str | None]  # its model and effort
    launcher: Path | None = None
    sandbox: Any = None
    resumed: str | None = None  # the native session it resumes from an earlier attempt's record (not a fork's copy)


class Agents:
    """The run's agents by key (`wf.agents`): `await wf.agents.open(key, runtime=...)`, and `key in wf.agents`.

    The keys, what reopening and forking may do, and closing are decided here, on either engine;
    its port (port.AgentsPort) places, opens, forks and stops an agent there.

    Attributes:
        keys: every key taken in the run, agents' and participants' (one namespace).
    """

    def __init__(
        self,
        run: ActorRef,
        board: ActorRef,
        cwd: Path,
        env: Mapping[str, str],
        resolve: HarnessResolver,
        ledger: Ledger | None = None,
        durable: Durable | None = None,
        sessions: Mapping[str, str] | None = None,
        run_stopped: Sequence[str] = (),
        run_interrupted: Sequence[str] = (),
    ) -> None:
        """A local run's agents, on its actors; `over` makes them for any engine."""
        self._bind(LocalAgents(self, run, board, cwd, env, resolve, sessions, run_stopped, run_interrupted),
                   Budgets(clock=backend.current_time), ledger or Ledger(), durable)
        self.sandboxes = Sandboxes(cwd, lambda message, **fields: None)  # the Workflow's, which records
        self.clis = CliChecks(self._cli_used)  # each CLI executable's version, read and checked at its first use
        self.ledger.watch(self._counted)
        if durable is not None:
            durable.carry(self.budgets)  # a continued run's: from what its earlier attempts spent

    @classmethod
    def over(cls, port: AgentsPort, *, budgets: Budgets, ledger: Ledger) -> Agents:
        """The agents of a run on `port`'s engine."""
        agents = cls.__new__(cls)
        agents._bind(port, budgets, ledger, None)
        return agents

    def _bind(self, port: AgentsPort, budgets: Budgets, ledger: Ledger, durable: Durable | None) -> None:
        self._port = port
        self.budgets = budgets  # the run's budgets and what its turns spent
        self.ledger = ledger  # the run's spend, by agent
        self.durable = durable  # this attempt's records: id'd turns, sessions to resume
        self.keys: set[str] = set()  # agents' and participants' keys: one namespace
        self._open: dict[str, Agent] = {}
        self._closed: set[str] = set()
        self._stopped: dict[str, str] = {}
        self._forks: dict[str, ForkSpec] = {}

    async def _cli_used(self, found: CliVersion, agent: str) -> None:
        if self.durable is not None:
            await self.durable.cli_used(found.cli, found.path, agent, found.text)

    def _counted(self, turn: Turn[Any]) -> None:
        """A turn the ledger was given: one the workflow didn't give (mail's, an operation) counts
        here, in the budgets and the stage open now; the workflow's count where they were given."""
        if turn.started_by == "workflow" and turn.kind == "turn":
            return
        self.budgets.counted(turn)
        if self.durable is not None:
            self.durable.counted(turn)

    async def open(
        self,
        key: str,
        *,
        runtime: str | Runtime,
        tools: Mapping[str, Tool] | None = None,
        instructions: str | None = None,
        cwd: str | Path | None = None,
        sandbox: Sandbox | SandboxSpec | Mapping[str, Any] | None = None,
    ) -> Agent:
        """Open an agent, or return the one open under `key` with the same spec.

        Reopening with tools must give the same names, descriptions and schemas (the new
        handlers replace the old); leaving `tools` out keeps what the agent has. `sandbox`
        runs every turn of it in a sandbox: one from `wf.sandboxes.open` (its cwd is then
        the agent's default), or a spec of its own.
        """
        check_key(key)
        checked = check_tools(key, tools) if tools is not None else None
        spec, box = self._port.place(key, resolve_runtime(runtime), instructions, cwd, sandbox, checked)
        self._check_reusable(key)
        if key in self._forks:
            raise DefinitionError(f"agent {key} is already open, not by open but as a fork of {self._forks[key].parent}")
        if key == WORKFLOW_KEY or (key in self.keys and key not in self._open):
            raise DefinitionError(f"{key} is already a participant of this run; agents and participants share keys")
        existing = self._open.get(key)
        if existing is not None:
            for field in ("runtime", "instructions", "cwd"):
                if getattr(existing.spec, field) != getattr(spec, field):
                    raise DefinitionError(f"agent {key} is already open with a different {field}")
            if not self._port.same_sandbox(existing.sandbox, sandbox, box):
                raise DefinitionError(f"agent {key} is already open in a different sandbox")
            if checked is not None:
                await existing._replace_tools(checked)
            return existing
        tools_of = checked or {}
        return self._add(key, spec, tools_of, await self._port.open_agent(key, spec, tools_of, sandbox, box))

    def _add(self, key: str, spec: AgentSpec, tools: dict[str, Tool], opened: Opened) -> Agent:
        agent = Agent(key, spec, tools, self, opened.driver, settings=opened.settings, launcher=opened.launcher,
                      sandbox=opened.sandbox, resumed=opened.resumed)
        self.keys.add(key)
        self._open[key] = agent
        return agent

    def _check_reusable(self, key: str) -> None:
        if key in self._stopped:
            raise DefinitionError(f"agent {key} was stopped ({self._stopped[key]}); its key is not opened again")
        if key in self._closed:
            raise DefinitionError(f"agent {key} was closed; its key is not opened again")

    async def _fork(
        self, parent: Agent, key: str, tools: Mapping[str, Tool] | None, instructions: str | None,
        effort: str | None, cwd: str | Path | None,
    ) -> Agent:
        check_key(key)
        checked = parent.tools if tools is None else check_tools(key, tools)
        directory = self._port.fork_cwd(key, parent, cwd)
        asked = ForkSpec(
            parent.key, None if tools is None else tuple((name, tool.description) for name, tool in sorted(checked.items())),
            instructions, effort, directory,
        )
        earlier = self._forks.get(key)
        if earlier is not None and key in self._open:
            if earlier != asked:
                raise DefinitionError(f"agent {key} is already open, not as this fork of {parent.key}")
            return self._open[key]
        self._check_reusable(key)
        if key == WORKFLOW_KEY or key in self.keys:
            raise DefinitionError(f"agent {key} is already open, not as this fork of {parent.key}")
        harness_name = parent.spec.runtime.harness
        why = _capable(harness_name, "fork")
        if why is not None:
            raise DefinitionError(f"agent {parent.key} can't be forked: {why}")
        if parent._turns == 0 and not parent._history:
            raise DefinitionError(f"agent {parent.key}: an agent cannot be forked before its first turn")
        self._port.check_fork(parent)
        check_effort(key, harness_name, effort)
        self._forks[key] = asked  # taken now: a second fork of the key while this one copies is the same or refused
        try:
            parent._ops += 1
            record = await parent._driver.fork(parent, parent._ops, key)
            if not record.answered or record.session is None:
                raise WorkflowError(f"agent {parent.key} could not be forked into {key}: {record.outcome.reason}")
            runtime = msgspec.structs.replace(
                parent.spec.runtime, model=record.model, effort=effort if effort is not None else record.effort
            )
            spec = AgentSpec(runtime, instructions, directory)
            tools_of = dict(checked)
            return self._add(key, spec, tools_of, await self._port.open_fork(parent, key, spec, tools_of, record.session))
        except BaseException:
            if key not in self._open:
                self._forks.pop(key, None)
            raise

    async def stop(self, key: str, reason: str | None = None) -> bool:
        """End the agent early: a turn in flight settles `cancelled`, its processes are stopped, later
        operations and forks are refused, and the key is never opened again. False for an unknown or
        already stopped key."""
        agent = self._open.get(key)
        if agent is None:
            return False
        _not_from_own_handler(key, "stop")
        stop = self._port.stopper()  # where the engine can't stop an agent, refused before anything changes
        why = reason or "no reason given"
        agent.stopped = why
        self._stopped[key] = why
        del self._open[key]
        agent.closed = True
        await stop(agent, reason or "")
        return True

    async def close(self, key: str) -> bool:
        """Close the agent under `key`; False if none is open."""
        if key not in self._open:
            return False
        await self._close((key,))
        return True

    async def close_all(self) -> None:
        """Close every open agent, in the order they were opened: one ask of the run for all of them."""
        if self._open:
            await self._close(tuple(self._open))

    async def _close(self, keys: tuple[str, ...]) -> None:
        closing = {key: self._open.pop(key) for key in keys}
        for key, agent in closing.items():
            agent.closed = True
            self._closed.add(key)
        await self._port.close_agents(closing)

    def __contains__(self, key: str) -> bool:
        return key in self._open


def real_time_only(harness: Harness, sandboxed: bool) -> str | None:
    """Why an agent can't be opened on a virtual clock, or None: a process (a CLI, a shell command,
    a pane's TUI) or a sandbox lives in real time, and the clock would jump while it works."""
    inner = harness.inner if isinstance(harness, SandboxedHarness) else harness
    if isinstance(inner, PaneHarness):
        what = "an agent in a pane"
    elif inner.spawns:
        what = f"its {inner.name} runtime runs a real process, which"
    elif sandboxed or isinstance(harness, SandboxedHarness):
        what = "a sandbox"
    else:
        return None
    return (
        f"{what} lives in real time, and this run's clock is virtual (agentswf.testing.virtual_clock, "
        "@pytest.mark.virtual_time): its deadlines would pass while it works. Play the agent with a script "
        "(run_workflow's agents=), or test it in real time"
    )


class LocalAgents:
    """The agents port of a local run (port.AgentsPort): each agent an actor the run actor opens, its
    harness resolved, its CLI's version checked, confined to its sandbox, resumed from the record."""

    def __init__(
        self, agents: Agents, run: ActorRef, board: ActorRef, cwd: Path, env: Mapping[str, str],
        resolve: HarnessResolver, sessions: Mapping[str, str] | None, run_stopped: Sequence[str],
        run_interrupted: Sequence[str],
    ) -> None:
        self._agents = agents  # their sandboxes, CLI checks, budgets and durable records
        self._run = run
        self._board = board
        self._cwd = cwd
        # The run's GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE… would point the agent's git at another
        # repository than its cwd's (a worktree's): not inherited; a runtime's own env may still set them.
        self._env = {name: value for name, value in env.items() if name not in LOCAL_GIT_VARIABLES}
        self._resolve = resolve
        self._sessions = dict(sessions or {})  # without a record: the native session each agent starts from
        self._run_stopped = run_stopped  # `awf stop`'s reason, once a person stopped the run (the run's list)
        self._run_interrupted = run_interrupted  # once the run's caller cancelled it (Ctrl-C): the run's list

    def cancelled_because(self, what: str) -> str:
        """Why a turn (or operation) the workflow gave up on was cancelled: the person's stop that
        cancelled the workflow (`stopped by NAME: reason`), or else the workflow's own giving up."""
        if self._run_stopped:
            return f"the run was {self._run_stopped[0]}"
        if self._run_interrupted:
            return f"the run was {self._run_interrupted[0]}"
        return f"the workflow cancelled the {what}"

    def place(
        self, key: str, runtime: Runtime, instructions: str | None, cwd: str | Path | None, sandbox: Any,
        tools: dict[str, Tool] | None,
    ) -> tuple[AgentSpec, Any]:
        directory = (self._cwd / cwd).resolve() if cwd is not None else sandbox_cwd(sandbox, self._cwd)
        return AgentSpec(runtime, instructions, str(directory)), None

    def same_sandbox(self, existing: Any, given: Any, placed: Any) -> bool:
        """A spec is confined anew where the agent opens; a sandbox of `wf.sandboxes` must be its own."""
        return given is None or given is existing or isinstance(given, (SandboxSpec, Mapping))

    async def open_agent(self, key: str, spec: AgentSpec, tools: dict[str, Tool], sandbox: Any, placed: Any) -> Opened:
        directory = Path(spec.cwd)
        if not directory.is_dir():
            raise DefinitionError(f"agent {key}: its cwd {directory} is not a directory")
        agents, resolved = self._agents, spec.runtime
        unconfined = self._resolve(key, resolved)
        if clock.virtual():
            refused = real_time_only(unconfined, sandbox is not None)
            if refused is not None:
                raise DefinitionError(f"agent {key}: {refused}")
        cli, version = unconfined.cli_executable(), None
        if cli is not None:  # raises DefinitionError for a CLI older than agentswf works with
            version = (await agents.clis.check(key, *cli, {**self._env, **resolved.env}, directory)).text
            if cli[0] in TESTED:  # each tested version reports its spend: a turn that doesn't is told of
                agents.budgets.measured[key] = f"{cli[0]} {version or '(version unknown)'}"
        harness = await agents.sandboxes.confine(key, unconfined, sandbox, directory)
        resumed = (
            await agents.durable.opened(key, resolved.harness, harness, version)
            if agents.durable is not None else self._sessions.get(key)
        )
        return await self._start(key, spec, harness, tools, resumed)

    async def _start(
        self, key: str, spec: AgentSpec, harness: Harness, tools: dict[str, Tool], session: str | None,
        forked_from: str | None = None,
    ) -> Opened:
        env = {**self._env, **spec.runtime.env} if spec.runtime.env else self._env  # read-only from here on
        opened: OpenedAgent = await self._run.ask(
            OpenAgent(key, harness, Path(spec.cwd), env, tools, session, forked_from)
        )
        return Opened(
            LocalDriver(opened, harness, self._board, self.cancelled_because), harness.settings(), opened.launcher,
            harness.sandbox if isinstance(harness, SandboxedHarness) else None, session if forked_from is None else None,
        )

    def fork_cwd(self, key: str, parent: Agent, cwd: str | Path | None) -> str:
        directory = (self._cwd / cwd).resolve() if cwd is not None else Path(parent.spec.cwd)
        if not directory.is_dir():
            raise DefinitionError(f"agent {key}: its cwd {directory} is not a directory")
        return str(directory)

    def check_fork(self, parent: Agent) -> None:
        harness = parent.spec.runtime.harness
        if parent.sandbox is not None and not forkable(harness):
            raise DefinitionError(
                f"agent {parent.key} can't be forked in its sandbox: where {harness} keeps a session in the "
                "sandbox's home isn't known here, so its copy can't be moved into the fork's (claude, codex and pi can)"
            )

    async def open_fork(self, parent: Agent, key: str, spec: AgentSpec, tools: dict[str, Tool], session: str) -> Opened:
        """The fork, in its parent's sandbox as the parent was given it (sandboxes.md#forks): a sandbox
        of `wf.sandboxes` the same, a spec of the parent's own opened anew from the fork's cwd, the run's
        at the fork's cwd; its home made with the copy of the parent's session its fork moved out."""
        harness = self._resolve(key, spec.runtime)
        box = parent.sandbox
        given = None if isinstance(harness, SandboxedHarness) else box.given if isinstance(box, Sandbox) and box.own else box
        harness = await self._agents.sandboxes.confine(key, harness, given, Path(spec.cwd))
        if isinstance(harness, SandboxedHarness) and isinstance(box, Sandbox):
            harness.inherited = box.copies.pop(session, None)
        assert isinstance(parent._driver, LocalDriver)  # a local run's agents are
        harness.seed(session, parent._driver.harness.totals(session))
        measured = self._agents.budgets.measured
        if parent.key in measured:
            measured[key] = measured[parent.key]
        return await self._start(key, spec, harness, tools, session, parent.key)

    def stopper(self) -> Callable[[Agent, str], Awaitable[None]]:
        return self._stop

    async def _stop(self, agent: Agent, reason: str) -> None:
        assert isinstance(agent._driver, LocalDriver)
        try:
            await agent._driver.ref.ask(StopAgent(new_id(), reason))
        except ActorStopped:
            pass  # it was going down already
        await self._run.ask(CloseAgent((agent.key,)))

    async def close_agents(self, agents: dict[str, Agent]) -> None:
        await self._run.ask(CloseAgent(tuple(agents)))
