"""What a script sees (`Conversation`) and what it answers (`Shell`, `Tool`, `Text`).

A script decides from the conversation state, never from a request counter: the CLIs send
side requests (titles, token counts, retries) that would shift a counter, while the
state (the last user text, the tool results since it) stays the same.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ...errors import TestScriptError

Dialect = Literal["anthropic", "responses", "chat", "gemini"]

#: Shell tools the CLIs offer, with the argument shape each takes; the first one offered wins.
SHELL_ARGUMENTS: dict[str, Callable[[str], dict[str, Any]]] = {
    "Bash": lambda command: {"command": command},  # claude
    "bash": lambda command: {"command": command},  # pi
    "exec_command": lambda command: {"cmd": command},  # codex (gpt-5 family)
    "shell_command": lambda command: {"command": command},  # codex, some model families
    "shell": lambda command: {"command": ["bash", "-lc", command]},  # codex, some model families
    "run_shell_command": lambda command: {"command": command},  # qwen, gemini
}

#: Blocks the CLIs wrap around context they add to user messages; they aren't the user's words.
CONTEXT_TAGS = ("system-reminder", "environment_context")  # claude; codex
_CONTEXT = re.compile(r"<({})>.*?</\1>".format("|".join(CONTEXT_TAGS)), re.DOTALL)


def user_words(text: str) -> str:
    """`text` without the context blocks the CLIs add, stripped; empty if nothing is left."""
    return _CONTEXT.sub("", text).strip()


@dataclass(frozen=True)
class Shell:
    """Run `command` through whichever shell tool the CLI offered, in that tool's shape."""

    command: str


@dataclass(frozen=True)
class Tool:
    """Call the tool `name` with `arguments` as given (for tools other than the shell)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Text:
    """A final assistant message: the CLI's turn ends with it."""

    text: str


Step = Shell | Tool | Text
Reply = Tool | Text


@dataclass(frozen=True)
class Conversation:
    """The state of one model call, the same for every dialect.

    `prompt` is the latest user text (context blocks and tool results left out);
    `tool_results` are the outputs of tool calls since it, in order; `tools` the names of
    the tools offered; `history` the raw messages (or input items) as sent.
    """

    dialect: Dialect
    model: str
    prompt: str
    tool_results: tuple[str, ...]
    tools: tuple[str, ...]
    history: tuple[Any, ...]


Script = Callable[[Conversation], Step | Awaitable[Step]]


def resolve(step: Step, conv: Conversation) -> Reply:
    """`step` as the reply to send: a Shell becomes a call of the shell tool offered."""
    if not isinstance(step, Shell):
        if not isinstance(step, Tool | Text):
            raise TestScriptError(f"a model script must return Shell, Tool or Text, not {step!r}")
        return step
    for name in conv.tools:
        if name in SHELL_ARGUMENTS:
            return Tool(name, SHELL_ARGUMENTS[name](step.command))
    raise TestScriptError(
        f"the script asked for Shell({step.command!r}) but the CLI offered no shell tool "
        f"({', '.join(SHELL_ARGUMENTS)}); it offered: {', '.join(conv.tools) or 'none'}"
    )


def steps(*plan: Step) -> Callable[[Conversation], Step]:
    """A script playing `plan[k]` after k tool results since the last user text.

    So each user turn replays the plan from its start. Past its end, the last step is
    repeated if it is a Text, and a Text "done" is sent otherwise, so the turn ends.
    """
    if not plan:
        raise TestScriptError("steps() needs at least one step")
    ending = plan[-1] if isinstance(plan[-1], Text) else Text("done")

    def script(conv: Conversation) -> Step:
        k = len(conv.tool_results)
        return plan[k] if k < len(plan) else ending

    return script
