"""Many scripted agents calling tools at once through `run_workflow` finish, on both backends.

Before the scripted client ran in the loop, 40 calls waiting at once filled the worker
threads the Recorder also needed, and a run of 100 agents × 10 calls hung for good (issue
10). 200 agents, all in their turns at once, each making several calls, is well past that.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from agentswf import Workflow, tool, workflow
from agentswf.testing import ScriptedTurn, answer, run_workflow

pytestmark = pytest.mark.anyio

AGENTS = 200
CALLS = 3
RUN_WITHIN_SECONDS = 120  # about 2 s unloaded; a hang is caught, not waited out


@tool(description="Give back n.")
async def echo(n: int) -> int:
    return n


@workflow(name="many", description="Many agents, each calling a tool a few times, all at once.")
async def many(wf: Workflow, args: dict) -> list[int]:
    opened = [await wf.agents.open(f"a{i}", runtime="codex", tools={"echo": echo}) for i in range(args["n"])]

    async def one(agent: Any) -> int:
        return int((await agent.run("Go.", nudge=False)).value)

    return await wf.parallel(opened, one, concurrency=args["n"])


def calling(i: int) -> Any:
    async def play(turn: ScriptedTurn) -> str:
        total = 0
        for n in range(CALLS):
            got = await turn.tool("echo", {"n": i + n})
            assert got.kind == "result", got
            total += got.output
        return str(total)

    return play


async def test_two_hundred_agents_calling_tools_at_once_all_answer(run_root):
    with anyio.fail_after(RUN_WITHIN_SECONDS):
        run = await run_workflow(
            many, agents={f"a{i}": answer(calling(i)) for i in range(AGENTS)}, args={"n": AGENTS}, run_root=run_root
        )
    assert run.value == [CALLS * i + sum(range(CALLS)) for i in range(AGENTS)]
