"""An agent's sessions line is written before any line of its turns: a run killed with `kill -9`
once its agents' first turns are on record, continued, resumes every one of their sessions.

The sessions line no longer waits on disk as the agent opens (it goes through the Recorder's
batches); this is what that must not lose. The agents are in-process harnesses of this file's
own, opened on runtime codex (a harness that resumes): each reports a native session of its
own and says which one each of its attempts was given to resume. Real processes, sockets and
record; only the CLI is stood in for.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

AGENTS = 40  # enough that their sessions lines and turn lines share the Recorder's batches
READY_SECONDS = 60.0  # for a loaded machine to start the run and end every first turn

FLOW = r'''
import json, sys
from pathlib import Path

import anyio

import agentswf
from agentswf import workflow
from agentswf.harnesses.base import AttemptEnding, AttemptResult, Harness
from agentswf.testing.scripted import ScriptedTurn

HERE = Path(__file__).parent
AGENTS = int(sys.argv[2])


class Resuming(Harness):
    """Answers each turn with `wfa result`, reports session s-<key>, and notes what it resumed."""

    name = "resuming"
    spawns = False  # it plays in the run's own process, which its socket admits

    def __init__(self, key):
        self.key = key

    async def run(self, attempt):
        with (HERE / "resumed.jsonl").open("a") as file:
            file.write(json.dumps({"agent": self.key, "session": attempt.session}) + "\n")
        await ScriptedTurn(attempt).result("done")
        return AttemptResult(AttemptEnding("exited"), session=f"s-{self.key}")


@workflow(name="killed", description="Agents that each take a turn, then a wait that is killed (hang) or passed.")
async def killed(wf) -> int:
    agents = [await wf.agents.open(f"a{i}", runtime="codex") for i in range(AGENTS)]

    async def turn(agent):
        return (await agent.run("Go.", timeout=60)).answered

    assert all(await wf.parallel(agents, turn))
    if (HERE / "hang").exists():
        (HERE / "ready").touch()
        await anyio.sleep(1000)
    return len(agents)


async def main():
    done = await agentswf.run(
        killed, run_root=HERE / "runs", cwd=HERE, harnesses=lambda key, runtime: Resuming(key),
        continue_from=sys.argv[3] if len(sys.argv) > 3 else None,
    )
    print(json.dumps({"outcome": done.outcome, "reason": done.reason, "run_id": done.run_id, "attempt": done.attempt}))


anyio.run(main, backend=sys.argv[1])
'''


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_run_killed_after_its_first_turns_resumes_every_agent(tmp_path, backend):
    flow = tmp_path / "flow.py"
    flow.write_text(FLOW)
    (tmp_path / "hang").touch()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    command = [sys.executable, str(flow), backend, str(AGENTS)]
    run = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + READY_SECONDS
        while not (tmp_path / "ready").exists():
            assert run.poll() is None, run.communicate()
            assert time.monotonic() < deadline, "the run never reached its wait"
            time.sleep(0.05)
    finally:
        run.send_signal(signal.SIGKILL)
        run.communicate(timeout=30)
    [run_dir] = (tmp_path / "runs" / "killed").iterdir()
    first = [line for line in _lines(run_dir / "sessions.jsonl") if line["attempt"] == 1]
    assert sorted(line["agent"] for line in first) == sorted(f"a{i}" for i in range(AGENTS))
    assert {line["harness"] for line in first} == {"codex"}

    (tmp_path / "hang").unlink()
    (tmp_path / "resumed.jsonl").unlink()
    again = subprocess.run([*command, run_dir.name], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    ended = json.loads(again.stdout.splitlines()[-1])
    assert (ended["outcome"], ended["attempt"]) == ("completed", 2), ended
    resumed = {line["agent"]: line["session"] for line in _lines(tmp_path / "resumed.jsonl")}
    assert resumed == {f"a{i}": f"s-a{i}" for i in range(AGENTS)}  # each attempt was given its session
    second = [line for line in _lines(run_dir / "sessions.jsonl") if line["attempt"] == 2]
    assert {line["agent"]: line.get("resumed") for line in second} == resumed
