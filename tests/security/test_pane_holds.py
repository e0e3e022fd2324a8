"""A pane is its agent's for as long as it lives, and the run's tmux client obeys no server of the agent's.

The real pi TUI in a pane, offline against a scripted model, beside a sibling whose tool call
waits for a person's approval. What the agent's pane runs tries to approve that call on the
run's operator socket, with the run's mark dropped (`env -u AGENTSWF_MARK`):

- between the agent's turns, from a process of its pane's tmux server (as an MCP server the
  repository configures runs, started with the TUI and living with it);
- during its turn, from a program the run's own tmux client was made to run (as a fake tmux
  server's `MSG_SHELL` makes a client exec one): a `tmux` of the agent's on its PATH stands in
  for that server here, running the program in the client's place.

Both are refused and recorded as agent a's, the call stays pending, and what the agent left
running in its pane beyond the TUI (`sleep &`) is gone when its turn ends.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Literal

import anyio
import msgspec
import pytest

from agentswf import tool
from agentswf.engine.record.layout import read_json, read_lines
from agentswf.testing.models import Conversation, ScriptedModel, Shell, Text
from agentswf.testing.models.script import SHELL_ARGUMENTS

from ..clis import TAUGHT
from ..harnesses.kit import N, run_wf, shell_agent
from ..panes.kit import alive, needs, needs_tmux, pane_runtime, processes_with
from .test_pane_attacks import APPROVER

pytestmark = [pytest.mark.anyio, needs_tmux, needs("pi")]


# The agent's `tmux`: in the client's place, once the agent has asked for it, it runs the
# approver (as a fake server would make the client exec it), then carries on as tmux.
TMUX_WRAPPER = """#!/bin/sh
if [ -e {trigger} ] && [ "$4" != "-D" ] && [ "$6" != "-D" ]; then
    rm -f {trigger}
    env -u AGENTSWF_MARK {python} {approver} "$(cat {control})" "$(cat {call})" {out} </dev/null >/dev/null 2>&1
fi
exec {tmux} "$@"
"""


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    verdict: Literal["approve", "reject"]


def script_for(out: Path):
    """Turn 0: note the pane's $TMUX, leave a `sleep` running, have the run's next tmux client
    run the approver, answer. Turn 1: answer."""

    def script(conv: Conversation):
        if not set(conv.tools) & set(SHELL_ARGUMENTS):
            return Text("Review the change")
        found = TAUGHT.search(conv.prompt)
        if not found:
            return Text("Finished.")
        wfa, call = found.groups()
        commands = [f"{wfa} result {call} --verdict approve"]
        if "TURN 0" in conv.prompt:
            commands = [
                f'echo "$TMUX" >{out}/tmux.env',
                f"sleep 1000 >/dev/null 2>&1 & echo $! >{out}/left.pid",
                f"touch {out}/trigger; sleep 1",  # the run's next tmux command is the agent's program
                *commands,
            ]
        done = len(conv.tool_results)
        return Shell(commands[done]) if done < len(commands) else Text("Finished.")

    return script


async def wait_for(path: Path, seconds: float = 30) -> None:
    with anyio.fail_after(seconds):
        while not path.exists() or not path.stat().st_size:
            await anyio.sleep(0.05)


async def test_a_panes_processes_are_refused_as_a_person_between_its_turns_and_during_them(tmp_path):
    work, out = tmp_path / "work", tmp_path
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    approver = tmp_path / "approver.py"
    approver.write_text(APPROVER)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "tmux"
    wrapper.write_text(TMUX_WRAPPER.format(
        trigger=out / "trigger", python=sys.executable, approver=approver, control=out / "control",
        call=out / "call", out=out / "during.json", tmux=shutil.which("tmux"),
    ))  # fmt: skip
    wrapper.chmod(0o755)
    deploys: list[str] = []

    async with ScriptedModel(script_for(out)) as model:
        runtime = pane_runtime("pi", model, tmp_path / "home", env={"PATH": f"{bin_dir}:{os.environ.get('PATH', os.defpath)}"})
        body = '"$WFA" tool deploy >"$OUT/deploy.out" 2>&1; "$WFA" result "$WFA_CALL_ID" --n 1'

        async def fn(wf):
            a = await wf.agents.open("a", runtime=runtime)
            b = await wf.agents.open("b", runtime=shell_agent(tmp_path, "b", body), tools={
                "deploy": tool(lambda: deploys.append("deployed"), description="Deploy.", requires_approval=True),
            })  # fmt: skip
            control = read_json(wf.run_dir / "run.json")["control"]
            (out / "control").write_text(control)
            async with anyio.create_task_group() as group:
                group.start_soon(partial(b.run, "Deploy.", schema=N, timeout=120))
                with anyio.fail_after(30):
                    while not (pending := await wf.approvals.pending()):
                        await anyio.sleep(0.02)
                (out / "call").write_text(pending[0].call_id)
                first = await a.run("TURN 0. Review the change.", schema=Verdict, timeout=90)
                assert first.answered, first.outcome
                await wait_for(out / "during.json")
                left = int((out / "left.pid").read_text())
                assert not alive(left)  # swept as the turn ended; the TUI lives on

                # Between a's turns: a process of its pane's server, its mark dropped.
                socket = (out / "tmux.env").read_text().split(",")[0]
                program = f"env -u AGENTSWF_MARK {sys.executable} {approver} {control} {pending[0].call_id} {out}/between.json"
                subprocess.run([shutil.which("tmux") or "tmux", "-S", socket, "new-window", "-d", program],
                               check=True, timeout=10, env={"PATH": os.defpath})  # fmt: skip
                await wait_for(out / "between.json")
                assert await wf.approvals.pending()  # still waiting for a person
                second = await a.run("TURN 1. Review it again.", schema=Verdict, timeout=90)
                assert second.answered, second.outcome
                await wf.approvals.reject(pending[0].call_id, reason="not by an agent's pane")
            return "done"

        result = await run_wf(fn, tmp_path)
    assert result.outcome == "completed", result.reason
    assert deploys == []
    for attempt in ("during", "between"):
        answer = (out / f"{attempt}.json").read_text()
        assert "wrong-agent" in answer and "agent a's" in answer, (attempt, answer)
    refusals = [line for line in read_lines(result.run_dir / "refusals.jsonl") if line.get("socket") == "operator"]
    assert len(refusals) >= 2 and all("agent a's" in line["reason"] for line in refusals), refusals
    assert processes_with(tmp_path / "home") == []
