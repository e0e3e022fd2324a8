"""The Agent Client Protocol's rules of a turn, without I/O.

ACP (https://agentclientprotocol.com) is newline-delimited JSON-RPC 2.0 on an agent's standard
input and output, whose lines `jsonrpc.Rpc` makes and reads. These are the pure functions the
harness (`acp.py`) calls: what the agent can do, which option answers a permission request (by its
kind, never its id), whether a command is the agent's own `wfa`, what a turn spent, where each
agent reports it.
"""

from __future__ import annotations

import fnmatch
import math
import shlex
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from .usage import Usage

PROTOCOL_VERSION = 1
SHELLS = frozenset({"sh", "bash", "zsh", "dash"})  # a command given as [shell, -c|-lc, text] is its text
SHELL_OPERATORS = frozenset(";&|<>`$()\n\\")  # in a `wfa` command: it is more than `wfa`, and asks as any other
ALLOW_ONCE, REJECT_ONCE = "allow_once", "reject_once"  # the only option kinds ever chosen: never *_always


# The agent --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AgentCapabilities:
    """What `initialize` said the agent can do with a session."""

    load: bool = False
    resume: bool = False
    fork: bool = False
    name: str = ""
    version: str = ""


def capabilities(result: Any) -> AgentCapabilities:
    """The capabilities in `initialize`'s result; none of those it doesn't state plainly."""
    agent = result.get("agentCapabilities") if isinstance(result, dict) else None
    agent = agent if isinstance(agent, dict) else {}
    session = agent.get("sessionCapabilities")
    session = session if isinstance(session, dict) else {}
    info = result.get("agentInfo") if isinstance(result, dict) else None
    info = info if isinstance(info, dict) else {}
    name, version = info.get("name"), info.get("version")
    return AgentCapabilities(
        load=agent.get("loadSession") is True,
        resume=isinstance(session.get("resume"), dict),
        fork=isinstance(session.get("fork"), dict),
        name=name[:80] if isinstance(name, str) else "",
        version=version[:40] if isinstance(version, str) else "",
    )


def model_option(result: Any) -> Literal["config", "models"] | None:
    """How a session's model is set, from `session/new`'s (or load's) result: its config option
    `model` (`session/set_config_option`), its `models` (`session/set_model`), or not at all."""
    if not isinstance(result, dict):
        return None
    options = result.get("configOptions")
    if isinstance(options, list) and any(isinstance(o, dict) and o.get("id") == "model" for o in options):
        return "config"
    return "models" if isinstance(result.get("models"), dict) else None


def model_choice(result: Any, model: str) -> tuple[str, str | None]:
    """The id to set `model` by and the session's current one, from `session/new`'s (or load's) result:
    the option (config option `model`, or `models.availableModels`) whose id or name is `model`, its id;
    `model` itself where none is (qwen's ids are `$runtime|openai|<name>(openai)`, its names the names)."""
    choices: list[tuple[str, str]] = []  # (id, name)
    current = None
    options = result.get("configOptions") if isinstance(result, dict) else None
    for option in options if isinstance(options, list) else ():
        if isinstance(option, dict) and option.get("id") == "model":
            current = option.get("currentValue")
            for entry in option.get("options") or []:  # plain options, or groups of them
                for one in (entry.get("options") or []) if isinstance(entry, dict) and "group" in entry else [entry]:
                    if isinstance(one, dict) and isinstance(one.get("value"), str):
                        choices.append((one["value"], str(one.get("name", ""))))
    models = result.get("models") if isinstance(result, dict) else None
    if isinstance(models, dict):
        current = current if current is not None else models.get("currentModelId")
        for one in models.get("availableModels") or []:
            if isinstance(one, dict) and isinstance(one.get("modelId"), str):
                choices.append((one["modelId"], str(one.get("name", ""))))
    chosen = next((key for key, _ in choices if key == model), None) or next((key for key, name in choices if name == model), model)
    return chosen, current if isinstance(current, str) else None


# Permissions ------------------------------------------------------------------------------


class Permissions(msgspec.Struct, frozen=True, kw_only=True):
    """What an ACP agent is allowed when it asks (`session/request_permission`), once each time.

    `allow` holds rules: a tool kind (`execute`, `edit`, `read`, `fetch`, `delete`, `move`,
    `search`, `think`, `other`, or `*` for any), or `kind:pattern` where the pattern (fnmatch)
    must match the tool call's title too. The default allows the shell, as the headless CLIs do;
    `Permissions(allow=())` refuses all but the agent's own `wfa` commands. Nothing is ever
    allowed for good (`allow_always`): it would be written to the user's project or home.
    """

    allow: tuple[str, ...] = ("execute",)

    def allows(self, kind: str, title: str) -> bool:
        for rule in self.allow:
            wanted, _, pattern = rule.partition(":")
            if wanted in ("*", kind) and (not pattern or fnmatch.fnmatchcase(title, pattern)):
                return True
        return False


def command_of(tool_call: dict[str, Any]) -> str | None:
    """The shell command a tool call runs, where it names one: `rawInput.command` as text, or as
    [shell, -c, text] (codex-acp's), else the title of an `execute` call (gemini's, claude's)."""
    raw = tool_call.get("rawInput")
    command = raw.get("command") if isinstance(raw, dict) else None
    if isinstance(command, list) and all(isinstance(word, str) for word in command):
        if len(command) == 3 and command[0].rsplit("/", 1)[-1] in SHELLS and command[1] in ("-c", "-lc"):
            return command[2]
        return shlex.join(command)
    if isinstance(command, str):
        return command
    title = tool_call.get("title")
    return title if tool_call.get("kind") == "execute" and isinstance(title, str) else None


def is_wfa_command(command: str, launcher: str) -> bool:
    """`command` runs the agent's own launcher and nothing else: its first word is the launcher's
    path, and no shell operator or expansion follows that could chain, redirect or substitute."""
    if any(character in SHELL_OPERATORS for character in command):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    return bool(words) and bool(launcher) and words[0] == launcher


def choose(options: Any, allow: bool) -> dict[str, Any]:
    """The answer to a permission request: the first option of kind `allow_once` (allowed) or
    `reject_once` (not), by its kind, never its id, and only one whose id no option of another kind
    shares; `cancelled` where the agent offered none."""
    wanted = ALLOW_ONCE if allow else REJECT_ONCE
    offered = [o for o in options if isinstance(o, dict) and isinstance(o.get("optionId"), str)] if isinstance(options, list) else []
    others = {option["optionId"] for option in offered if option.get("kind") != wanted}  # an id shared with `always` is not once
    for option in offered:
        if option.get("kind") == wanted and option["optionId"] not in others:
            return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}
    return {"outcome": {"outcome": "cancelled"}}


# Usage ------------------------------------------------------------------------------------


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def acp_usage(usage: Any) -> Usage | None:
    """ACP's `Usage` ({inputTokens, outputTokens, cachedReadTokens, cachedWriteTokens}) as ours."""
    if not isinstance(usage, dict):
        return None
    return Usage(
        input_tokens=_count(usage.get("inputTokens")),
        output_tokens=_count(usage.get("outputTokens")),
        cache_read_tokens=_count(usage.get("cachedReadTokens")),
        cache_write_tokens=_count(usage.get("cachedWriteTokens")),
    )


def quota_usage(result: Any) -> Usage | None:
    """gemini's `_meta.quota.token_count` {input_tokens, output_tokens} on the prompt's response."""
    meta = result.get("_meta") if isinstance(result, dict) else None
    quota = meta.get("quota") if isinstance(meta, dict) else None
    tokens = quota.get("token_count") if isinstance(quota, dict) else None
    if not isinstance(tokens, dict):
        return None
    return Usage(input_tokens=_count(tokens.get("input_tokens")), output_tokens=_count(tokens.get("output_tokens")))


def meta_usage(update: dict[str, Any]) -> Usage | None:
    """qwen's usage of one model call: `_meta.usage` on an (empty) agent_message_chunk."""
    meta = update.get("_meta")
    return acp_usage(meta.get("usage")) if isinstance(meta, dict) else None


def cost_of(update: dict[str, Any]) -> float | None:
    """A `usage_update`'s `cost.amount` in US dollars (opencode's is the session's running total)."""
    cost = update.get("cost")
    if not isinstance(cost, dict) or cost.get("currency") not in ("USD", "usd"):
        return None
    amount = cost.get("amount")
    if not isinstance(amount, int | float) or isinstance(amount, bool):
        return None
    return float(amount) if math.isfinite(amount) and amount >= 0 else None


UsageSource = Literal["response", "meta", "quota"]


def turn_tokens(result: Any, per_call: Usage | None, sources: tuple[UsageSource, ...]) -> Usage | None:
    """A turn's tokens, from the first of `sources` that has them: the prompt response's `usage`,
    the sum of the per-call `_meta.usage` (`per_call`), or gemini's `_meta.quota`."""
    for source in sources:
        found = (
            acp_usage(result.get("usage") if isinstance(result, dict) else None) if source == "response"
            else per_call if source == "meta" else quota_usage(result)
        )
        if found is not None:
            return found
    return None
