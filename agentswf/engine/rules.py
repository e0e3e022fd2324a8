"""What an agent may do now: pure functions of its state and the request.

`turn.step` strings them into a turn's life. Each `judge_*` returns None when the request
may go on, or a `Refusal` whose message tells the agent what to do next.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from ..harnesses.base import AttemptEnding
from ..wire.codes import Code
from ..wire.common import MAX_WAITING_REASON_BYTES, is_tool_name

CallState = Literal["open", "accepted", "ended", "expired"]


@dataclass(frozen=True, slots=True)
class Refusal:
    code: Code
    message: str


@dataclass(frozen=True, slots=True)
class CallView:
    """One call id as the run knows it."""

    agent: str
    state: CallState
    deadline: float = math.inf
    takes_result: bool = True  # False for a turn a message started


@dataclass(frozen=True, slots=True)
class AgentView:
    """What of an agent's state the rules read."""

    key: str
    tool_running: bool = False
    owes: tuple[str, ...] = ()
    supports_waiting: bool = False
    owed_text: str = ""  # what the first peer it owes asked


def _judge_call(agent: AgentView, call_id: str, call: CallView | None, now: float) -> Refusal | None:
    if call is None:
        return Refusal(
            "unknown-operation",
            f"no call named {call_id} is open. Check the call id your prompt gave and run the command again.",
        )
    if call.agent != agent.key:
        return Refusal("wrong-agent", f"{call_id} is another agent's call, not yours to answer.")
    if call.state == "expired" or (call.state == "open" and now >= call.deadline):
        return Refusal("expired-operation", f"the deadline of {call_id} has passed; that call is no longer open.")
    if call.state != "open":
        return Refusal("closed-operation", f"{call_id} has ended; that call is no longer open and needs nothing more.")
    if not call.takes_result:
        return Refusal(
            "no-result",
            f"{call_id} is a turn a message started, which takes no result: reply if you were asked, "
            "then end your turn.",
        )
    if agent.owes:
        peer = agent.owes[0]
        asked = f": <<<{agent.owed_text}>>>" if agent.owed_text else " a question"
        return Refusal(
            "owes-reply",
            f"{peer} asked you{asked}; reply first (wfa reply {peer}), then run the command again.",
        )
    if agent.tool_running:
        return Refusal(
            "tool-running",
            "one of your tool calls is still running; run the command again once it answers.",
        )
    return None


def judge_result(agent: AgentView, call_id: str, call: CallView | None, now: float) -> Refusal | None:
    """May `agent` hand in an answer to `call_id` now? Validation of the value comes after."""
    return _judge_call(agent, call_id, call, now)


def judge_waiting(agent: AgentView, call_id: str, call: CallView | None, now: float) -> Refusal | None:
    """May `agent` say it is still working on `call_id`?"""
    refusal = _judge_call(agent, call_id, call, now)
    if refusal is not None:
        return refusal
    if not agent.supports_waiting:
        return Refusal(
            "unsupported-command",
            "wfa waiting isn't offered where you run; finish the work and hand in your answer.",
        )
    return None


def judge_tool(
    agent: AgentView, *, in_turn: bool, accepted: bool, busy_with: str | None, same_call: bool, name: str, tools: tuple[str, ...]
) -> Refusal | None:
    """May `agent` call tool `name` now? None also when it joins the running call (`same_call`).

    A name no tool can have (`is_tool_name`) is refused before anything else: it is the agent's
    text, given back escaped, and recorded as `recorded_tool_name` has it."""
    if not is_tool_name(name):
        return _unknown_tool(name, tools)
    if not in_turn:
        return Refusal(
            "no-operation", "you aren't in a turn; a tool can be called only while you work on one."
        )
    if accepted:
        return Refusal("result-accepted", "your answer is accepted, so the turn is ending; there is nothing more to do.")
    if busy_with is not None and not same_call:
        return Refusal(
            "tool-busy", f"your call of {busy_with} is still running; call again once it answers."
        )
    if name not in tools:
        return _unknown_tool(name, tools)
    return None


def _unknown_tool(name: str, tools: tuple[str, ...]) -> Refusal:
    listed = ", ".join(tools) if tools else "none"
    return Refusal("unknown-tool", f"there is no tool named {name!r}; your tools are: {listed}.")  # repr: on one line, escaped


def recorded_tool_name(name: str) -> str:
    """A requested tool's name as the run records it: as it is when it can be a tool's,
    else quoted with every character that isn't printable (a new line, a control character, a
    bidirectional override) as its escape, on one line, never mistaken for a tool's."""
    return name if is_tool_name(name) else repr(name)


def judge_waiting_reason(reason: str) -> Refusal | None:
    """Is `reason` a reason `wfa waiting` may give: non-blank, at most MAX_WAITING_REASON_BYTES?"""
    if not reason.strip() or len(reason.encode()) > MAX_WAITING_REASON_BYTES:
        return Refusal("invalid-request", f"--reason must be non-blank text of at most {MAX_WAITING_REASON_BYTES:,} bytes.")
    return None


def waiting_until(now: float, deadline: float, requested_seconds: float | None, *, default: float, minimum: float) -> float:
    """When a granted wait ends: the request (or the default), at least the minimum, never past the deadline."""
    seconds = default if requested_seconds is None else max(requested_seconds, minimum)
    return min(now + seconds, deadline)


TurnNext = Literal["answered", "nudge", "wait", "unanswered", "failed", "blocked", "timed-out"]


def after_attempt(
    ending: AttemptEnding, *, accepted: bool, nudged: bool, nudge_allowed: bool, waiting: bool
) -> TurnNext:
    """What a turn does when its CLI ends: finish, nudge once, or hold for a granted wait."""
    if accepted:
        return "answered"
    if ending.kind != "exited":
        return ending.kind
    if ending.exit_code != 0:
        return "failed"
    if waiting:
        return "wait"
    if nudge_allowed and not nudged:
        return "nudge"
    return "unanswered"
