"""Backlog triage through tools: an agent labels and prioritises each item as it goes.

Three tools: `list_items` takes no input, `set_priority` is taught as flags, and
`label_item` (its input holds a list) is taught as JSON. What the agent records lands in
the workflow the moment it calls a tool, so it is kept however the turn ends.

    awf run examples/tools/triage.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from agentswf import Runtime, ToolCall, Workflow, tool, workflow

HERE = Path(__file__).resolve().parent

BACKLOG = {
    "b1": "Login page times out under load",
    "b2": "Nightly cron job sends duplicate emails",
    "b3": "Typo in the settings page footer",
    "b4": "Crash when uploading an empty CSV file",
}

Label = Annotated[str, msgspec.Meta(pattern="^[a-z][a-z-]*$", max_length=24)]


class Labels(msgspec.Struct, forbid_unknown_fields=True):
    """The labels of one backlog item."""

    id: str
    labels: Annotated[list[Label], msgspec.Meta(min_length=1, max_length=4)]


class Triage(msgspec.Struct):
    labels: dict[str, list[str]] = {}
    priorities: dict[str, str] = {}


def triager() -> Runtime:
    return Runtime(harness="shell", command=(sys.executable, str(HERE / "agents" / "triager.py")))


@workflow(name="triage", description="An agent labels and prioritises a backlog through three tools.")
async def triage(wf: Workflow) -> dict[str, Any]:
    done = Triage()

    def list_items() -> list[dict[str, str]]:
        """The backlog, one object per item: its id and title."""
        return [{"id": key, "title": title} for key, title in BACKLOG.items()]

    def label_item(item: Labels, call: ToolCall) -> str:
        if item.id not in BACKLOG:
            raise ValueError(f"there is no item {item.id}; list_items has the ids")
        done.labels[item.id] = item.labels
        wf.log("labelled", item=item.id, labels=item.labels, by=call.agent)
        return f"{item.id} labelled {', '.join(item.labels)}"

    def set_priority(id: Annotated[str, "The item's id"], priority: Literal["p1", "p2", "p3"]) -> str:
        """Set one item's priority: p1 for outages and data loss, p3 for cosmetics."""
        if id not in BACKLOG:
            raise ValueError(f"there is no item {id}; list_items has the ids")
        done.priorities[id] = priority
        return f"{id} is {priority}"

    agent = await wf.agents.open(
        "triager",
        runtime=triager(),
        tools={
            "list_items": tool(list_items),
            "label_item": tool(label_item, input=Labels, description="Give one item its labels."),
            "set_priority": tool(set_priority),
        },
    )
    turn = await agent.run(
        "Triage the backlog: label every item and give it a priority, then say how many you did.",
        timeout="5m",
    )
    untriaged = sorted(set(BACKLOG) - set(done.priorities))
    return {
        "ended": turn.outcome.kind,
        "summary": turn.value if turn.answered else turn.outcome.reason,
        "labels": done.labels,
        "priorities": done.priorities,
        "untriaged": untriaged,
    }
