"""`awf ls`, `awf status`, `awf stop`, `awf tail` against a live run, each a real `awf` subprocess.

The run is a real `awf run` in its own process, its agents real shell processes; the
commands reach it over its operator socket and its record, as a person in another
terminal would. An agent running the same commands is refused by the run.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentswf.cli.control import age

AWF = [sys.executable, "-m", "agentswf"]
LIVE_WAIT_SECONDS = 30.0

FLOWS = '''
from agentswf import workflow


@workflow(name="busy", description="One agent answers at once, another sleeps in its turn.")
async def busy(wf):
    quick = await wf.agents.open("review:quick", runtime="shell:echo fine | \\"$WFA\\" result \\"$WFA_CALL_ID\\"")
    await quick.run("Say fine.")
    sleeper = await wf.agents.open("review:sleeper", runtime="shell:echo $$ >> {pids}; sleep 1000")
    await sleeper.run("Sleep.", timeout="1h")


@workflow(name="again", description="Stops while a file `go` is absent; with it there, its agent sleeps in its turn.")
async def again(wf):
    agent = await wf.agents.open("waiter", runtime="shell:test -e go && echo $$ >> {pids} && sleep 1000")
    turn = await agent.run("Wait.", timeout="1h", nudge=False)
    if not turn.answered:
        wf.stop("no go")


@workflow(name="meddler", description="An agent tries to read and stop its own run.")
async def meddler(wf):
    agent = await wf.agents.open("m", runtime="shell:{meddle}")
    turn = await agent.run("Meddle.")
    return turn.value
'''

MEDDLE = """#!/bin/sh
cd {cwd}
{python} -m agentswf status > {out}/status.txt 2>&1; echo "status=$?" >> {out}/codes
{python} -m agentswf stop --reason mine > {out}/stop.txt 2>&1; echo "stop=$?" >> {out}/codes
{python} -m agentswf tail --no-follow > {out}/tail.txt 2>&1; echo "tail=$?" >> {out}/codes
echo done | "$WFA" result "$WFA_CALL_ID"
"""


def awf(tmp_path: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AWF, *args], check=False, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)


@pytest.fixture
def flows(tmp_path: Path) -> Path:
    meddle = tmp_path / "meddle.sh"
    meddle.write_text(MEDDLE.format(cwd=tmp_path, python=sys.executable, out=tmp_path))
    meddle.chmod(0o755)
    path = tmp_path / "flows.py"
    path.write_text(FLOWS.replace("{pids}", str(tmp_path / "pids")).replace("{meddle}", str(meddle)))
    return path


def _wait_for(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + LIVE_WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def busy(tmp_path: Path, flows: Path):  # type: ignore[no-untyped-def]
    """A live `awf run` of `busy`, its sleeper in its turn; killed after the test if still running."""
    process = subprocess.Popen(
        [*AWF, "run", str(flows), "--workflow", "busy", "--timeout", "2h"], cwd=tmp_path, stderr=subprocess.PIPE, text=True
    )
    pids = tmp_path / "pids"
    _wait_for(lambda: pids.exists() and pids.read_text().strip(), "the sleeper's turn")
    yield process
    if process.poll() is None:
        process.send_signal(2)
        process.wait(timeout=30)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ls_status_tail_then_stop_a_live_run(tmp_path, busy):
    listed = awf(tmp_path, "ls")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.split("\n\n")[0].splitlines()
    assert header.split() == ["RUN", "WORKFLOW", "STATE", "ATTEMPTS", "AGE", "COST"]
    run_id, workflow, state, attempts = row.split()[:4]
    assert (workflow, state, attempts) == ("busy", "live", "1")

    status = awf(tmp_path, "status", "--json")
    assert status.returncode == 0, status.stderr
    seen = json.loads(status.stdout)
    assert seen["run_id"] == run_id
    agents = {agent["key"]: agent for agent in seen["agents"]}
    assert agents["review:sleeper"]["in_turn"] and agents["review:sleeper"]["turn"] == 1
    assert not agents["review:quick"]["in_turn"] and agents["review:quick"]["turns"] == 1
    text = awf(tmp_path, "status", run_id).stdout
    assert "review:sleeper: in turn 1 for" in text and re.search(r" of (59m5\ds|1h00m)", text), text
    assert ": 2 agents, 1 in a turn" in text and "review:quick: idle after 1 turn;" in text, text  # no "(s)"
    assert "review:quick: idle after 1 turn; 0 tokens, no cost known" in text, text  # not "-", which reads as nothing

    tailed = awf(tmp_path, "tail", "--no-follow")
    assert tailed.returncode == 0, tailed.stderr
    assert "review:quick: turn 1 started: Say fine." in tailed.stdout
    assert "review:quick: turn 1 ended answered" in tailed.stdout
    one = awf(tmp_path, "tail", run_id, "review:sleeper", "--no-follow").stdout
    assert "review:sleeper: turn 1 started" in one and "review:quick" not in one

    follower = subprocess.Popen([*AWF, "tail", "review:sleeper"], cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    assert follower.stdout is not None
    assert "review:sleeper: turn 1 started" in follower.stdout.readline()  # it follows the live run
    sleeper = int((tmp_path / "pids").read_text().split()[0])
    stopped = awf(tmp_path, "stop", "--reason", "enough")
    assert stopped.returncode == 0, stopped.stderr
    assert f"run {run_id} stopped" in stopped.stderr
    assert busy.wait(timeout=30) == 3  # awf run's exit code for stopped
    output = json.loads(next((tmp_path / ".awf/runs/busy").glob("*/output.json")).read_text())
    assert output["outcome"] == "stopped" and output["reason"] == "stopped by operator: enough"
    assert not _alive(sleeper)
    followed, _ = follower.communicate(timeout=30)  # tail ends with the run's ending
    assert follower.returncode == 0
    assert "turn 1 ended cancelled" in followed and followed.splitlines()[-1].endswith("run stopped: stopped by operator: enough")
    assert awf(tmp_path, "ls").stdout.splitlines()[1].split()[2] == "stopped"
    again = awf(tmp_path, "stop", run_id)
    assert again.returncode == 2 and "has ended" in again.stderr


def test_the_turn_a_persons_stop_cancels_says_who_stopped_the_run(tmp_path, busy):
    stopped = awf(tmp_path, "stop", "--reason", "seen enough", "--by", "alice")
    assert stopped.returncode == 0, stopped.stderr
    assert busy.wait(timeout=30) == 3
    record = next((tmp_path / ".awf/runs/busy").glob("*/turns.jsonl")).parent
    lines = [json.loads(line) for line in (record / "turns.jsonl").read_text().splitlines()]
    (sleeper,) = [line for line in lines if line["agent"] == "review:sleeper"]
    said = "the run was stopped by alice: seen enough"  # the person, not "the workflow cancelled the turn"
    assert sleeper["outcome"] == {"kind": "cancelled", "reason": said}, sleeper
    logs = awf(tmp_path, "logs", record.name)
    assert logs.returncode == 0, logs.stderr
    assert f"review:sleeper turn 1 [call {sleeper['call_id']}]: cancelled\n  reason: {said}" in logs.stdout, logs.stdout


def test_a_continued_run_keeps_its_first_start_and_status_says_the_attempts_own(tmp_path, flows):
    first = awf(tmp_path, "run", str(flows), "--workflow", "again")
    assert first.returncode == 3, first.stderr  # stopped: no go
    (record,) = (tmp_path / ".awf/runs/again").iterdir()
    started = json.loads((record / "run.json").read_text())["started_at"]
    (tmp_path / "go").touch()
    process = subprocess.Popen([*AWF, "continue", str(flows), "--workflow", "again"], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: (tmp_path / "pids").exists() and (tmp_path / "pids").read_text().strip(), "attempt 2's turn")
        one, two = (json.loads((record / "attempts" / f"{n}.json").read_text()) for n in (1, 2))
        assert json.loads((record / "run.json").read_text())["started_at"] == started == one["started_at"] < two["started_at"]
        status = awf(tmp_path, "status", "--json")
        assert status.returncode == 0, status.stderr
        seen = json.loads(status.stdout)
        assert (seen["started_at"], seen["attempt"], seen["attempt_started_at"]) == (started, 2, two["started_at"])
        text = awf(tmp_path, "status").stdout
        assert re.search(r"^run \S+ of again, attempt 2 live for \d+s \(the run started \d+s ago\)", text), text
        assert awf(tmp_path, "stop").returncode == 0
        assert process.wait(timeout=30) == 3
    finally:
        if process.poll() is None:
            process.send_signal(2)
            process.wait(timeout=30)
    logs = awf(tmp_path, "logs", record.name).stdout
    assert logs.startswith(f"run {record.name} of again, started {time.strftime('%H:%M:%S', time.localtime(started))}"), logs


def test_an_agent_can_neither_read_nor_stop_its_own_run(tmp_path, flows):
    done = awf(tmp_path, "run", str(flows), "--workflow", "meddler", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"] == "completed"  # not stopped
    codes = dict(line.split("=") for line in (tmp_path / "codes").read_text().split())
    assert codes == {"status": "1", "stop": "1", "tail": "1"}
    for name in ("status", "stop", "tail"):
        assert "refused (wrong-agent)" in (tmp_path / f"{name}.txt").read_text()
    assert "turn 1 started" not in (tmp_path / "tail.txt").read_text()


def test_status_and_stop_of_no_live_run_are_usage_errors(tmp_path):
    for command in ("status", "stop"):
        done = awf(tmp_path, command)
        assert done.returncode == 2 and "no run is live" in done.stderr


def test_ls_of_no_runs(tmp_path):
    done = awf(tmp_path, "ls")
    assert done.returncode == 0 and done.stdout == "" and "no runs under" in done.stderr


@pytest.mark.parametrize("last", ["0", "-1"])
def test_ls_last_of_fewer_than_one_run_is_a_usage_error(tmp_path, last):
    done = awf(tmp_path, "ls", "--last", last)
    assert done.returncode == 2 and done.stderr == f"awf: --last takes how many of the latest runs to list, 1 or more, not {last}\n"


@pytest.mark.parametrize(
    "seconds, text", [(0, "0s"), (59.9, "59s"), (60, "1m00s"), (192, "3m12s"), (7500, "2h05m"), (356400, "4d03h")]
)
def test_age(seconds, text):
    assert age(seconds) == text
