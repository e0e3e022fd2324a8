"""The one seam between the engine and an agent CLI: run one attempt of a turn.

A harness turns an `Attempt` (the prompt, the launcher, the call id, whether this is
the nudge) into a finished run of its CLI. Everything the engine decides (accepting
answers, deadlines, nudging) stays in the engine; a harness only drives its CLI and
reports how it ended. Cancelling `run` must leave no process behind, and a harness that
starts processes tells `Attempt.started` the pid they all descend from (the keeper's, from
`run_in_group`): the run admits requests on the agent's socket only from under it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

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
    started: Callable[[int], None] | None = None  # told the pid every process of the attempt descends from
    confine: Confine | None = None  # wraps the command the keeper runs: a sandbox's (run_in_group)


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """How an attempt ended, and what the CLI said of its session and spend."""

    ending: AttemptEnding
    session: str | None = None
    usage: Usage | None = None
    output: str = ""


class Harness(ABC):
    """Drives one kind of agent CLI."""

    name: ClassVar[str]
    supports_waiting: ClassVar[bool] = False
    spawns: ClassVar[bool] = True  # runs a process per attempt, whose keeper's pid `Attempt.started` is told
    can_await: ClassVar[bool] = True  # the reply to a question can start the agent's next turn

    @abstractmethod
    async def run(self, attempt: Attempt) -> AttemptResult:
        """Run the CLI for `attempt` to its end."""

    def attempt_env(self, attempt: Attempt) -> dict[str, str]:
        """The variables every agent process gets, on top of the run's environment."""
        return {
            **attempt.env,
            "WFA": str(attempt.launcher),
            "WFA_CALL_ID": attempt.call_id,
            "WFA_AGENT": attempt.agent,
            "WFA_TURN": str(attempt.turn),
            "WFA_NUDGE": "1" if attempt.nudge else "0",
        }
