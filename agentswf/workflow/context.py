"""`Workflow`, the `wf` a workflow function is given: agents, parallel work, stages, routes
and participants, stop and log."""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import anyio
import anyio.from_thread
import msgspec

from ..actors import ActorRef, backend
from ..engine.approvals import ApprovalDecision, ApprovalRequest, Decide, ListPending
from ..engine.recorder import Logged, LogLines
from ..engine.switchboard import WORKFLOW_KEY, Mail, Receive
from ..errors import DefinitionError, StopRequested, leaf_errors
from ..progress import progress
from .agents import Agents
from .budgets import Budget, Spending, group_budget
from .durable import Durable
from .messaging import Participant, Participants, Route, not_in_handler, open_route, race, select
from .sandboxes import Sandboxes
from .stages import MAX_STAGE_NAME_CHARS, is_stage_name
from .worktrees import Keep, RunWorktrees, Worktree

T = TypeVar("T")
R = TypeVar("R")


class Approvals:
    """Tool calls waiting for a person's decision, decided from code (`wf.approvals`)."""

    def __init__(self, desk: ActorRef) -> None:
        self._desk = desk

    async def pending(self) -> list[ApprovalRequest]:
        """The calls waiting now, oldest first."""
        return await self._desk.ask(ListPending())

    async def approve(self, call_id: str, *, reason: str = "", by: str = "workflow") -> bool:
        """Let the call run; False if no call by that id is waiting."""
        return await self._desk.ask(Decide(call_id, ApprovalDecision(True, reason, by)))

    async def reject(self, call_id: str, *, reason: str, by: str = "workflow") -> bool:
        """Refuse the call; the agent is told `reason`. False if no call by that id is waiting."""
        return await self._desk.ask(Decide(call_id, ApprovalDecision(False, reason, by)))


class Workflow:
    """What a workflow works with. Created by the run; don't construct one yourself.

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
    sandboxes: Sandboxes
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
        self.name = name
        self._worktrees = worktrees
        self._durable = durable  # this attempt's stage plan and records
        self.approvals = approvals
        self._board = board
        self.participants = Participants(board, agents.keys)
        self._stage: str | None = None
        self._stages_seen: set[str] = set()
        self._stage_routes: list[Route] = []
        self.run_id = run_id
        self.run_dir = run_dir
        self.cwd = cwd
        self.agents = agents
        self.sandboxes = agents.sandboxes = Sandboxes(cwd, self.log, record=run_dir.parent.parent, worktrees=worktrees)
        self._log_lines = log_lines
        self._loop_thread = threading.get_ident()  # a sync tool handler calls log() from a worker thread
        self.stop_reason: str | None = None
        self._budgets = agents.budgets
        self._budgets.log = self.log
        agents.clis.warn = self.log  # a CLI outside the versions agentswf was tested with: once a run
        self._budgets.run.budget = budget

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
        results: list[Any] = [None] * len(work)
        # a limiter only where it limits: one with a token for every item costs each a schedule point for nothing
        limiter = anyio.CapacityLimiter(concurrency) if concurrency is not None and concurrency < len(work) else None
        first: list[BaseException] = []

        async def run(index: int, item: T) -> None:
            try:
                results[index] = await fn(item)
            except (Exception, StopRequested) as error:
                first.append(error)
                raise

        async def one(index: int, item: T) -> None:
            if limiter is None:
                await run(index, item)
                return
            async with limiter:
                await run(index, item)

        try:
            async with backend.task_group() as group:
                for index, item in enumerate(work):
                    group.start_soon(one, index, item)
        except BaseExceptionGroup as group:
            errors = [leaf for leaf in leaf_errors(group) if isinstance(leaf, (Exception, StopRequested))]
            if errors:
                raise (first[0] if first else errors[0]) from None
            raise
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
            self._board, sender, receiver, purpose=purpose, both_ways=both_ways, max_messages=max_messages
        )
        if self._stage is not None:
            self._stage_routes.append(route)
        return route

    async def receive(self) -> Mail:
        """The next message addressed to the workflow itself (a route's end `wf`), waiting for one."""
        not_in_handler("wf.receive")
        return await self._board.ask(Receive(WORKFLOW_KEY))

    async def reply(self, peer: str, text: str) -> str:
        """Answer a question `peer` asked the workflow. Raises MessageRefused."""
        return await Participant(self._board, WORKFLOW_KEY).reply(peer, text)

    async def send(self, peer: str, text: str) -> str:
        """Send `peer` a message from the workflow. Raises MessageRefused."""
        return await Participant(self._board, WORKFLOW_KEY).send(peer, text)

    async def race(self, *awaitables: Awaitable[Any]) -> Any:
        """The value of whichever awaitable finishes first; the others are cancelled."""
        return await race(*awaitables)

    async def select(self, **awaitables: Awaitable[Any]) -> tuple[str, Any]:
        """`(name, value)` of whichever named awaitable finishes first; the others are cancelled."""
        return await select(**awaitables)

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
        if self._stage is not None:
            raise DefinitionError(f"stage {name} was entered while stage {self._stage} is open")
        if name in self._stages_seen:
            raise DefinitionError(f"stage {name} was entered twice; a loop goes inside one stage")
        self._stages_seen.add(name)
        if self._durable is not None:
            done, recorded = await self._durable.enter(name, result)
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
            if self._durable is not None:
                await self._durable.completed(name, value)
            return value
        finally:
            self._stage = None
            self._budgets.leave_stage()
            if self._durable is not None:
                self._durable.left()
            routes, self._stage_routes = self._stage_routes, []
            with anyio.CancelScope(shield=True):
                for route in routes:
                    await route.close()

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
        new = name not in self._worktrees.made
        made = self._worktrees.make(name, base=base, keep=keep)
        if new:
            self.log("worktree made", worktree=name, path=str(made.path), branch=made.branch, base=made.base)
        return made.path

    @property
    def worktrees(self) -> Mapping[str, Worktree]:
        """The worktrees `wf.worktree` made in this run, by name."""
        return self._worktrees.made
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
        progress("agentswf.workflow", message, workflow=self.name, **fields)
        plain = {k: v if isinstance(v, (str, int, float, bool, type(None))) else repr(v) for k, v in fields.items()}
        line = Logged(time.time(), str(message), plain)
        if threading.get_ident() == self._loop_thread:
            self._log_lines.put(line)  # never waits, never overflows
        else:  # from a sync handler's worker thread: the lines belong to the run's loop
            anyio.from_thread.run_sync(self._log_lines.put, line)
