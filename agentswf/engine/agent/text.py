"""What an AgentActor writes for its agent: an attempt's prompt, and `wfa peers` as a table.

Formatting only; what to write, and when, is decided in `turn.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from ...wire import Response, accepted
from ...wire.prompts import continuation_prompt, message_turn_prompt
from ..agent_time import told, utc_text
from ..turn import CheckIn, Continue, Prompt, Remind

_PEER_COLUMNS = ("peer", "can", "kind", "state", "queued", "purpose")


def prompt_text(prompt: Prompt, *, call_id: str, launcher: Path, peers: str, tools: Mapping[str, Any]) -> str:
    """An attempt's prompt as the agent reads it; `peers` is the peers block (`needs_peers`)."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Continue):
        if prompt.taught is None:
            return message_turn_prompt(list(prompt.mail), launcher=launcher, peers=peers, tools=tools)
        return continuation_prompt(
            list(prompt.mail), launcher=launcher, call_id=call_id, taught=prompt.taught, peers=peers, tools=tools
        )
    if isinstance(prompt, CheckIn):
        return check_in_text(prompt)
    if prompt.then is None:
        return message_turn_prompt([], launcher=launcher, peers=peers, tools=tools, reminder=prompt.text)
    return f"{prompt.text}\n\n{prompt.then}"


def check_in_text(check_in: CheckIn) -> str:
    """A check-in: the nudge prompt (the call id, `wfa result` and `wfa waiting`), then the fixed deadline."""
    if check_in.deadline_ms is None:
        return f"{check_in.text}\n\nThe turn has no deadline; waiting never sets one."
    when = utc_text(check_in.deadline_ms)
    return f"{check_in.text}\n\nThe fixed answer deadline is {when} ({check_in.deadline_ms} Unix ms). Waiting never extends it."


def needs_peers(prompt: Prompt) -> bool:
    """Whether the prompt shows the agent's peers (so the switchboard is asked for them)."""
    return isinstance(prompt, Continue) or (isinstance(prompt, Remind) and prompt.then is None)


def peers_text(table: dict[str, Any], now_ms: int) -> str:
    """`wfa peers` as a table: one row per route, then what the agent owes and awaits (until when)."""
    rows = [[str(row.get(column, "-")) for column in _PEER_COLUMNS] for row in table["peers"]]
    for row, source in zip(rows, table["peers"], strict=False):
        if "awaits" in source:
            row[3] += f" (awaits {source['awaits']})"
        if "reason" in source:
            row[3] += f" ({source['reason']})"
    widths = [max([len(column), *(len(row[i]) for row in rows)]) for i, column in enumerate(_PEER_COLUMNS)]
    lines = ["  ".join(column.ljust(widths[i]) for i, column in enumerate(_PEER_COLUMNS)).rstrip()]
    lines += ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    if not rows:
        lines = ["no peers: the workflow opened no routes for you."]
    for peer in table["owes"]:
        lines.append(f"you owe {peer} a reply (wfa reply {peer}).")
    if "awaits" in table:
        awaits = table["awaits"]
        until = f" until {told(awaits['until'], now_ms)}" if awaits.get("until") is not None else ""
        lines.append(f"you await {awaits['peer']}'s reply{until}.")
    return "\n".join(lines) + "\n"


def peers_response(table: dict[str, Any], *, as_json: bool, now_ms: int) -> Response:
    """`wfa peers`' answer: its table, which says what the agent owes too."""
    text = msgspec.json.format(msgspec.json.encode(table), indent=2).decode() + "\n" if as_json else peers_text(table, now_ms)
    return accepted("peers", stdout=text, value=table)
