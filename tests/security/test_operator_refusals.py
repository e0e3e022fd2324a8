"""Every `awf` command that asks a live run's operator socket prints the run's refusal as a
refusal: one line on standard error, exit 1 (docs/reference/awf.md), never a traceback (issue 28, 4).

`awf pending` walked the refusal's value (`{"code": "wrong-agent"}`) as a list of calls and died
with `AttributeError: 'str' object has no attribute 'get'`. Each command here is run by an agent
of the run, in its turn, against that live run: the socket refuses every one of them.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

AWF = [sys.executable, "-m", "agentswf"]
COMMAND_SECONDS = 30  # each command's own bound, so a command that isn't refused can't hold the turn
COMMANDS = {
    "approve": ["approve", "c1"],
    "reject": ["reject", "c1", "--reason", "no"],
    "pending": ["pending"],
    "inbox": ["inbox", "--as", "you"],
    "inbox-wait": ["inbox", "--as", "you", "--wait", "5s"],
    "send": ["send", "a", "hello", "--as", "you"],
    "reply": ["reply", "a", "hello", "--as", "you"],
    "status": ["status"],
    "status-json": ["status", "--json"],
    "stop": ["stop", "--reason", "mine"],
    "tail": ["tail", "--no-follow"],
    "tail-agent": ["tail", "a", "--no-follow"],
}
FLOW = '''
from agentswf import workflow

@workflow(name="refused", description="An agent runs a person's commands against its own run.")
async def refused(wf):
    a = await wf.agents.open("a", runtime="shell:{agent}")
    you = await wf.participants.open("you")
    await wf.route(a, you, purpose="Talk")
    return (await a.run("Try them.")).value
'''


def test_each_operator_command_refused_prints_one_line_and_exits_1(tmp_path: Path) -> None:
    lines = [f"cd {shlex.quote(str(tmp_path))}"]
    for name, args in COMMANDS.items():
        command = shlex.join(["timeout", str(COMMAND_SECONDS), *AWF, *args])
        lines.append(f'{command} >"$OUT/{name}.out" 2>"$OUT/{name}.err"; echo $? >"$OUT/{name}.rc"')
    lines.append('echo tried | "$WFA" result "$WFA_CALL_ID"')
    agent = tmp_path / "agent.sh"
    agent.write_text(f"#!/bin/sh\nOUT={shlex.quote(str(tmp_path))}\n" + "\n".join(lines) + "\n")
    agent.chmod(0o755)
    (tmp_path / "flow.py").write_text(FLOW.format(agent=agent))
    done = subprocess.run([*AWF, "run", "flow.py", "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["value"] == "tried"  # completed: not stopped from its own agent
    said = {}
    for name in COMMANDS:
        out, err = (tmp_path / f"{name}.out").read_text(), (tmp_path / f"{name}.err").read_text()
        said[name] = ((tmp_path / f"{name}.rc").read_text().strip(), out, err.count("\n"), err.startswith("awf: refused (wrong-agent): "))
        assert "Traceback" not in err, (name, err)
    assert said == {name: ("1", "", 1, True) for name in COMMANDS}
