"""An implementer asks an architect a design question, and a coordinator before it merges.

The implementer and the architect are agents (small scripts here, run as shell agents);
the coordinator is a participant outside the run: a person who answers with `awf reply`,
or, by default, this workflow's own code. Questions don't block: the implementer asks,
ends its turn, and the reply starts its next turn.

    awf run examples/messaging/merge.py                       # the workflow answers as coordinator
    awf run examples/messaging/merge.py -- --coordinator person
    awf inbox <run id> --as coordinator --wait 10m            # in another terminal, then:
    awf reply <run id> implementer 'Merge it.' --as coordinator
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

import anyio
import msgspec

from agentswf import Runtime, Workflow, workflow

HERE = Path(__file__).resolve().parent


class Change(msgspec.Struct, forbid_unknown_fields=True):
    """What the implementer hands back: where the retries went, and whether it merged."""

    where: Literal["client", "queue"]
    merged: bool


class Args(msgspec.Struct, forbid_unknown_fields=True):
    coordinator: Literal["workflow", "person"] = "workflow"


def script(name: str) -> Runtime:
    return Runtime(harness="shell", command=(sys.executable, str(HERE / "agents" / f"{name}.py")))


@workflow(name="merge", description="An implementer consults an architect and a coordinator, then merges.")
async def merge(wf: Workflow, args: Args) -> dict[str, Any]:
    implementer = await wf.agents.open("implementer", runtime=script("implementer"))
    architect = await wf.agents.open(
        "architect", runtime=script("architect"), instructions="You decide where code lives in this service."
    )
    coordinator = await wf.participants.open("coordinator")
    await wf.route(implementer, architect, purpose="Design questions about the retry change")
    await wf.route(implementer, coordinator, purpose="Ask before merging")
    asked: list[str] = []

    async def coordinate() -> None:
        """The workflow answering as the coordinator: approves a merge it is asked about."""
        while True:
            question = await coordinator.receive()
            asked.append(question.text)
            await coordinator.reply(question.sender, "Merge it: the release branch is open.")

    async with anyio.create_task_group() as group:
        if args.coordinator == "workflow":
            group.start_soon(coordinate)
        else:
            wf.log(f"you are the coordinator: read its questions with `awf inbox {wf.run_id} --as coordinator --wait 10m`")
        turn = await implementer.run(
            "Add retries to the HTTP client's callers. Ask the architect where retries belong, "
            "and ask the coordinator before you merge.",
            schema=Change,
            timeout="10m",
        )
        group.cancel_scope.cancel()
    if not turn.answered:
        wf.stop(f"the implementer's turn ended {turn.outcome.kind}: {turn.outcome.reason}")
    return {"where": turn.value.where, "merged": turn.value.merged, "coordinator_asked": asked}
