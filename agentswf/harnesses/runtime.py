"""`Runtime`: which CLI runs an agent, with which model, effort, environment and args.

A runtime is named by an alias (`"shell:<command line>"`) or given whole; resolving it
into a harness happens when the agent opens, so a mistake fails there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

import msgspec

from ..errors import DefinitionError
from .acp import ANY_AGENT, AcpHarness, locate
from .acp_agents import ACP_AGENTS
from .acp_rpc import Permissions
from .base import Harness
from .capabilities import EFFORT_LEVELS, TABLE, refusal
from .claude import ClaudeHarness
from .cli import CliHarness
from .codex import CodexHarness
from .cursor import CursorHarness
from .pane import TUIS, PaneHarness, tui_refusal
from .pane_keep import KEEP_PANE_CHOICES, KeepPane
from .pane_liveness import CheckIns, check_in_seconds
from .pi import PiHarness
from .prices import LIST_PRICES, Prices
from .shell import ShellHarness

SHELL_PREFIX = "shell:"
CLI_ALIASES = ("claude", "codex", "pi", "cursor", *ACP_AGENTS)


class Runtime(msgspec.Struct, frozen=True, kw_only=True):
    """How an agent is run: its harness, model, effort, extra environment and arguments.

    `command` is a shell agent's program, or the path of a CLI that isn't on PATH. `env`
    is added to the run's environment for this agent, e.g. to point a CLI at a gateway.
    `prices` prices the tokens of a CLI that prints no cost (codex), as estimated.
    `placement="pane"` runs the CLI's interactive TUI in a tmux pane kept across the
    agent's turns (docs/guide/panes.md); `"headless"` runs it once per attempt.
    `keep_pane` leaves a pane's TUI running after the run, released from it: "always", or
    "on-failure" when the agent's last turn wasn't answered. `check_ins` sets the quiet
    interval and response window of a pane that confirms delivery (claude's).
    `task_queue` sends the agent's turns to the Temporal workers of that queue
    (docs/guide/temporal.md); the local engine ignores it. `harness="acp"` runs any agent that
    speaks the Agent Client Protocol, `command` its whole command line; `permissions` is what an
    ACP agent is allowed when it asks (docs/guide/acp-agents.md): the shell, unless it says otherwise.
    """

    harness: str
    model: str | None = None
    effort: str | None = None
    env: dict[str, str] = {}
    args: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    prices: Prices | None = None  # for a CLI that prints no cost; None: agentswf's LIST_PRICES
    placement: Literal["headless", "pane"] = "headless"
    keep_pane: KeepPane = "never"  # a pane left after the run for a person to read: "on-failure", "always"
    check_ins: CheckIns | None = None  # a claude pane's quiet interval and response window; None: the defaults
    task_queue: str | None = None  # on the Temporal engine: the workers that run its turns
    permissions: Permissions | None = None  # an ACP agent's; None: the shell allowed, once each time


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


CLI_HARNESSES: dict[str, type[CliHarness]] = {
    "claude": ClaudeHarness,
    "codex": CodexHarness,
    "pi": PiHarness,
    "cursor": CursorHarness,
}


ACP_HARNESSES = {"acp": ANY_AGENT, **ACP_AGENTS}


def check_runtime(runtime: Runtime) -> None:
    """Refuse what the runtime asks of a harness that lacks it, quoting the reason."""
    if runtime.harness not in TABLE:
        known = ", ".join(TABLE)
        raise DefinitionError(f"no harness named {runtime.harness!r}; the harnesses are {known}")
    if runtime.effort is not None:
        why = refusal(runtime.harness, "effort")
        if why is not None:
            raise DefinitionError(f"{runtime.harness} can't take effort={runtime.effort!r}: {why}")
        levels = EFFORT_LEVELS[runtime.harness]
        if runtime.effort not in levels:
            raise DefinitionError(
                f"{runtime.harness} has no effort {runtime.effort!r}; its levels are {', '.join(levels)}"
            )
    if runtime.placement not in ("headless", "pane"):
        raise DefinitionError(f"placement must be 'headless' or 'pane', not {runtime.placement!r}")
    if runtime.keep_pane not in KEEP_PANE_CHOICES:
        raise DefinitionError(f"keep_pane must be one of {', '.join(KEEP_PANE_CHOICES)}, not {runtime.keep_pane!r}")
    if runtime.keep_pane != "never" and runtime.placement != "pane":
        raise DefinitionError(f"keep_pane={runtime.keep_pane!r} needs placement='pane': a headless agent has no pane")
    if runtime.placement == "pane":
        why = tui_refusal(runtime.harness)
        if why is not None:
            raise DefinitionError(f"{runtime.harness} can't run in a pane: {why}")
    if runtime.check_ins is not None:
        check_in_seconds(runtime.check_ins)
        if runtime.placement != "pane" or not TUIS[runtime.harness].confirms_delivery:
            raise DefinitionError(
                f"check_ins apply to a pane that confirms delivery (placement='pane', harness='claude'); "
                f"{runtime.harness} {runtime.placement} is nudged once instead"
            )
    if runtime.permissions is not None and runtime.harness not in ACP_HARNESSES:
        raise DefinitionError(f"permissions are an ACP agent's; {runtime.harness} decides its own")
    if runtime.model is not None and runtime.harness == "shell":
        raise DefinitionError("a shell agent has no model: give its command what it needs in command or env")


def harness_for(runtime: Runtime, env: Mapping[str, str] | None = None) -> Harness:
    """The harness that runs `runtime`; raises HarnessError when its CLI isn't installed."""
    check_runtime(runtime)
    if runtime.harness == "shell":
        if not runtime.command:
            raise DefinitionError("a shell runtime needs command=[program, args…]")
        return ShellHarness(tuple(runtime.command) + tuple(runtime.args))
    environment = {**(os.environ if env is None else env), **runtime.env}
    prices = LIST_PRICES if runtime.prices is None else runtime.prices
    if runtime.harness in ACP_HARNESSES:
        agent = ACP_HARNESSES[runtime.harness]
        command = locate(agent, tuple(runtime.command) + tuple(runtime.args), environment)
        return AcpHarness(agent, command, model=runtime.model, permissions=runtime.permissions, prices=prices)
    cls = CLI_HARNESSES[runtime.harness]
    executable = cls.locate(tuple(runtime.command), environment)
    cli = cls(executable, model=runtime.model, effort=runtime.effort, args=tuple(runtime.args), prices=prices)
    if runtime.placement != "pane":
        return cli
    return PaneHarness.for_cli(cli, environment, runtime.keep_pane, check_in_seconds(runtime.check_ins))

