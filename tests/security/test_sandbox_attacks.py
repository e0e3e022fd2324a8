"""Attacks from a hostile agent inside a real sandbox (issue 15), found by attacking it: each
test is the attack as the agent's shell (or its CLI's proxy client) would make it."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

import agentswf
from agentswf import workflow

from ..sandbox.kit import ANSWER, agent, needs_bwrap

pytestmark = pytest.mark.anyio


@pytest.fixture
def place(tmp_path):
    (tmp_path / "ws").mkdir()
    return tmp_path


async def _run_in(fn, cwd: Path, run_root: Path) -> agentswf.RunResult:
    definition = workflow(name="sbx", description="A sandboxed test workflow.")(fn)
    return await agentswf.run(definition, run_root=run_root, cwd=cwd)


@needs_bwrap
async def test_the_runs_record_under_a_run_root_of_any_name_in_a_writable_path_is_out_of_reach(place):
    """--run-root inside the workspace (not named `.awf`): the agent would forge its own stage
    records, turns and sessions, and the workflow file `awf continue` runs, if it could see them."""
    token = secrets.token_hex(4)
    root = place / "ws" / "records"
    body = f"""\
        say "records: $(ls -A {root} 2>/dev/null | wc -l)"
        mkdir -p {root}/sbx/forged 2>/dev/null && echo x >{root}/sbx/forged/run.json 2>/dev/null
        {ANSWER}
    """

    async def fn(wf):
        box = await wf.sandboxes.open("box", cwd="ws", write=["."])
        a = await wf.agents.open("a", runtime=agent(place / "ws", "a", body, token), sandbox=box)
        return (await a.run("Look.", timeout=20)).value

    result = await _run_in(fn, place, root)
    assert result.outcome == "completed", result.reason
    assert result.value == "records: 0"
    assert not (root / "sbx" / "forged").exists()


@needs_bwrap
@pytest.mark.parametrize("field", ["cwd", "read", "write"])
async def test_a_sandbox_given_a_path_inside_the_runs_record_is_refused(place, field):
    root = place / "ws" / "records"
    (root / "sbx").mkdir(parents=True)

    async def fn(wf):
        where = str(root / "sbx")
        await wf.sandboxes.open("box", **({"cwd": where} if field == "cwd" else {field: [where]}))

    result = await _run_in(fn, place, root)
    assert result.outcome == "failed" and "record" in (result.reason or ""), result.reason
