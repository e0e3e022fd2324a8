"""A codex pane's turn, its runtime naming no model, is priced by the model codex ran it on: the real
codex TUI, offline against a scripted model, writes the model on its rollout's `turn_context` row."""

from __future__ import annotations

import subprocess

import msgspec
import pytest

import agentswf
from agentswf import Runtime, workflow
from agentswf.testing.models import ScriptedModel, codex_env, find_cli

from .kit import needs, needs_tmux
from .test_codex_pi_panes import Verdict, script_for

pytestmark = [pytest.mark.anyio, needs_tmux, needs("codex")]
PRICED_MODEL = "gpt-5"  # in the list prices; codex's config names it, the runtime doesn't


async def test_a_codex_pane_turn_without_a_runtime_model_is_priced_by_the_model_it_ran_on(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)  # codex asks to trust a git folder first
    async with ScriptedModel(script_for(tmp_path)) as model:
        codex = find_cli("codex")
        assert codex is not None
        runtime = Runtime(harness="codex", placement="pane", command=(codex,), env=codex_env(model, tmp_path / "home", slug=PRICED_MODEL))
        assert runtime.model is None

        @workflow(name="codex-pane-priced", description="A codex pane's turn, priced.")
        async def flow(wf):
            agent = await wf.agents.open("codex", runtime=runtime)
            turn = await agent.run("SCENARIO answer 0. Review the change.", schema=Verdict, timeout=90)
            return msgspec.to_builtins(turn)

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=work)
    assert result.outcome == "completed", result.reason
    turn = result.value
    assert turn["outcome"]["kind"] == "answered", turn
    usage = turn["usage"]
    assert usage["model"] == PRICED_MODEL, usage
    assert usage["cost_usd"] is not None and usage["cost_usd"] > 0 and usage["estimated"], usage
