"""`awf run --sandbox` is kept in the record: `awf continue` puts the agents in it again, and a
`--sandbox` given to the continue wins. Skipped without bubblewrap."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..sandbox.kit import needs_bwrap
from .kit import attempts, awf

pytestmark = needs_bwrap

FLOW = '''
from pathlib import Path

from agentswf import workflow

PEEK = "shell:cat {secret} >/dev/null 2>&1 && s=read || s=unread; \\"$WFA\\" result \\"$WFA_CALL_ID\\" \\"$s\\""


@workflow(name="peek", description="Stage look reads a secret, if its sandbox lets it; it fails while ./fail exists.")
async def peek(wf) -> str:
    agent = await wf.agents.open("a", runtime=PEEK)

    async def look() -> str:
        if Path("fail").exists():
            raise RuntimeError("not yet")
        return (await agent.run("Look.", timeout=20)).value

    return await wf.stage("look", look)
'''


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_continue_runs_in_the_runs_sandbox_unless_given_another(tmp_path: Path, backend: str) -> None:
    (tmp_path / "secret").write_text("SECRET")
    work = tmp_path / "work"
    work.mkdir()
    (work / "flow.py").write_text(FLOW.format(secret=tmp_path / "secret"))
    (work / "box.json").write_text('{"write": ["."]}')
    (work / "reader.json").write_text(json.dumps({"read": [str(tmp_path)], "write": ["."]}))
    (work / "fail").touch()
    failed = awf(work, "run", "flow.py", "--sandbox", "box.json", "--backend", backend)
    assert failed.returncode == 1, failed.stderr
    (work / "fail").unlink()
    done = awf(work, "continue", "flow.py", "--backend", backend)  # no --sandbox: the run's, from its record
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == "unread"
    again = awf(work, "continue", "flow.py", "--rerun", "look", "--sandbox", "reader.json", "--backend", backend)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == "read"  # the sandbox given wins: it reads the secret's folder
    [run_dir] = (work / ".awf" / "runs" / "peek").iterdir()
    assert [attempt.get("sandbox") for attempt in attempts(run_dir)] == [
        {"read": [], "write": ["."], "network": []},
        {"read": [], "write": ["."], "network": []},
        {"read": [str(tmp_path)], "write": ["."], "network": []},
    ]
