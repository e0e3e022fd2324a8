"""`awf run FILE --sandbox box.json`: every agent of the run in one sandbox working in --cwd."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from .kit import needs_bwrap

pytestmark = needs_bwrap
AWF = [sys.executable, "-m", "agentswf"]

FLOW = '''
from agentswf import workflow

@workflow(name="boxed", description="Every agent in the run's sandbox.")
async def boxed(wf):
    a = await wf.agents.open("a", runtime="shell:echo made >made; ls .awf | wc -l >n; cat {secret} >/dev/null 2>&1 && s=read || s=no; \\"$WFA\\" result \\"$WFA_CALL_ID\\" \\"$s $(cat n)\\"")
    return (await a.run("Go.", timeout=20)).value

@workflow(name="own", description="Asks for a sandbox of its own.")
async def own(wf):
    await wf.agents.open("a", runtime="shell:true", sandbox={{}})
'''


def awf(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AWF, *args], check=False, capture_output=True, text=True, timeout=60, cwd=cwd)


def test_every_agent_runs_in_the_runs_sandbox_and_can_write_neither_the_record_nor_outside(tmp_path):
    (tmp_path / "secret").write_text("SECRET")
    work = tmp_path / "work"
    work.mkdir()
    (work / "flow.py").write_text(FLOW.format(secret=tmp_path / "secret"))
    (work / "box.json").write_text('{"write": ["."]}')
    (work / ".awf").mkdir()
    done = awf(work, "run", "flow.py", "--workflow", "boxed", "--sandbox", "box.json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == '"no 0"'  # the secret unread; the record's directory empty inside
    assert (work / "made").read_text() == "made\n"
    [record] = (work / ".awf" / "runs" / "boxed").iterdir()
    opened = [json.loads(line) for line in (record / "log.jsonl").read_text().splitlines() if "sandbox run opened" in line]
    assert [line["fields"]["write"] for line in opened] == [str(work)]


def test_a_workflow_that_asks_for_its_own_sandbox_is_refused(tmp_path):
    (tmp_path / "flow.py").write_text(FLOW.format(secret="/nonexistent"))
    (tmp_path / "box.json").write_text("{}")
    done = awf(tmp_path, "run", "flow.py", "--workflow", "own", "--sandbox", "box.json")
    assert done.returncode == 1 and "sandbox= can't be given" in done.stderr


def test_a_sandbox_file_naming_a_cwd_or_a_bad_host_is_a_usage_error(tmp_path):
    (tmp_path / "flow.py").write_text(FLOW.format(secret="/nonexistent"))
    for text, says in (('{"cwd": "/"}', "unknown field `cwd`"), ('{"network": ["1.2.3.4"]}', "IP address")):
        (tmp_path / "box.json").write_text(text)
        done = awf(tmp_path, "run", "flow.py", "--workflow", "boxed", "--sandbox", "box.json")
        assert done.returncode == 2 and says in done.stderr, done.stderr
