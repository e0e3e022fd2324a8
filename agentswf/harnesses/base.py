"""The one seam between the engine and an agent CLI: run one attempt of a turn.

A harness turns an `Attempt` (the prompt, the launcher, the call id, whether this is
the nudge) into a finished run of its CLI. Everything the engine decides (accepting
answers, deadlines, nudging) stays in the engine; a harness only drives its CLI and
reports how it ended. Cancelling `run` must leave no process behind, and a harness that
starts processes tells `Attempt.started` the pid they all descend from (the keeper's, from
`run_in_group`): the run admits requests on the agent's socket only from under it.
"""

from __future__ import annotations

import string
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

from .said import Said
from .usage import Usage


@dataclass(frozen=True, slots=True)
class AttemptEnding:
    """How one run of the agent's CLI ended, as the turn sees it."""

    kind: Literal["exited", "failed", "blocked", "timed-out"]
    exit_code: int = 0
    reason: str = ""
    retryable: bool = False

Confine = Callable[[Sequence[str], Path, Mapping[str, str]], tuple[list[str], dict[str, str]]]
"""(argv, cwd, env) of a CLI to the (argv, env) that run it in a sandbox (agentswf.sandbox)."""


@dataclass(frozen=True, slots=True)
class Attempt:
    """One run of an agent's CLI within a turn: the first, or the nudge."""

    agent: str
    call_id: str
    turn: int
    nudge: bool
    prompt: str
    launcher: Path
    cwd: Path
    env: Mapping[str, str]
    session: str | None = None  # the native session to resume, once there is one
    started_by: str = "workflow"  # or "message": a turn mail started, which takes no result
    reason: str = "turn"  # why it starts (turn.attempt_reason): WFA_ATTEMPT_REASON
    started: Callable[[int], None] | None = None  # told the pid every process of the attempt descends from
    confine: Confine | None = None  # wraps the command the keeper runs: a sandbox's (run_in_group)
    received: Callable[[], None] | None = None  # told once the model got the prompt, where the harness can see it
    # told the pid of a keeper that outlives the attempt (a pane's server): its processes are the
    # agent's, refused as a person's, until the function it returns is called
    holds: Callable[[int], Callable[[], None]] | None = None
    said: Said = field(default_factory=Said)  # fed what its processes say for a person (harnesses/said.py)


MAX_SESSION_ID_CHARS = 128
_SESSION_ID_CHARACTERS = frozenset(string.ascii_letters + string.digits + "-_.:")


def is_session_id(session: object) -> bool:
    """A native session's id as the CLIs make them (a UUID, a thread id): letters, digits and `-_.:`,
    starting with a letter or digit. What a CLI is given after `--resume` or `--session` is one of
    these or nothing: a forged `--dangerously-skip-permissions` (in a CLI's output an agent's
    process wrote to, or in a record) is no option, and no path."""
    return (
        isinstance(session, str)
        and 0 < len(session) <= MAX_SESSION_ID_CHARS
        and set(session) <= _SESSION_ID_CHARACTERS
        and session[0].isalnum()
        and ".." not in session
    )



@dataclass(frozen=True, slots=True)
class AttemptResult:
    """How an attempt ended, and what the CLI said of its session and spend."""

    ending: AttemptEnding
    session: str | None = None
    usage: Usage | None = None
    output: str = ""
    settings: tuple[str | None, str | None] | None = None  # the model and effort it ran with, where not the agent's (played: the record's)


@dataclass(frozen=True, slots=True)
class Operation:
    """A compaction, or the copy of a session a fork starts from: run on the agent's session, between turns."""

    agent: str
    kind: Literal["compact", "fork"]
    session: str | None
    cwd: Path
    env: Mapping[str, str]
    focus: str = ""
    launcher: Path | None = None  # the agent's launcher: its directory holds what a sandbox keeps for the agent
    confine: Confine | None = None  # wraps the command the operation's CLI runs (a sandbox's)
    started: Callable[[int], None] | None = None  # told the pid every process of the operation descends from


@dataclass(frozen=True, slots=True)
class OperationResult:
    """How an operation ended: a compaction's session and summary, or a fork's new session."""

    ending: AttemptEnding
    session: str | None = None
    summary: str = ""
    usage: Usage | None = None  # what it spent
    settings: tuple[str | None, str | None] | None = None  # the model and effort it ran with, where not the agent's (played: the record's)


class Harness(ABC):
    """Drives one kind of agent CLI.

    Beside `run`, a harness that can compact, fork or switch settings overrides `compact`,
    `fork` and `with_settings`; whether it can is the capability table's to say.
    """

    name: ClassVar[str]
    supports_waiting: ClassVar[bool] = False
    confirms_delivery: ClassVar[bool] = False  # calls `Attempt.received`: the turn checks in on it (turn.Liveness)
    spawns: ClassVar[bool] = True  # runs a process per attempt, whose keeper's pid `Attempt.started` is told
    can_await: ClassVar[bool] = True  # the reply to a question can start the agent's next turn

    @abstractmethod
    async def run(self, attempt: Attempt) -> AttemptResult:
        """Run the CLI for `attempt` to its end."""

    def settings(self) -> tuple[str | None, str | None]:
        """The model and effort its attempts run with (None: the CLI's own default); asked again as
        each attempt starts, so a harness that switches (a fork's, at its first real turn) is recorded so."""
        return None, None

    def with_settings(self, model: str | None, effort: str | None) -> Harness:
        """This harness, running later attempts with `model` and `effort`; the session and its totals kept."""
        raise NotImplementedError(f"{self.name} can't switch model or effort")

    async def compact(self, operation: Operation) -> OperationResult:
        """Compact the session with `operation.focus`."""
        raise NotImplementedError(f"{self.name} can't compact")

    async def fork(self, operation: Operation) -> OperationResult:
        """Copy the session into a new one, with no model call."""
        raise NotImplementedError(f"{self.name} can't fork")

    def seed(self, session: str, totals: Usage | None) -> None:
        """A fork's session starts with the totals its CLI reports for the copy: its first turn takes them off."""
        return None  # a harness whose CLI reports no running totals has nothing to take off

    def totals(self, session: str) -> Usage | None:
        """What its CLI last reported as `session`'s running totals, if it reports any."""
        return None

    def cli_executable(self) -> tuple[str, str] | None:
        """The agent CLI its attempts run, as (its name, the executable's path): the agent's open
        checks its version (harnesses/cli_version.py). None: it runs no agent CLI."""
        return None

    def cli_home(self) -> str:
        """The CLI whose credentials and config a sandbox copies into the agent's home, and whose
        model it lets the agent reach (sandbox/homes.py): the harness's own, where it has one."""
        return self.name

    async def close(self) -> None:
        """The agent is closing: stop what the harness keeps between attempts (a pane). Most keep nothing."""
        return None

    @property
    def check_ins(self) -> Mapping[str, float]:
        """The liveness numbers a workflow set for it (turn.Liveness's fields, seconds); empty: the defaults."""
        return {}

    def turn_settled(self, outcome: str) -> None:
        """A turn of the agent's ended with `outcome` (its kind): a pane kept on failure reads it."""
        return None

    def attempt_env(self, attempt: Attempt) -> dict[str, str]:
        """The variables every agent process gets, on top of the run's environment."""
        return {
            **attempt.env,
            "WFA": str(attempt.launcher),
            "WFA_CALL_ID": attempt.call_id,
            "WFA_AGENT": attempt.agent,
            "WFA_TURN": str(attempt.turn),
            "WFA_NUDGE": "1" if attempt.nudge else "0",
            "WFA_ATTEMPT_REASON": attempt.reason,
        }
