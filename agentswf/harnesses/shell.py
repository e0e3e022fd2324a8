"""Any program as an agent: the prompt on standard input, `wfa` in its environment.

The embedded default for demos and CI, and the way to wrap a tool that is not an LLM.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import Attempt, AttemptEnding, AttemptResult, Harness
from .process import run_in_group

STDERR_LINES_IN_REASON = 20


@dataclass(frozen=True)
class ShellHarness(Harness):
    """Runs `command` once per attempt, in the agent's cwd, in a process group of its own."""

    command: tuple[str, ...]
    name = "shell"

    async def run(self, attempt: Attempt) -> AttemptResult:
        exited = await run_in_group(
            self.command,
            input=attempt.prompt.encode(),
            cwd=attempt.cwd,
            env=self.attempt_env(attempt),
            started=attempt.started,
            confine=attempt.confine,
            said=attempt.said,
            stdout_said=True,  # its standard output is text for a person, as its error is
        )
        reason = ""
        if exited.exit_code != 0:
            status = f"status {exited.exit_code}" if exited.exit_code > 0 else f"signal {-exited.exit_code}"
            tail = exited.stderr_lines(STDERR_LINES_IN_REASON)
            reason = f"the agent's command exited with {status}" + (f":\n{tail}" if tail else " and printed nothing on standard error")
        ending = AttemptEnding("exited", exit_code=exited.exit_code, reason=reason)
        return AttemptResult(ending, output=exited.stdout)
