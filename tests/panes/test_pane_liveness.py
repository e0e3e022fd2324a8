"""A workflow's own check-in intervals (`Runtime(check_ins=CheckIns(…))`): validated, and used."""

from __future__ import annotations

import msgspec
import pytest

import agentswf
from agentswf import CheckIns, Runtime, workflow
from agentswf.engine import turn
from agentswf.errors import DefinitionError
from agentswf.harnesses.pane_liveness import check_in_seconds
from agentswf.harnesses.runtime import check_runtime
from agentswf.testing.models import ScriptedModel

from .kit import claude_pane, needs_claude_and_tmux
from .test_claude_pane import Verdict, script_for


def test_check_ins_take_seconds_or_durations_within_bounds():
    assert check_in_seconds(None) == {}
    assert check_in_seconds(CheckIns(quiet="1.5m")) == {"quiet": 90.0}
    assert check_in_seconds(CheckIns(quiet=2, response="10s")) == {"quiet": 2.0, "response": 10.0}
    for nonsense in [CheckIns(quiet=0), CheckIns(quiet=-3), CheckIns(quiet="soon"), CheckIns(response="2s"),
                     CheckIns(response="2h"), CheckIns(quiet=float("nan")), CheckIns(quiet=True)]:  # fmt: skip
        with pytest.raises(DefinitionError, match="check_ins (quiet|response) must be from"):
            check_in_seconds(nonsense)


def test_check_ins_need_a_pane_that_confirms_delivery():
    check_runtime(Runtime(harness="claude", placement="pane", check_ins=CheckIns(quiet="5s")))
    for runtime in [Runtime(harness="claude", check_ins=CheckIns(quiet="5s")),
                    Runtime(harness="codex", placement="pane", check_ins=CheckIns(quiet="5s"))]:  # fmt: skip
        with pytest.raises(DefinitionError, match="check_ins apply to a pane that confirms delivery"):
            check_runtime(runtime)
    with pytest.raises(DefinitionError, match="check_ins quiet must be from"):
        check_runtime(Runtime(harness="claude", placement="pane", check_ins=CheckIns(quiet="0s")))


@needs_claude_and_tmux
async def test_a_workflows_intervals_check_in_on_a_silent_claude_pane(tmp_path):
    """With the defaults (30 s quiet, 2 minutes' window) it would be checked in on only after 30 s."""
    async with ScriptedModel(script_for(tmp_path)) as model:
        runtime = msgspec.structs.replace(claude_pane(model, tmp_path / "home"), check_ins=CheckIns(quiet="1s", response="6s"))

        @workflow(name="pane-intervals", description="claude in a pane, checked in on soon.")
        async def flow(wf):
            agent = await wf.agents.open("claude", runtime=runtime)
            return msgspec.to_builtins(await agent.run("SCENARIO silent 0. Review the change.", schema=Verdict, timeout=45))

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    assert result.value["outcome"] == {"kind": "unanswered", "reason": turn.CHECK_IN_UNANSWERED}, result.value
    # from the first prompt's command to the model reading the check-in: well under the default 30 s quiet
    checked_in = (tmp_path / "check-in.txt").stat().st_mtime - (tmp_path / "tmux.env").stat().st_mtime
    assert 1 <= checked_in < 20, checked_in
