"""Tool-call policies: who may call what, what needs a person's approval, what is redacted.

A policy is a function of the call (tool, agent, input) returning decisions; `decide`
folds every policy's decisions into one verdict, deny always winning. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec


class PolicyCall(msgspec.Struct, frozen=True):
    """What a policy sees of a call. `input` is the checked input as plain JSON values."""

    tool: str
    agent: str
    input: Any


@dataclass(frozen=True, slots=True)
class Decision:
    kind: Literal["allow", "deny", "approve", "redact", "log"]
    reason: str = ""
    fields: tuple[str, ...] = ()


def allow() -> Decision:
    return Decision("allow")


def deny(reason: str) -> Decision:
    """Refuse the call; the agent is told `reason`."""
    return Decision("deny", reason)


def require_approval(reason: str = "") -> Decision:
    """The call waits, within its time, until a person approves or rejects it."""
    return Decision("approve", reason)


def redact(*fields: str) -> Decision:
    """Keep these input fields out of the record, logs and traces."""
    return Decision("redact", fields=fields)


def log(reason: str = "") -> Decision:
    """Log the call (with its redacted input) in the run's progress."""
    return Decision("log", reason)


Policy = Callable[[PolicyCall], "Decision | Sequence[Decision] | None"]


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    reason: str = ""
    needs_approval: bool = False
    approval_reason: str = ""
    redacted: frozenset[str] = frozenset()
    logged: bool = False
    log_reason: str = ""


def _decisions(result: Decision | Sequence[Decision] | None) -> Iterable[Decision]:
    if result is None:
        return ()
    if isinstance(result, Decision):
        return (result,)
    return tuple(result)


def decide(
    call: PolicyCall,
    policies: Sequence[Policy],
    *,
    allowed_agents: frozenset[str] | None = None,
    requires_approval: bool = False,
    sensitive_fields: frozenset[str] = frozenset(),
) -> Verdict:
    """One verdict for `call` from the tool's own settings and every policy; deny wins."""
    if allowed_agents is not None and call.agent not in allowed_agents:
        return Verdict(False, f"tool {call.tool} is not for agent {call.agent}")
    needs_approval, approval_reason = requires_approval, ""
    redacted, logged, log_reason = set(sensitive_fields), False, ""
    for policy in policies:
        for decision in _decisions(policy(call)):
            if decision.kind == "deny":
                return Verdict(False, decision.reason or f"a policy denies {call.tool} to {call.agent}")
            if decision.kind == "approve":
                needs_approval = True
                approval_reason = approval_reason or decision.reason
            elif decision.kind == "redact":
                redacted.update(decision.fields)
            elif decision.kind == "log":
                logged = True
                log_reason = log_reason or decision.reason
    return Verdict(True, "", needs_approval, approval_reason, frozenset(redacted), logged, log_reason)


REDACTED = "[redacted]"


def redact_value(value: Any, fields: frozenset[str]) -> Any:
    """`value` (plain JSON) with every object key in `fields` replaced, at any depth."""
    if not fields:
        return value
    if isinstance(value, dict):
        return {key: REDACTED if key in fields else redact_value(item, fields) for key, item in value.items()}
    if isinstance(value, list):
        return [redact_value(item, fields) for item in value]
    return value
