"""compact, fork and set on an agent in a pane: each refused saying it's the pane that can't, not the CLI.

The CLIs can do all three headless (pi's `--mode rpc` compacts), but in a pane the TUI holds
the session. The refusals come before any TUI starts, so these tests run none: the command
given is the shell, which is never run.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import agentswf
from agentswf import Runtime, workflow
from agentswf.errors import DefinitionError
from agentswf.harnesses.base import Operation
from agentswf.harnesses.runtime import harness_for

from .kit import needs_tmux

pytestmark = [pytest.mark.anyio, needs_tmux]
HARNESSES = ("claude", "codex", "pi")
NEVER_RUN = (shutil.which("sh") or "/bin/sh",)  # the CLI's command: a pane's refusals start nothing


def _in_a_pane(cli: str, what: str) -> str:
    return f"a {cli} agent in a pane can't {what} (run it without a pane, placement='headless', to {what})"


@pytest.mark.parametrize("cli", HARNESSES)
async def test_compact_and_set_of_an_agent_in_a_pane_say_the_pane_cant(cli, tmp_path: Path):
    runtime = Runtime(harness=cli, placement="pane", command=NEVER_RUN)

    @workflow(name=f"pane-ops-{cli}", description="compact and set an agent in a pane")
    async def flow(wf):
        agent = await wf.agents.open("writer", runtime=runtime)
        compacted = await agent.compact("the plan")
        try:
            await agent.set(model="another-model")
        except DefinitionError as error:
            refused = str(error)
        return {"compact": compacted.outcome.kind, "reason": compacted.outcome.reason, "set": refused}

    result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    assert result.value["compact"] == "failed"
    assert result.value["reason"].endswith(_in_a_pane(cli, "compact")), result.value
    assert result.value["set"] == f"agent writer: {_in_a_pane(cli, 'switch model or effort')}"


@pytest.mark.parametrize("cli", HARNESSES)
async def test_a_pane_harness_refuses_a_fork_saying_the_pane_cant(cli, tmp_path: Path):
    harness = harness_for(Runtime(harness=cli, placement="pane", command=NEVER_RUN), {"PATH": "/usr/bin:/bin"})
    operation = Operation(agent="writer", kind="fork", session="s1", cwd=tmp_path, env={})
    with pytest.raises(NotImplementedError) as refused:
        await harness.fork(operation)
    assert str(refused.value) == _in_a_pane(cli, "fork")
