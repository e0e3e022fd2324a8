"""A sandboxed agent's life: `set` keeps it in its sandbox (and a fork's copy of its parent's session
with it); a fork or a compaction of an agent with no turn in its sandbox fails, sending nothing, and a
sandboxed agent whose CLI keeps its sessions where the sandbox doesn't know is refused its fork. A
compaction and a fork in the sandbox are tested for real in test_real_compaction.py and test_real_forks.py."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from agentswf import DefinitionError
from agentswf.harnesses.base import Operation
from agentswf.harnesses.claude import ClaudeHarness
from agentswf.sandbox.runner import SandboxedHarness
from agentswf.sandbox.spec import SandboxSpec
from agentswf.workflow.sandboxes import open_sandbox

from .kit import needs_bwrap

pytestmark = needs_bwrap  # each opens a sandbox, which finds bubblewrap and tries it once


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


@pytest.mark.parametrize("launcher", [None, "agent/wfa"])
async def test_a_sandboxed_agent_with_no_turn_in_its_sandbox_is_not_forked(tmp_path, launcher):
    boxed = await _boxed(tmp_path)
    given = tmp_path / launcher if launcher else None
    result = await boxed.fork(Operation(agent="a", kind="fork", session="s1", cwd=tmp_path, env={}, launcher=given))
    assert result.ending.kind == "failed" and "no turn in its sandbox" in result.ending.reason


async def test_a_sandboxed_agent_whose_sessions_arent_known_here_is_refused_its_fork(tmp_path):
    from agentswf.harnesses.shell import ShellHarness
    from agentswf.workflow.agents import LocalAgents

    boxed = await _boxed(tmp_path)
    shell = SandboxedHarness(boxed.sandbox, "a", ShellHarness(("true",)))
    (tmp_path / "agent" / "home").mkdir(parents=True)
    operation = Operation(agent="a", kind="fork", session="s1", cwd=tmp_path, env={}, launcher=tmp_path / "agent" / "wfa")
    with pytest.raises(NotImplementedError, match="shell can't fork in a sandbox"):
        await shell.fork(operation)
    parent = SimpleNamespace(key="p", sandbox=boxed.sandbox, spec=SimpleNamespace(runtime=SimpleNamespace(harness="opencode")))
    with pytest.raises(DefinitionError, match="agent p can't be forked in its sandbox: where opencode keeps a session"):
        LocalAgents.check_fork(LocalAgents.__new__(LocalAgents), parent)  # type: ignore[arg-type]
    parent.spec.runtime.harness = "claude"
    LocalAgents.check_fork(LocalAgents.__new__(LocalAgents), parent)  # type: ignore[arg-type]


async def test_set_keeps_a_forks_copy_for_its_home(tmp_path):
    from agentswf.sandbox.copies import Staged

    boxed = await _boxed(tmp_path)
    boxed.inherited = Staged("claude", tmp_path / "staged", ("s.jsonl",), (), tmp_path / "parent")
    assert boxed.with_settings("claude-opus-4-5", None).inherited is boxed.inherited  # type: ignore[attr-defined]


@pytest.mark.parametrize("launcher", [None, "agent/wfa"])
async def test_a_sandboxed_agent_with_no_turn_in_its_sandbox_is_not_compacted(tmp_path, launcher):
    boxed = await _boxed(tmp_path)
    given = tmp_path / launcher if launcher else None
    operation = Operation(agent="a", kind="compact", session="s1", cwd=tmp_path, env={}, focus="x", launcher=given)
    result = await boxed.compact(operation)
    assert result.ending.kind == "failed" and "no turn in its sandbox" in result.ending.reason


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
