"""Attacks from an agent on a Temporal worker. The worker's agents run as its user, next to the
worker's own Temporal client: what reaches the workflow is the frontend's API, and the dev
server (like any Temporal without authorization set up) asks no one who is calling. What the
workflow takes and what a turn worker runs is sealed with the deployment's run key, which the
agents don't have (the session's, in a file named by AGENTSWF_TEMPORAL_KEY_FILE, which agents'
environments don't carry; an unsandboxed agent that knew the path could read it, as documented)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import anyio
import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

from temporalio import workflow as temporal_workflow
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

import agentswf
from agentswf import tool, workflow
from agentswf.temporal import TemporalEngine

from ..temporal.conftest import run_key_file, temporal_address, temporal_server  # noqa: F401  (the session's dev server)

AWF = [sys.executable, "-m", "agentswf"]


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
      if [ -n "$call" ]; then $awf approve "$run" "$call" --run-root {runs} --by alice >{said} 2>&1; exit 0; fi
    done
    sleep 0.2
  done
) &
out=$("$WFA" tool deploy --target production </dev/null 2>&1)
printf '%s' "$out" | "$WFA" result "$WFA_CALL_ID"
"""


async def test_an_agent_on_a_worker_cant_approve_its_own_call(temporal_address: str, tmp_path: Path) -> None:  # noqa: F811
    runs = tmp_path / "runs"
    script = tmp_path / "agent.sh"
    said = tmp_path / "approve.said"
    script.write_text(SELF_APPROVER.format(python=sys.executable, runs=runs, said=said))
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
    assert "this command is for people, and process" in said.read_text()  # awf refused it before signing


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


def attack_turn(command: list[str], cwd: str, deadline: float) -> dict[str, object]:
    """A turn as a worker reads it, whose runtime's command is the attacker's."""
    return {
        "workflow": "any", "run_id": "r1", "agent": "x", "n": 1, "cwd": cwd, "instructions": None,
        "runtime": {"harness": "shell", "command": command}, "prompt": "-", "schema": {"type": "string"},
        "deadline": deadline, "nudge": False,
    }  # fmt: skip


@temporal_workflow.defn(name=ATTACK_WORKFLOW)
class Attacker:
    """Workflow code of the attacker's own, run by a worker of its own: it schedules the turn
    activity on the victim's turn queue, with a runtime whose command is the attacker's (or
    with `given`, an input copied from another run's history, under that run's activity id)."""

    @temporal_workflow.run
    async def run(self, queue: str, command: list[str], cwd: str, given: Any = None, activity_id: str = "") -> Any:
        turn = given if given is not None else attack_turn(command, cwd, temporal_workflow.now().timestamp() + 20)
        return await temporal_workflow.execute_activity(
            "agentswf.turn", turn, task_queue=queue, start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(maximum_attempts=1), activity_id=activity_id or None,
        )  # fmt: skip


async def _attack(client: Client, victim_queue: str, *args: object) -> str:
    """Run the attacker's workflow, on a worker of its own, against the victim's queue: how it failed."""
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker

    attacker_queue = f"attacker-{uuid4().hex[:8]}"
    async with Worker(client, task_queue=attacker_queue, workflows=[Attacker], workflow_runner=UnsandboxedWorkflowRunner()):
        with anyio.fail_after(60), pytest.raises(WorkflowFailureError) as failed:
            await client.execute_workflow(
                ATTACK_WORKFLOW, args=[victim_queue, *args], id=f"attack-{uuid4().hex[:8]}", task_queue=attacker_queue,
            )  # fmt: skip
    refusal = failed.value.cause.cause  # the activity's failure: the worker's refusal
    assert isinstance(refusal, ApplicationError) and refusal.non_retryable, refusal
    return refusal.message


async def test_a_turn_worker_runs_no_command_a_workflow_of_anothers_names(temporal_address: str, tmp_path: Path) -> None:  # noqa: F811
    from agentswf.temporal import connect, turn_worker

    pwned = tmp_path / "PWNED"
    victim_queue = f"victim-{uuid4().hex[:8]}"
    client = await connect(temporal_address)
    refused: list[str] = []
    victim = turn_worker(client, victim_queue, root=tmp_path / "w", refused=refused.append)  # a person's worker
    async with victim:
        why = await _attack(client, victim_queue, ["/bin/sh", "-c", f"touch {pwned}"], str(tmp_path))
    assert not pwned.exists()
    assert why.startswith("this worker refused the activity: activity 1 of workflow attack-") and "no signature" in why
    assert refused == [why.removeprefix("this worker refused the activity: ")]  # awf worker prints it on stderr


def test_awf_worker_says_on_stderr_which_turn_it_refused(temporal_address: str, tmp_path: Path) -> None:  # noqa: F811
    from agentswf.temporal import connect, on_asyncio

    pwned, queue = tmp_path / "PWNED", f"victim-{uuid4().hex[:8]}"
    worker = subprocess.Popen(
        [*AWF, "worker", "--address", temporal_address, "--task-queue", queue, "--root", str(tmp_path / "w")],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, start_new_session=True,
    )  # fmt: skip
    assert worker.stderr is not None
    try:
        assert worker.stderr.readline().startswith("awf: WARNING: no payload key"), "the worker did not warn"
        assert worker.stderr.readline().startswith("awf: worker on"), "the worker did not start"

        async def attack() -> str:
            return await _attack(await connect(temporal_address), queue, ["touch", str(pwned)], str(tmp_path))

        why = anyio.run(on_asyncio, attack)
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(10)
    said = worker.stderr.read()
    worker.stderr.close()
    assert f"awf: refused: {why.removeprefix('this worker refused the activity: ')}\n" in said, said
    assert not pwned.exists()


async def test_a_turn_sealed_for_one_run_runs_in_no_other(temporal_address: str, tmp_path: Path) -> None:  # noqa: F811
    """Whoever reads the namespace reads a real run's sealed turns: copied into a workflow of its own
    (as it was, or with its command changed), the worker refuses each."""
    from agentswf.temporal import connect, turn_worker

    @workflow(name="sealed-turn", description="One turn, whose sealed input the attacker copies.")
    async def flow(wf):  # type: ignore[no-untyped-def]
        agent = await wf.agents.open("x", runtime='shell:cat >/dev/null; echo hi | "$WFA" result "$WFA_CALL_ID"')
        return (await agent.run("Say hi.", timeout="20s")).value

    queue = f"victim-{uuid4().hex[:8]}"
    result = await agentswf.run(flow, run_root=tmp_path / "runs", engine=TemporalEngine(
        address=temporal_address, task_queue=queue, worker_root=tmp_path / "w"))
    assert result.value == "hi", result.reason
    client = await connect(temporal_address)
    workflow_id = json.loads((result.run_dir / "temporal.json").read_text())["workflow_id"]
    [sealed] = [
        json.loads(event.activity_task_scheduled_event_attributes.input.payloads[0].data)
        async for event in client.get_workflow_handle(workflow_id).fetch_history_events()
        if event.HasField("activity_task_scheduled_event_attributes")
    ]
    pwned = tmp_path / "PWNED"
    changed = {**sealed, "body": {**sealed["body"], "runtime": {"harness": "shell", "command": ["touch", str(pwned)]}}}
    async with turn_worker(client, queue, root=tmp_path / "w2", refused=lambda why: None):
        for given in (sealed, changed):
            why = await _attack(client, queue, [], "", given, "x-turn-1")
            assert "signature doesn't verify" in why, why
    assert not pwned.exists()


# The agent's own Temporal client, in its turn: what it finds of its run, and how the workflow
# answers each update it sends (its refusal's words, or "accepted").
RAW_UPDATES = """
import asyncio, glob, json, os, secrets, subprocess, sys
from temporalio.client import Client, WorkflowUpdateFailedError
from agentswf.temporal.keys import RunKey, seal

async def connect():
    record = json.load(open(glob.glob({runs!r} + "/*/*/temporal.json")[0]))
    client = await Client.connect(record["address"], namespace=record["namespace"])
    handle = client.get_workflow_handle(record["workflow_id"])
    return handle, (await handle.describe()).run_id

async def sent(handle, name):
    '''The sealed updates `name` the run took, from its history (anyone in the namespace reads it).'''
    found = []
    async for event in handle.fetch_history_events():
        if event.HasField("workflow_execution_update_accepted_event_attributes"):
            given = event.workflow_execution_update_accepted_event_attributes.accepted_request.input
            if given.name == name:
                found.append(json.loads(given.args.payloads[0].data))
    return found

async def answer(handle, name, arg):
    try:
        await handle.execute_update(name, arg)
        return "accepted"
    except WorkflowUpdateFailedError as error:
        return str(error.cause.message)

def own_key():
    return RunKey(secrets.token_urlsafe(32))
"""

# It makes a call a person approves (`awf approve`, signed "alice"); then, while its next call
# waits, it tries to approve that one itself: unsealed, sealed with a key of its own, and with
# the person's seal replayed (as it was, onto its own call, as another update).
DECIDE_FORGER = RAW_UPDATES + """
sys.stdin.read()
wfa = os.environ["WFA"]
first = subprocess.run([wfa, "tool", "deploy", "--target", "staging"], stdin=subprocess.DEVNULL, capture_output=True)
second = subprocess.Popen([wfa, "tool", "deploy", "--target", "production"], stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

async def attack():
    handle, run_id = await connect()
    while not [call for call in await handle.query("agentswf.pending") if "production" in json.dumps(call)]:
        await asyncio.sleep(0.05)
    [call] = await handle.query("agentswf.pending")
    decision = {{"call_id": call["call_id"], "approved": True, "reason": "", "by": "alice"}}
    [person] = await sent(handle, "agentswf.decide")
    forged = seal(own_key(), decision, kind="update", workflow=handle.id, run=run_id, name="agentswf.decide",
                  by="person:alice")
    return {{
        "unsealed": await answer(handle, "agentswf.decide", decision),
        "its own key": await answer(handle, "agentswf.decide", forged),
        "replayed": await answer(handle, "agentswf.decide", person),
        "onto its call": await answer(handle, "agentswf.decide", {{**person, "body": {{**person["body"], **decision}}}}),
        "as another update": await answer(handle, "agentswf.operator", person),
    }}

json.dump(asyncio.run(attack()), open({said!r}, "w"))
second.wait()
subprocess.run([wfa, "result", os.environ["WFA_CALL_ID"], "done"], check=True)
"""


async def test_an_agent_on_a_worker_cant_approve_its_call_with_an_update_of_its_own(
    temporal_address: str, tmp_path: Path  # noqa: F811
) -> None:
    runs, said = tmp_path / "runs", tmp_path / "said.json"
    script = tmp_path / "agent.py"
    script.write_text(DECIDE_FORGER.format(runs=str(runs), said=str(said)))
    done: list[str] = []

    @workflow(name="forged-decision", description="An agent's calls wait on a person.")
    async def flow(wf):  # type: ignore[no-untyped-def]
        def deploy(target: str) -> str:
            """Deploy to a target."""
            done.append(target)
            return f"deployed to {target}"

        agent = await wf.agents.open("a", runtime=f"shell:{sys.executable} {script}",
                                     tools={"deploy": tool(deploy, requires_approval=True)})
        return (await agent.run("Deploy.", timeout="40s", nudge=False)).outcome.kind

    async def person(command: str, target: str, *more: str) -> None:
        """As a person does: awf pending, then awf approve or reject of the call for `target`."""
        while True:
            found = list(runs.glob("*/*/temporal.json"))
            if found:
                listed = await anyio.run_process([*AWF, "pending", found[0].parent.name, "--run-root", str(runs)])
                if target in listed.stdout.decode():
                    break
            await anyio.sleep(0.1)
        call = listed.stdout.decode().split()[0]
        await anyio.run_process([*AWF, command, found[0].parent.name, call, "--run-root", str(runs), "--by", "alice", *more])

    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
    results: list[agentswf.RunResult] = []

    async def run() -> None:
        results.append(await agentswf.run(flow, run_root=runs, engine=engine))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await person("approve", "staging")
            while not said.exists():
                await anyio.sleep(0.1)
            await person("reject", "production", "--reason", "the agent's turn is over")
    [result] = results
    assert result.value == "answered", result.reason
    answers = json.loads(said.read_text())
    assert "carries no signature" in answers["unsealed"], answers
    assert "was signed with run key" in answers["its own key"], answers
    assert "a seal is good once" in answers["replayed"], answers
    assert "signature doesn't verify" in answers["onto its call"], answers
    assert "signature doesn't verify" in answers["as another update"], answers
    assert done == ["staging"]
    client = await Client.connect(temporal_address)
    workflow_id = json.loads((result.run_dir / "temporal.json").read_text())["workflow_id"]
    accepted = [event async for event in client.get_workflow_handle(workflow_id).fetch_history_events()
                if event.HasField("workflow_execution_update_accepted_event_attributes")]
    names = [event.workflow_execution_update_accepted_event_attributes.accepted_request.input.name for event in accepted]
    assert names.count("agentswf.decide") == 2 and "agentswf.operator" not in names  # the refused left no history


# Agent a calls its own tool (the worker seals the update for a); then it sends the workflow b's
# tool as b: unsealed, sealed with a key of its own, and its own call's seal replayed (as it was,
# and rewritten to name b and b's tool).
TOOL_FORGER = RAW_UPDATES + """
sys.stdin.read()
wfa = os.environ["WFA"]
subprocess.run([wfa, "tool", "note"], stdin=subprocess.DEVNULL, capture_output=True, check=True)

async def attack():
    handle, run_id = await connect()
    [mine] = await sent(handle, "agentswf.tool")
    as_b = {{**mine["body"], "agent": "b", "tool": "wipe", "call_id": "x1"}}
    forged = seal(own_key(), as_b, kind="update", workflow=handle.id, run=run_id, name="agentswf.tool", by="worker:b")
    return {{
        "unsealed": await answer(handle, "agentswf.tool", as_b),
        "its own key": await answer(handle, "agentswf.tool", forged),
        "replayed": await answer(handle, "agentswf.tool", mine),
        "rewritten": await answer(handle, "agentswf.tool", {{**mine, "body": as_b, "by": "worker:b"}}),
    }}

json.dump(asyncio.run(attack()), open({said!r}, "w"))
subprocess.run([wfa, "result", os.environ["WFA_CALL_ID"], "done"], check=True)
"""


async def test_an_agent_on_a_worker_cant_send_another_agents_tool_call_of_its_own(
    temporal_address: str, tmp_path: Path  # noqa: F811
) -> None:
    runs, said = tmp_path / "runs", tmp_path / "said.json"
    script = tmp_path / "agent.py"
    script.write_text(TOOL_FORGER.format(runs=str(runs), said=str(said)))
    called: list[str] = []

    @workflow(name="forged-call", description="Agent a may note; agent b may wipe.")
    async def flow(wf):  # type: ignore[no-untyped-def]
        def note() -> str:
            """Take a note."""
            called.append("a's note")
            return "noted"

        def wipe() -> str:
            """Wipe the staging database."""
            called.append("b's wipe")
            return "wiped"

        await wf.agents.open("b", runtime=f"shell:{sys.executable} {script}", tools={"wipe": tool(wipe)})
        a = await wf.agents.open("a", runtime=f"shell:{sys.executable} {script}", tools={"note": tool(note)})
        return (await a.run("Work.", timeout="30s", nudge=False)).outcome.kind

    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
    with anyio.fail_after(60):
        result = await agentswf.run(flow, run_root=runs, engine=engine)
    assert result.value == "answered", result.reason
    answers = json.loads(said.read_text())
    assert "carries no signature" in answers["unsealed"], answers
    assert "was signed with run key" in answers["its own key"], answers
    assert "a seal is good once" in answers["replayed"], answers
    assert "signature doesn't verify" in answers["rewritten"], answers
    assert called == ["a's note"]  # once: its replay ran nothing
