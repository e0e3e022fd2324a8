"""A sandboxed agent's life: `set` keeps it in its sandbox, and a compaction or a fork's copy,
whose CLI would run outside the sandbox, is not run at all (it fails, sending nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentswf.harnesses.base import Operation
from agentswf.harnesses.claude import ClaudeHarness
from agentswf.sandbox.runner import SandboxedHarness
from agentswf.sandbox.spec import SandboxSpec
from agentswf.workflow.sandboxes import open_sandbox


async def _boxed(tmp_path: Path) -> SandboxedHarness:
    sandbox = await open_sandbox("box", SandboxSpec(), tmp_path, lambda message, **fields: None)
    harness = sandbox.confine("a", ClaudeHarness("claude"))
    assert isinstance(harness, SandboxedHarness)
    return harness


async def test_set_keeps_a_sandboxed_agent_in_its_sandbox(tmp_path):
    boxed = await _boxed(tmp_path)
    switched = boxed.with_settings("claude-opus-4-5", "high")
    assert isinstance(switched, SandboxedHarness) and switched.sandbox is boxed.sandbox
    assert switched.settings() == ("claude-opus-4-5", "high")
    assert boxed.settings() == (None, None)  # the agent's harness before the switch is as it was


@pytest.mark.parametrize("kind", ["compact", "fork"])
async def test_an_operation_of_a_sandboxed_agent_is_not_run_outside_it(tmp_path, kind):
    boxed = await _boxed(tmp_path)
    operation = Operation(agent="a", kind=kind, session="s1", cwd=tmp_path, env={}, focus="the plan")
    with pytest.raises(NotImplementedError, match=f"claude can't {kind} in a sandbox yet"):
        await (boxed.compact if kind == "compact" else boxed.fork)(operation)


async def test_an_agent_in_a_pane_is_not_sandboxed_yet_and_says_so(tmp_path):
    from agentswf import DefinitionError
    from agentswf.harnesses.pane import CLAUDE_TUI, PaneHarness
    from agentswf.workflow.sandboxes import Sandboxes

    boxes = Sandboxes(tmp_path, lambda message, **fields: None)
    pane = PaneHarness(ClaudeHarness("claude"), CLAUDE_TUI, "tmux")
    with pytest.raises(DefinitionError, match="an agent in a pane can't be sandboxed yet"):
        await boxes.confine("a", pane, {"write": []}, tmp_path)
    assert await boxes.confine("a", pane, None, tmp_path) is pane  # unsandboxed, it runs as it is
    boxed = await _boxed(tmp_path)
    run_level = SandboxedHarness(boxed.sandbox, "a", pane)  # awf run --sandbox around a pane agent
    with pytest.raises(DefinitionError, match="an agent in a pane can't be sandboxed yet"):
        await boxes.confine("a", run_level, None, tmp_path)
