"""`Runtime`: which CLI runs an agent, with which model, effort, environment and args.

A runtime is named by an alias (`"shell:<command line>"`) or given whole; resolving it
into a harness happens when the agent opens, so a mistake fails there.
"""

from __future__ import annotations

import shlex

import msgspec

from ..errors import DefinitionError, HarnessError
from .base import Harness
from .shell import ShellHarness

SHELL_PREFIX = "shell:"
CLI_ALIASES = ("claude", "codex", "pi", "cursor")


class Runtime(msgspec.Struct, frozen=True, kw_only=True):
    """How an agent is run. `command` is the program of a shell agent."""

    harness: str
    model: str | None = None
    effort: str | None = None
    env: dict[str, str] = {}
    args: tuple[str, ...] = ()
    command: tuple[str, ...] = ()


def resolve_runtime(runtime: str | Runtime) -> Runtime:
    """The Runtime an alias names; raises DefinitionError for an unknown one."""
    if isinstance(runtime, Runtime):
        return runtime
    if not isinstance(runtime, str):
        raise DefinitionError(f"runtime must be an alias string or a Runtime, not {type(runtime).__name__}")
    if runtime.startswith(SHELL_PREFIX):
        command = runtime[len(SHELL_PREFIX) :].strip()
        if not command:
            raise DefinitionError("runtime 'shell:' needs a command line after the colon, like 'shell:./agent.sh'")
        return Runtime(harness="shell", command=("/bin/sh", "-c", command))
    if runtime in CLI_ALIASES:
        return Runtime(harness=runtime)
    raise DefinitionError(
        f"unknown runtime {runtime!r}: use one of {', '.join(CLI_ALIASES)}, 'shell:<command line>', "
        "or Runtime(harness=…)"
    )


def harness_for(runtime: Runtime) -> Harness:
    """The harness that runs `runtime`; raises HarnessError when it can't be run here."""
    if runtime.harness == "shell":
        if not runtime.command:
            raise DefinitionError("a shell runtime needs command=[program, args…]")
        return ShellHarness(tuple(runtime.command) + tuple(runtime.args))
    raise HarnessError(
        f"the {runtime.harness} harness is not available in this version of agentswf; "
        "use a shell runtime ('shell:<command line>'), or script the agent in tests"
    )


def describe(runtime: Runtime) -> str:
    if runtime.harness == "shell":
        return "shell:" + shlex.join(runtime.command)
    return runtime.harness
