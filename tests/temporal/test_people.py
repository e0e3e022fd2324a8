"""People reach a Temporal run through awf: `awf pending` lists a tool call waiting for approval,
`awf approve` lets it run and `awf reject` refuses it, each reaching the workflow (a query, an
update), and `awf status` shows the run's turns in flight and the calls waiting."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from uuid import uuid4

import anyio
import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

import agentswf
from agentswf import tool, workflow
from agentswf.temporal import TemporalEngine

AGENT = """#!/bin/sh
cat >/dev/null
first=$("$WFA" tool deploy --target staging </dev/null 2>&1); c1=$?
second=$("$WFA" tool deploy --target production </dev/null 2>&1); c2=$?
printf '%s|%s@@%s|%s' "$first" "$c1" "$second" "$c2" | "$WFA" result "$WFA_CALL_ID"
"""


async def awf(*words: str) -> tuple[int, str, str]:
    done = await anyio.run_process([sys.executable, "-m", "agentswf", *words], check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_a_person_approves_and_rejects_a_temporal_runs_calls(temporal_address: str, tmp_path: Path) -> None:
    script = tmp_path / "deployer.sh"
    script.write_text(AGENT)
    script.chmod(0o700)
    runs = tmp_path / "runs"

    @workflow(name="deploys", description="An agent deploys twice, each call approved by a person.")
    async def deploys(wf):  # type: ignore[no-untyped-def]
        done: list[str] = []

        def deploy(target: str) -> str:
            """Deploy to a target."""
            done.append(target)
            return f"deployed to {target}"

        agent = await wf.agents.open("deployer", runtime=f"shell:{script}",
                                     tools={"deploy": tool(deploy, requires_approval=True)})
        turn = await agent.run("Deploy.", timeout="2m")
        return {"said": turn.value if turn.answered else turn.outcome.reason, "done": done}

    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
    results: list[agentswf.RunResult] = []

    async def run() -> None:
        results.append(await agentswf.run(deploys, run_root=runs, engine=engine))

    async def decide(command: str, target: str, *more: str, again: bool = False) -> None:
        with anyio.fail_after(30):
            while True:
                found = list(runs.glob("deploys/*/temporal.json"))
                if found:
                    code, out, err = await awf("pending", found[0].parent.name, "--run-root", str(runs))
                    assert code == 0, err
                    if target in out:
                        break
                await anyio.sleep(0.1)
        call = out.split()[0]
        code, status, err = await awf("status", found[0].parent.name, "--run-root", str(runs))
        assert code == 0, err
        assert ": RUNNING" in status and "in flight: deployer-turn-1 (attempt 1, started" in status, status
        assert f"waiting for approval: {call}  deployer → deploy" in status and "log: approval asked" in status, status
        code, out, err = await awf(command, found[0].parent.name, call, "--run-root", str(runs), *more)
        assert code == 0, err
        if again:  # a call is decided once (the run waits on the next call meanwhile)
            code, out, err = await awf(command, found[0].parent.name, call, "--run-root", str(runs), *more)
            assert code == 1 and "no call" in err, (code, out, err)

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        await decide("approve", "staging", again=True)
        await decide("reject", "production", "--reason", "not on a Friday")
    [result] = results
    assert result.outcome == "completed", result.reason
    first, second = result.value["said"].split("@@")
    assert first == "deployed to staging|0"
    assert second.startswith("wfa: tool failed: a person rejected this call: not on a Friday") and second.endswith("|1")
    assert result.value["done"] == ["staging"]
    lines = [json.loads(line) for line in (result.run_dir / "tools.jsonl").read_text().splitlines()]
    assert [(line["outcome"], line["approval"]["approved"]) for line in lines] == [("result", True), ("refused", False)]


async def test_a_call_no_one_decides_is_withdrawn_when_its_turn_ends(temporal_address: str, tmp_path: Path) -> None:
    script = tmp_path / "asker.sh"
    script.write_text('#!/bin/sh\ncat >/dev/null\n"$WFA" tool deploy --target staging </dev/null >/dev/null 2>&1\n')
    script.chmod(0o700)

    @workflow(name="undecided", description="A call waiting for approval past its turn's deadline.")
    async def undecided(wf):  # type: ignore[no-untyped-def]
        def deploy(target: str) -> str:
            """Deploy to a target."""
            return "deployed"

        agent = await wf.agents.open("asker", runtime=f"shell:{script}",
                                     tools={"deploy": tool(deploy, requires_approval=True)})
        turn = await agent.run("Deploy.", timeout="2s", nudge=False)
        return [turn.outcome.kind, [call.call_id for call in await wf.approvals.pending()]]

    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
    with anyio.fail_after(30):
        result = await agentswf.run(undecided, run_root=tmp_path / "runs", engine=engine)
    assert result.value == ["timed-out", []], result.reason
    [line] = [json.loads(line) for line in (result.run_dir / "tools.jsonl").read_text().splitlines()]
    assert line["outcome"] == "timed-out" and "before its turn ended" in line["error"]
