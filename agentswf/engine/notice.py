"""The line at the head of an agent's every answer while it owes or awaits a reply.

So the agent gets it back even after its harness compacts the conversation.
"""

from __future__ import annotations

from .mail.words import StandingView


def notice(standing: StandingView) -> str:
    """The line at the head of every answer while the agent owes or awaits a reply."""
    lines = [f"wfa: you owe {peer} a reply (wfa reply {peer}).\n" for peer in standing.owes]
    if standing.awaits is not None:
        lines.append(f"wfa: you await {standing.awaits}'s reply; it starts your next turn.\n")
    return "".join(lines)
