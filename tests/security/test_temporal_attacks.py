"""Attacks from an agent on a Temporal worker. The worker's agents run as its user, next to the
worker's own Temporal client: what reaches the workflow is the frontend's API, and the dev
server (like any Temporal without authorization set up) asks no one who is calling."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from uuid import uuid4

import anyio
import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

from temporalio import workflow as temporal_workflow
from temporalio.common import RetryPolicy

import agentswf
from agentswf import tool, workflow
from agentswf.temporal import TemporalEngine

from ..temporal.conftest import temporal_address, temporal_server  # noqa: F401  (the session's dev server)

NO_IDENTITY = (
    "open: a Temporal run has no identity check (issue for the lead): anything that reaches the frontend, an "
    "agent on a worker included, can send the workflow's updates; see docs/guide/security.md"
)


@pytest.fixture(params=["asyncio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# The agent starts a helper that waits for its own call to be asked about, and approves it as a
# person would (`awf approve`, signed "alice"); then it makes the call.
SELF_APPROVER = """#!/bin/sh
cat >/dev/null
awf="{python} -m agentswf"
(
  for i in $(seq 150); do
    for record in {runs}/self-approve/*/temporal.json; do
      run=$(basename "$(dirname "$record")")
      call=$($awf pending "$run" --run-root {runs} 2>/dev/null | awk '{{print $1}}' | head -n 1)
      if [ -n "$call" ]; then $awf approve "$run" "$call" --run-root {runs} --by alice >/dev/null 2>&1; exit 0; fi
    done
    sleep 0.2
  done
) &
out=$("$WFA" tool deploy --target production </dev/null 2>&1)
printf '%s' "$out" | "$WFA" result "$WFA_CALL_ID"
"""


@pytest.mark.xfail(strict=True, reason=NO_IDENTITY)
async def test_an_agent_on_a_worker_cant_approve_its_own_call(temporal_address: str, tmp_path: Path) -> None:  # noqa: F811
    runs = tmp_path / "runs"
    script = tmp_path / "agent.sh"
    script.write_text(SELF_APPROVER.format(python=sys.executable, runs=runs))
    script.chmod(0o700)
    done: list[str] = []

    @workflow(name="self-approve", description="An agent's call waits on a person.")
    async def flow(wf):  # type: ignore[no-untyped-def]
        def deploy(target: str) -> str:
            """Deploy to a target."""
            done.append(target)
            return f"deployed to {target}"

        agent = await wf.agents.open("a", runtime=f"shell:{script}", tools={"deploy": tool(deploy, requires_approval=True)})
        turn = await agent.run("Deploy.", timeout="8s", nudge=False)
        return turn.outcome.kind

    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
    with anyio.fail_after(60):
        await agentswf.run(flow, run_root=runs, engine=engine)
    assert done == []  # no person approved it


# The agent sends the workflow the update a worker sends for a tool call, naming another agent
# (b, which is in no turn) and b's tool: the workflow runs b's handler for it.
IMPERSONATOR = """#!/bin/sh
cat >/dev/null
{python} - <<'EOF'
import asyncio, glob, json
from temporalio.client import Client
async def main():
    record = json.load(open(glob.glob("{runs}/impersonate/*/temporal.json")[0]))
    client = await Client.connect(record["address"], namespace=record["namespace"])
    handle = client.get_workflow_handle(record["workflow_id"])
    print(await handle.execute_update("agentswf.tool", {{"agent": "b", "tool": "wipe", "call_id": "x1", "input": {{}}, "turn": 1}}))
asyncio.run(main())
EOF
"$WFA" result "$WFA_CALL_ID" done
"""


@pytest.mark.xfail(strict=True, reason=NO_IDENTITY)
async def test_an_agent_on_a_worker_cant_call_another_agents_tool(temporal_address: str, tmp_path: Path) -> None:  # noqa: F811
    runs = tmp_path / "runs"
    script = tmp_path / "agent.sh"
    script.write_text(IMPERSONATOR.format(python=sys.executable, runs=runs))
    script.chmod(0o700)
    wiped: list[str] = []

    @workflow(name="impersonate", description="Agent a, no tools; agent b may wipe.")
    async def flow(wf):  # type: ignore[no-untyped-def]
        def wipe() -> str:
            """Wipe the staging database."""
            wiped.append("b's tool, called by a")
            return "wiped"

        await wf.agents.open("b", runtime=f"shell:{script}", tools={"wipe": tool(wipe)})
        a = await wf.agents.open("a", runtime=f"shell:{script}")
        turn = await a.run("Work.", timeout="20s", nudge=False)
        return turn.outcome.kind

    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
    with anyio.fail_after(60):
        result = await agentswf.run(flow, run_root=runs, engine=engine)
    assert result.value == "answered", result.reason  # the attack ran
    assert wiped == []


ATTACK_WORKFLOW = "agentswf-security-attacker"


@temporal_workflow.defn(name=ATTACK_WORKFLOW)
class Attacker:
    """Workflow code of the attacker's own, run by a worker of its own: it schedules the turn
    activity on the victim's turn queue, with a runtime whose command is the attacker's."""

    @temporal_workflow.run
    async def run(self, queue: str, command: list[str], cwd: str) -> object:
        turn = {
            "workflow": "any", "run_id": "r1", "agent": "x", "n": 1, "cwd": cwd, "instructions": None,
            "runtime": {"harness": "shell", "command": command}, "prompt": "-", "schema": {"type": "string"},
            "deadline": temporal_workflow.now().timestamp() + 20, "nudge": False,
        }  # fmt: skip
        return await temporal_workflow.execute_activity(
            "agentswf.turn", turn, task_queue=queue, start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )  # fmt: skip


@pytest.mark.xfail(strict=True, reason=(
    "open: a turn worker runs whatever runtime a turn names, from any workflow on its queue: whoever reaches the "
    "namespace runs commands on every turn worker of it (docs/guide/security.md)"
))
async def test_a_turn_worker_runs_no_command_a_workflow_of_anothers_names(temporal_address: str, tmp_path: Path) -> None:  # noqa: F811
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker

    from agentswf.temporal import connect, turn_worker

    pwned = tmp_path / "PWNED"
    victim_queue, attacker_queue = f"victim-{uuid4().hex[:8]}", f"attacker-{uuid4().hex[:8]}"
    client = await connect(temporal_address)
    victim = turn_worker(client, victim_queue, root=tmp_path / "w")  # a person's worker, on a machine of its own
    attacker = Worker(client, task_queue=attacker_queue, workflows=[Attacker],
                      workflow_runner=UnsandboxedWorkflowRunner())
    async with victim, attacker:
        with anyio.fail_after(60):
            await client.execute_workflow(
                ATTACK_WORKFLOW, args=[victim_queue, ["/bin/sh", "-c", f"touch {pwned}"], str(tmp_path)],
                id=f"attack-{uuid4().hex[:8]}", task_queue=attacker_queue,
            )  # fmt: skip
    assert not pwned.exists()
