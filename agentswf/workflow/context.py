"""`Workflow`, the `wf` a workflow function is given on either engine: agents, parallel work,
stages, routes and participants, stop and log, written over the engine port (port.py)."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import msgspec

from ..actors import ActorRef
from ..engine.mail.switchboard import WORKFLOW_KEY, Mail
from ..engine.record.lines import ApprovalDecision, ApprovalRequest
from ..engine.record.recorder import LogLines
from ..errors import DefinitionError, StopRequested
from .agents import Agents
from .budgets import Budget, Spending, group_budget
from .durable import Durable
from .local import LocalDesk, LocalEngine
from .messaging import Participant, Participants, Route, not_in_handler, open_route
from .port import ApprovalPort, EnginePort
from .sandboxes import Sandboxes
from .stages import MAX_STAGE_NAME_CHARS, is_stage_name
from .worktrees import Keep, RunWorktrees, Worktree

T = TypeVar("T")
R = TypeVar("R")


class Approvals:
    """Tool calls waiting for a person's decision, decided from code (`wf.approvals`)."""

    def __init__(self, port: ApprovalPort | ActorRef) -> None:
        self._port = LocalDesk(port) if isinstance(port, ActorRef) else port  # a local run's desk actor

    async def pending(self) -> list[ApprovalRequest]:
        """The calls waiting now, oldest first."""
        return await self._port.pending()

    async def approve(self, call_id: str, *, reason: str = "", by: str = "workflow") -> bool:
        """Let the call run; False if no call by that id is waiting."""
        return await self._port.decide(call_id, ApprovalDecision(True, reason, by))

    async def reject(self, call_id: str, *, reason: str, by: str = "workflow") -> bool:
        """Refuse the call; the agent is told `reason`. False if no call by that id is waiting."""
        return await self._port.decide(call_id, ApprovalDecision(False, reason, by))


class Workflow:
    """What a workflow works with, on whichever engine runs it. Created by the run; don't construct
    one yourself.

    Attributes:
        agents: the run's agents (`Agents`): `await wf.agents.open(key, runtime=...)`.
        participants: people and programs outside the run (`Participants`):
            `await wf.participants.open(key)`.
        approvals: tool calls waiting for a person's decision (`Approvals`).
        sandboxes: sandboxes to put agents in (`Sandboxes`): `await wf.sandboxes.open(key, write=["."])`.
        name: the workflow's name.
        run_id: this run's id, as `awf logs RUN` and `awf reply RUN` take it.
        run_dir: this run's record directory.
        cwd: the directory the run works in; agents' `cwd` is relative to it.
        stop_reason: the reason given to `wf.stop`, once it was called.
        worktrees: the git worktrees `wf.worktree` made, by name (`Worktree`).
    """

    agents: Agents
    participants: Participants
    approvals: Approvals
    name: str
    run_id: str
    run_dir: Path
    cwd: Path
    stop_reason: str | None

    def __init__(
        self,
        *,
        name: str,
        run_id: str,
        run_dir: Path,
        cwd: Path,
        agents: Agents,
        log_lines: LogLines,
        approvals: Approvals,
        board: ActorRef,
        worktrees: RunWorktrees,
        budget: Budget | None = None,
        durable: Durable | None = None,
    ) -> None:
        """A local run's `wf`, over its actors (the local engine port); `over` makes one for any engine."""
        sandboxes = agents.sandboxes = Sandboxes(cwd, self.log, record=run_dir.parent.parent, worktrees=worktrees)
        engine = LocalEngine(
            workflow=name, board=board, log_lines=log_lines, worktrees=worktrees, sandboxes=sandboxes, durable=durable
        )
        self._bind(engine, name=name, run_id=run_id, run_dir=run_dir, cwd=cwd, agents=agents, approvals=approvals)
        agents.clis.warn = self.log  # a CLI outside the versions agentswf was tested with: once a run
        self._budgets.run.budget = budget

    @classmethod
    def over(
        cls, engine: EnginePort, *, name: str, run_id: str, run_dir: Path, cwd: Path, agents: Agents, approvals: Approvals
    ) -> Workflow:
        """The `wf` of a run on `engine`."""
        wf = cls.__new__(cls)
        wf._bind(engine, name=name, run_id=run_id, run_dir=run_dir, cwd=cwd, agents=agents, approvals=approvals)
        return wf

    def _bind(
        self, engine: EnginePort, *, name: str, run_id: str, run_dir: Path, cwd: Path, agents: Agents,
        approvals: Approvals,
    ) -> None:
        self._engine = engine
        self.name = name
        self.run_id = run_id
        self.run_dir = run_dir
        self.cwd = cwd
        self.agents = agents
        self.approvals = approvals
        self.participants = Participants(engine.mail, agents.keys)
        self._itself = Participant(engine.mail, WORKFLOW_KEY)
        self._stage: str | None = None
        self._stages_seen: set[str] = set()
        self._stage_routes: list[Route] = []
        self.stop_reason = None
        self._budgets = agents.budgets
        self._budgets.log = self.log

    @property
    def sandboxes(self) -> Sandboxes:
        """Sandboxes to put agents in: `await wf.sandboxes.open(key, write=["."])`."""
        return self._engine.sandboxes()

    async def parallel(
        self,
        items: Iterable[T],
        fn: Callable[[T], Awaitable[R]],
        *,
        concurrency: int | None = None,
        label: str | None = None,
    ) -> list[R]:
        """`fn(item)` for every item at once (at most `concurrency` at a time), results in item order.

        Fail-fast: the first error cancels the other items (their turns end
        `cancelled`) and is raised here, as itself, not in an exception group.
        """
        work = list(items)
        if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1):
            raise DefinitionError(f"parallel's concurrency must be a whole number of at least 1, not {concurrency!r}")
        results = await self._engine.parallel([functools.partial(fn, item) for item in work], concurrency)
        if label:
            self.log(f"{label}: {len(work)} done")
        return results

    is_workflow = True  # as a route's end, the workflow is the participant "workflow"

    async def route(
        self,
        sender: Any,
        receiver: Any,
        *,
        purpose: str,
        both_ways: bool = False,
        max_messages: int | None = None,
    ) -> Route:
        """Open a route: `sender` can send to `receiver`, which can reply (either can send, `both_ways`).

        Ends are agents, participants, `wf` itself, or their keys. `purpose` is one line of at
        most 200 characters, taught to both ends; `max_messages` can only lower the limit of
        40 (replies included, a question counting its reply). A route opened in a stage closes
        when the stage ends.
        """
        route = await open_route(
            self._engine.mail, sender, receiver, purpose=purpose, both_ways=both_ways, max_messages=max_messages
        )
        if self._stage is not None:
            self._stage_routes.append(route)
        return route

    async def receive(self) -> Mail:
        """The next message addressed to the workflow itself (a route's end `wf`), waiting for one."""
        not_in_handler("wf.receive")
        return await self._itself.receive()

    async def reply(self, peer: str, text: str) -> str:
        """Answer a question `peer` asked the workflow. Raises MessageRefused."""
        return await self._itself.reply(peer, text)

    async def send(self, peer: str, text: str) -> str:
        """Send `peer` a message from the workflow. Raises MessageRefused."""
        return await self._itself.send(peer, text)

    async def race(self, *awaitables: Awaitable[Any]) -> Any:
        """The value of whichever awaitable finishes first; the others are cancelled."""
        not_in_handler("wf.race")
        _, value = await self._first(dict(enumerate(awaitables)))
        return value

    async def select(self, **awaitables: Awaitable[Any]) -> tuple[str, Any]:
        """`(name, value)` of whichever named awaitable finishes first; the others are cancelled."""
        not_in_handler("wf.select")
        return await self._first(awaitables)  # type: ignore[no-any-return]

    async def _first(self, awaitables: dict[Any, Awaitable[Any]]) -> tuple[Any, Any]:
        if not awaitables:
            raise DefinitionError("race and select need at least one awaitable")
        return await self._engine.first(awaitables)

    async def stage(
        self, name: str, work: Callable[[], Awaitable[R]], result: Any = None, *, budget: Budget | None = None
    ) -> R:
        """Run `work()` as the stage `name`: routes opened in it close when it ends.

        With `result` (a msgspec type) the stage's value must fit it; either way it must
        encode as JSON. The value is recorded before the stage returns it, so a continued
        run (`awf continue`) gives it back without calling `work`. With `budget`, a turn
        given in the stage past it ends `Failed` without starting. One stage at a time,
        each name once per run.
        """
        if not is_stage_name(name):
            raise DefinitionError(
                f"{name!r} is not a stage's name: lowercase letters, digits and '-', starting with a letter, "
                f"at most {MAX_STAGE_NAME_CHARS} characters"
            )
        if budget is not None and not isinstance(budget, Budget):
            raise DefinitionError(f"stage {name}'s budget is a Budget, not {budget!r}")
        if self._stage is not None:
            raise DefinitionError(f"stage {name} was entered while stage {self._stage} is open")
        if name in self._stages_seen:
            raise DefinitionError(f"stage {name} was entered twice; a loop goes inside one stage")
        self._stages_seen.add(name)
        done, recorded = await self._engine.stage_entered(name, result)
        if done:  # reused from the record, given by --values, or a look-ahead's stand-in
            return recorded  # type: ignore[no-any-return]
        self._stage = name
        self._budgets.enter_stage(name, budget)
        try:
            value = await work()
            if result is not None:
                try:
                    value = msgspec.convert(value, result, from_attributes=True)
                except msgspec.ValidationError as error:
                    raise DefinitionError(f"stage {name}'s value does not fit its result: {error}") from None
            await self._engine.stage_completed(name, value)
            return value
        finally:
            self._stage = None
            self._budgets.leave_stage()
            self._engine.stage_left()
            routes, self._stage_routes = self._stage_routes, []
            await self._engine.shielded(functools.partial(_close_all, routes))

    def worktree(self, name: str, *, base: str = "HEAD", keep: Keep = "on-change") -> Path:
        """A git worktree of the run's repository on a new branch, for an agent's `cwd`: its path.

        Made now (git checks `base` out) beside the runs' record, on the branch
        `awf/<run id>/<name>`; the same name and arguments give the same worktree. At the
        run's end it is removed with its branch when nothing changed, and kept (and listed)
        when it has commits or uncommitted changes; with uncommitted changes it is never
        removed, whatever `keep` says. `keep="always"` keeps it unchanged too;
        `keep="never"` removes a clean one even with commits, which stay on its branch.
        Raises DefinitionError when it can't be made (no repository, no such base, ...).
        """
        worktrees = self._engine.worktrees()
        new = name not in worktrees.made
        made = worktrees.make(name, base=base, keep=keep)
        if new:
            said = "worktree reused" if name in worktrees.reused else "worktree made"  # reused: kept by an earlier attempt
            self.log(said, worktree=name, path=str(made.path), branch=made.branch, base=made.base)
        return made.path

    @property
    def worktrees(self) -> Mapping[str, Worktree]:
        """The worktrees `wf.worktree` made in this run, by name."""
        return self._engine.worktrees().made

    def budget(self, group: str, budget: Budget | None = None, **limits: Any) -> None:
        """Cap what the agents of key group `group` (keys `group` and `group:…`) may spend from
        now: a `Budget`, or its fields (`wf.budget("review", turns=6)`)."""
        self._budgets.limit_group(group, group_budget(group, budget, limits))

    def spent(self) -> Spending:
        """What the run, each stage, each key group and each agent spent so far (see `Budget`)."""
        return self._budgets.spending()

    def stop(self, reason: str) -> NoReturn:
        """End the run `stopped` with `reason` (awf run exits 3)."""
        self.stop_reason = reason
        raise StopRequested(reason)

    def log(self, message: str, **fields: Any) -> None:
        """A line in the run's record (log.jsonl) and in `awf run`'s progress."""
        self._engine.log(str(message), fields)


async def _close_all(routes: list[Route]) -> None:
    for route in routes:
        await route.close()
