"""Who may speak on the run's sockets: decided from the connecting process's ancestry.

Every process of an agent's attempt descends from that attempt's keeper (a subreaper:
even what a `setsid` or a double fork orphans is reparented to it), and the kernel says
which process connected (`peer.py`). So:

- agent a's socket takes a request only from the run's own process (scripted agents run
  in it, and so does the workflow) or from a process under the keeper of one of a's live
  attempts. A sibling agent, or anything else, is refused, and so is every process while a
  has no attempt running: nothing of a is alive to ask, so nothing may be done for it.
- the operator socket (approve, reject, pending, inbox, reply) refuses any process under
  the keeper of any live attempt of any agent, or under a keeper an agent holds beyond its
  attempts (a pane's tmux server and everything in it live from the agent's first turn in
  the pane until the pane goes, between its turns too), and any process whose environment carries
  the run's mark (which every agent process gets: a stray that left its attempt's tree
  but kept the mark): an agent can't act as a person.

Pure: a process's parent comes from `parent_of`, so tests give a table. Refusals use the
reference's `wrong-agent` ("not yours"): of its common codes it is the only one that says
the caller isn't the one allowed; `invalid-request` would blame the request, and
`internal-error` invites a retry.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Collection, Mapping

import anyio

MAX_ANCESTRY_DEPTH = 4096  # parents walked at most (a real chain is short; a table may loop)
INIT_PID = 1  # the walk stops at init

ParentOf = Callable[[int], "int | None"]
MarkOf = Callable[[int], "str | None"]  # a process's mark (keeper.MARK_VARIABLE), if it has one


def ancestor_in(pid: int, roots: Collection[int], parent_of: ParentOf) -> int | None:
    """The first of `roots` met walking up from `pid` (itself included), or None."""
    current: int | None = pid
    for _ in range(MAX_ANCESTRY_DEPTH):
        if current is None or current <= INIT_PID:
            return None
        if current in roots:
            return current
        current = parent_of(current)
    return None


def agent_refusal(
    pid: int | None, *, agent: str, run_pid: int, roots: Collection[int], parent_of: ParentOf
) -> str | None:
    """None to admit a request on `agent`'s socket from `pid`; else why it is refused."""
    if pid == run_pid:
        return None
    if pid is None:
        return f"this is {agent}'s socket, and the run can't tell which process connected, so nothing was done."
    if not roots:
        return (
            f"this is {agent}'s socket and {agent} has no attempt running: only {agent}'s own processes "
            "may use it, while it works. Nothing was done."
        )
    if ancestor_in(pid, roots, parent_of) is not None:
        return None
    return (
        f"this is {agent}'s socket, and process {pid} isn't one of {agent}'s: nothing was done. "
        "Use the wfa launcher your own prompt gave you."
    )


def carries(mark: str | None, run_mark: str) -> bool:
    """Whether a process's mark is the run's, or an attempt's of the run."""
    return mark is not None and (mark == run_mark or mark.startswith(run_mark + "/"))


def operator_refusal(
    pid: int | None, *, attempts: Mapping[int, str], parent_of: ParentOf, run_mark: str, mark_of: MarkOf
) -> str | None:
    """None to admit an operator request from `pid`; else why it is refused.

    `attempts` maps the keeper of each live attempt to its agent.
    """
    if pid is None:
        return "the run can't tell which process connected to its operator socket, so nothing was done."
    root = ancestor_in(pid, attempts, parent_of)
    if root is not None:
        whose = f"process {pid} is agent {attempts[root]}'s"
    elif carries(mark_of(pid), run_mark):
        whose = f"process {pid} was started by one of the run's agents"
    else:
        return None
    return (
        f"this is the run's operator socket, for people; {whose}, "
        "and an agent can't approve, reject, read an inbox or reply as a person. Nothing was done."
    )


class LiveAttempts:
    """The keeper of each attempt running now, and its agent: the whole run's, shared; and the
    keepers agents hold beyond an attempt (`held`: a pane's server), refused as theirs on the
    operator socket for as long as they are held.

    An attempt is `starting` from before its keeper is spawned until its pid is added: the
    spawn yields to the event loop, so the CLI may connect before its pid is known, and a
    check that finds nothing for a starting agent waits for `changed` before refusing.
    """

    def __init__(self) -> None:
        self.roots: dict[int, str] = {}
        self._of_agent: dict[str, set[int]] = {}  # the same, by agent: a request's check reads only its own
        self.starting: dict[str, int] = {}
        self.held: dict[int, str] = {}  # keepers that outlive an attempt (a pane's), until released
        self._changed = anyio.Event()

    @property
    def everyone(self) -> Mapping[int, str]:
        """Every keeper whose processes are an agent's now: its live attempts' and those it holds."""
        return ChainMap(self.roots, self.held) if self.held else self.roots

    def hold(self, pid: int, agent: str) -> None:
        """`pid`'s processes are `agent`'s until `release(pid)`, between its attempts too."""
        self.held[pid] = agent

    def release(self, pid: int) -> None:
        self.held.pop(pid, None)

    def begin(self, agent: str) -> None:
        self.starting[agent] = self.starting.get(agent, 0) + 1

    def end(self, agent: str) -> None:
        left = self.starting.get(agent, 0) - 1
        if left > 0:
            self.starting[agent] = left
        else:
            self.starting.pop(agent, None)
        self._notify()

    def is_starting(self, agent: str) -> bool:
        return agent in self.starting

    async def changed(self) -> None:
        await self._changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def add(self, pid: int, agent: str) -> None:
        self.remove(pid)
        self.roots[pid] = agent
        self._of_agent.setdefault(agent, set()).add(pid)
        self.end(agent)

    def remove(self, pid: int) -> None:
        agent = self.roots.pop(pid, None)
        if agent is None:
            return
        pids = self._of_agent[agent]
        pids.discard(pid)
        if not pids:
            del self._of_agent[agent]

    def of(self, agent: str) -> frozenset[int]:
        """The keepers of `agent`'s live attempts, at once however many agents the run has."""
        return frozenset(self._of_agent.get(agent, ()))
