"""The run key: what it seals is good for that alone, where it is read from, what holds it, and
the clear errors of a deployment whose processes don't hold the same one."""

from __future__ import annotations

import json
import os
import secrets
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from uuid import uuid4

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

import agentswf
from agentswf import tool, workflow
from agentswf.errors import RunKeyError
from agentswf.temporal import RunKey, TemporalEngine, connect, turn_worker
from agentswf.temporal.engine import start_input, workflow_worker
from agentswf.temporal.keys import KEY_FILE_VARIABLE, KEY_VARIABLE, SealBroken, load_key, seal, unseal
from agentswf.temporal.messages import WORKFLOW_TYPE, RunRequest

AWF = [sys.executable, "-m", "agentswf"]
KEY = RunKey("k" * 40)
BOUND = {"kind": "update", "workflow": "w1", "run": "r1", "name": "agentswf.decide"}
text = st.text(max_size=12)


@given(body=st.dictionaries(text, st.integers() | text, max_size=3), by=text, field=st.sampled_from(sorted(BOUND)),
       other=text)
def test_a_seal_is_good_only_for_what_it_was_made_for(body: dict[str, Any], by: str, field: str, other: str) -> None:
    sealed = seal(KEY, body, kind="update", workflow="w1", run="r1", name="agentswf.decide", by=by)
    opened = unseal(KEY, sealed, what="it", **BOUND)  # type: ignore[arg-type]
    assert (opened.body, opened.by) == (body, by)
    if other != BOUND[field]:  # the same seal, for another run, workflow, update or kind
        with pytest.raises(SealBroken, match="doesn't verify"):
            unseal(KEY, sealed, what="it", **{**BOUND, field: other})  # type: ignore[arg-type]
    for changed in ({**sealed, "by": by + "x"}, {**sealed, "body": {**body, "more": 1}}, {**sealed, "nonce": "n"}):
        with pytest.raises(SealBroken, match="doesn't verify"):
            unseal(KEY, changed, what="it", **BOUND)  # type: ignore[arg-type]


def test_a_seal_of_another_key_names_both_keys_and_one_of_none_says_so() -> None:
    other = RunKey("o" * 40)
    with pytest.raises(SealBroken, match=f"signed with run key {other.id}, not with this run's \\({KEY.id}\\)") as broken:
        unseal(KEY, seal(other, {}, by="x", **BOUND), what="it", **BOUND)  # type: ignore[arg-type]
    assert broken.value.mismatch
    with pytest.raises(SealBroken, match="carries no signature") as broken:
        unseal(KEY, {"call_id": "c1"}, what="it", **BOUND)  # type: ignore[arg-type]
    assert not broken.value.mismatch
    assert KEY.id not in repr(KEY._secret) and repr(KEY) == f"<RunKey {KEY.id}>"


def test_the_key_comes_from_its_variable_its_file_or_the_default_file_made_once(tmp_path: Path) -> None:
    secret = secrets.token_urlsafe(32)
    named = tmp_path / "named.key"
    named.write_text(secret + "\n")
    named.chmod(0o600)
    assert load_key({KEY_VARIABLE: secret, KEY_FILE_VARIABLE: "/nowhere"}).id == RunKey(secret).id
    assert load_key({KEY_FILE_VARIABLE: str(named)}).id == RunKey(secret).id
    with pytest.raises(RunKeyError, match="no run key at /nowhere"):
        load_key({KEY_FILE_VARIABLE: "/nowhere"}, create=True)  # a named file is never made: a typo isn't a new key
    named.chmod(0o640)
    with pytest.raises(RunKeyError, match="can be read by others .* chmod 600"):
        load_key({KEY_FILE_VARIABLE: str(named)})
    with pytest.raises(RunKeyError, match="at least 32 characters"):
        load_key({KEY_VARIABLE: "short"})
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    default = tmp_path / "config" / "agentswf" / "temporal.key"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CONFIG_HOME", env["XDG_CONFIG_HOME"])
        with pytest.raises(RunKeyError, match=f"no run key at {default}"):
            load_key({})
        made = load_key({}, create=True)
        assert load_key({}).id == made.id
    assert stat.S_IMODE(default.stat().st_mode) == 0o600


def test_a_fifo_or_a_directory_in_a_key_files_place_is_refused_not_waited_on(tmp_path: Path) -> None:
    """An agent of the same user can put a FIFO where the key is read: a person's command says so
    at once rather than hang on it."""
    fifo = tmp_path / "fifo.key"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(RunKeyError, match="not a regular file"):
        load_key({KEY_FILE_VARIABLE: str(fifo)})
    (tmp_path / "dir.key").mkdir(mode=0o700)
    with pytest.raises(RunKeyError, match="not a regular file"):
        load_key({KEY_FILE_VARIABLE: str(tmp_path / "dir.key")})


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux's")
def test_a_process_that_holds_the_key_is_not_dumpable() -> None:
    probe = ("import ctypes; from agentswf.temporal.keys import no_dump; assert no_dump(); "
             "print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))")  # PR_GET_DUMPABLE
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout == "0\n"


# How many of the key's variables its environment has; and, on Temporal, how many processes it
# can read the environment of show the key itself (it names the key only to count: the worker's
# helpers, a watchdog say, must not have inherited it).
TELLS_ENV = """#!/bin/sh
cat >/dev/null
mine=$(env | grep -c AGENTSWF_TEMPORAL_KEY)
shown=$(grep -l -a -F "{secret}" /proc/[0-9]*/environ 2>/dev/null | wc -l)
echo "$mine {shown}" | "$WFA" result "$WFA_CALL_ID"
"""


@pytest.mark.parametrize("engine", ["local", "temporal"])
async def test_an_agents_environment_never_carries_the_key(
    engine: str, temporal_address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "tells.sh"
    secret = secrets.token_urlsafe(32)
    script.write_text(TELLS_ENV.format(secret=secret, shown="$shown" if engine == "temporal" else "-"))
    script.chmod(0o700)
    monkeypatch.setenv(KEY_VARIABLE, secret)  # KEY_FILE_VARIABLE is set for the session

    @workflow(name="tells-env", description="The agent counts the key's variables in its environment.")
    async def flow(wf):  # type: ignore[no-untyped-def]
        agent = await wf.agents.open("a", runtime=f"shell:{script}")
        return (await agent.run("Count.", timeout="20s")).value

    on = {} if engine == "local" else {"engine": TemporalEngine(
        address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")}
    with anyio.fail_after(60):
        result = await agentswf.run(flow, run_root=tmp_path / "runs", **on)  # type: ignore[arg-type]
    assert result.value == ("0 0" if engine == "temporal" else "0 -"), result.reason


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the client is used here, on asyncio
async def test_a_worker_with_another_key_refuses_the_turn_saying_so(temporal_address: str, tmp_path: Path) -> None:
    ours, theirs = RunKey(secrets.token_urlsafe(32)), RunKey(secrets.token_urlsafe(32))

    @workflow(name="other-key", description="A turn on a worker that holds another key.")
    async def flow(wf):  # type: ignore[no-untyped-def]
        agent = await wf.agents.open("a", runtime='shell:echo hi | "$WFA" result "$WFA_CALL_ID"')
        return (await agent.run("Say hi.", timeout="20s")).outcome.reason

    queue = f"test-{uuid4().hex[:8]}"
    refused: list[str] = []
    client = await connect(temporal_address)
    engine = TemporalEngine(client=client, task_queue=queue, run_turns=False, key=ours)
    with anyio.fail_after(60):
        async with turn_worker(client, queue, key=theirs, root=tmp_path / "w", refused=refused.append):
            result = await agentswf.run(flow, run_root=tmp_path / "runs", engine=engine)
    assert result.value.startswith("the worker could not run the turn: this worker refused the activity: activity "
                                   "a-turn-1 of workflow other-key-"), result.value
    assert f"signed with run key {ours.id}, not with this worker's ({theirs.id}): every process" in result.value
    assert len(refused) == 1


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the client is used here, on asyncio
async def test_a_workflow_worker_with_another_key_fails_its_task_saying_so(temporal_address: str, tmp_path: Path) -> None:
    """Not the run: a worker with the run's key can still take it (and no nondeterminism is reported)."""
    ours, theirs = RunKey(secrets.token_urlsafe(32)), RunKey(secrets.token_urlsafe(32))

    @workflow(name="other-workflow-key", description="Returns at once.")
    async def flow(wf):  # type: ignore[no-untyped-def]
        return "done"

    queue, workflow_id = f"test-{uuid4().hex[:8]}", f"other-workflow-key-{uuid4().hex[:8]}"
    client = await connect(temporal_address)
    request = RunRequest(workflow=flow.name, run_id="r1", cwd=str(tmp_path), run_dir=str(tmp_path), timeout=60,
                         turn_queue=queue)
    async with workflow_worker(client, queue, flow, theirs):
        handle = await client.start_workflow(WORKFLOW_TYPE, start_input(ours, request, workflow_id), id=workflow_id,
                                             task_queue=f"{queue}.workflow.{flow.name}")
        with anyio.fail_after(30):
            while not (failed := [event async for event in handle.fetch_history_events()
                                  if event.HasField("workflow_task_failed_event_attributes")]):
                await anyio.sleep(0.1)
    said = failed[0].workflow_task_failed_event_attributes.failure.message
    assert f"the run's request was signed with run key {ours.id}, not with this workflow worker's ({theirs.id})" in said
    assert "nondetermin" not in said.lower()
    async with workflow_worker(client, queue, flow, ours):
        with anyio.fail_after(30):
            assert (await handle.result())["value"] == "done"


def awf(cwd: Path, *words: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AWF, *words], capture_output=True, text=True, timeout=60, cwd=cwd, env=env, check=False)


def live_temporal_run(tmp_path: Path, address: str = "127.0.0.1:1") -> str:
    """A live Temporal run's record, as `awf run --engine temporal` writes it (no server behind it)."""
    run_dir = tmp_path / ".awf" / "runs" / "slow" / "20261201-120000-ab12"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"run_id": run_dir.name, "workflow": "slow", "cwd": str(tmp_path)}))
    (run_dir / "temporal.json").write_text(json.dumps(
        {"workflow_id": f"slow-{run_dir.name}", "address": address, "namespace": "default", "task_queue": "q"}
    ))  # fmt: skip
    return run_dir.name


def test_a_persons_command_started_by_an_agent_is_refused_before_it_signs(tmp_path: Path) -> None:
    run = live_temporal_run(tmp_path)
    marked = {**os.environ, "AGENTSWF_MARK": "awf-run/ab12"}  # as every process of an agent carries it
    said = awf(tmp_path, "approve", run, "c1", env=marked)
    assert said.returncode == 2 and "this command is for people, and process" in said.stderr, said.stderr
    # Its mark dropped, the command is still under the agent's processes, which carry it.
    said = subprocess.run(
        ["sh", "-c", f"env -u AGENTSWF_MARK {' '.join(AWF)} send {run} bob hi --as ada; echo $?"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env=marked, check=False,
    )
    assert said.stdout.strip().endswith("2") and "this command is for people" in said.stderr, said.stderr


def test_a_persons_command_without_a_key_says_what_to_give(tmp_path: Path) -> None:
    run = live_temporal_run(tmp_path)
    env = {name: value for name, value in os.environ.items() if name not in (KEY_VARIABLE, KEY_FILE_VARIABLE)}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    said = awf(tmp_path, "approve", run, "c1", env=env)
    assert said.returncode == 2 and "Traceback" not in said.stderr, said.stderr
    assert f"no run key at {tmp_path}/config/agentswf/temporal.key: give this deployment's key in {KEY_VARIABLE}" in said.stderr
    assert not (tmp_path / "config").exists()  # a person's command makes no key


def test_a_first_awf_worker_makes_the_key_and_says_so(tmp_path: Path) -> None:
    env = {name: value for name, value in os.environ.items() if name not in (KEY_VARIABLE, KEY_FILE_VARIABLE)}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    said = awf(tmp_path, "worker", "--address", "127.0.0.1:1", "--task-queue", "q", env=env)  # no server: it exits
    key = tmp_path / "config" / "agentswf" / "temporal.key"
    made = load_key({KEY_FILE_VARIABLE: str(key)})
    assert f"awf: made a run key (id {made.id}) in {key}: give it to this deployment's other machines" in said.stderr
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the client is used here, on asyncio
async def test_a_person_with_another_key_is_refused_by_the_run(temporal_address: str, tmp_path: Path) -> None:
    script = tmp_path / "asker.sh"
    script.write_text('#!/bin/sh\ncat >/dev/null\n"$WFA" tool deploy --target staging </dev/null >/dev/null 2>&1\n'
                      '"$WFA" result "$WFA_CALL_ID" done\n')
    script.chmod(0o700)
    runs = tmp_path / "runs"

    @workflow(name="wrong-person-key", description="A call a person with another key tries to approve.")
    async def flow(wf):  # type: ignore[no-untyped-def]
        def deploy(target: str) -> str:
            """Deploy to a target."""
            return "deployed"

        agent = await wf.agents.open("a", runtime=f"shell:{script}", tools={"deploy": tool(deploy, requires_approval=True)})
        return (await agent.run("Deploy.", timeout="30s")).outcome.kind

    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")
    results: list[agentswf.RunResult] = []
    env = {**os.environ, KEY_VARIABLE: secrets.token_urlsafe(32)}

    async def run() -> None:
        results.append(await agentswf.run(flow, run_root=runs, engine=engine))

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            while True:
                assert not results, results[0].reason  # the run ended before its call waited
                found = list(runs.glob("*/*/temporal.json"))
                listed = await anyio.run_process(
                    [*AWF, "pending", found[0].parent.name, "--run-root", str(runs)], check=False
                ) if found else None
                if listed is not None and b"deploy" in listed.stdout:
                    break
                await anyio.sleep(0.1)
            run_id, call = found[0].parent.name, listed.stdout.decode().split()[0]
            wrong = await anyio.run_process([*AWF, "approve", run_id, call, "--run-root", str(runs)], env=env, check=False)
            right = await anyio.run_process([*AWF, "reject", run_id, call, "--run-root", str(runs), "--reason", "no"],
                                            check=False)
    assert wrong.returncode == 2, wrong.stderr
    assert b"awf: the run refused it: the update agentswf.decide was signed with run key " in wrong.stderr, wrong.stderr
    assert right.returncode == 0, right.stderr
    assert results[0].value == "answered", results[0].reason


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the client is used here, on asyncio
async def test_a_runs_sealed_request_copied_and_started_later_runs_nothing(temporal_address: str, tmp_path: Path) -> None:
    """Whoever reads the namespace reads a run's sealed request; once that run has ended, its workflow
    id can be started again with it: the workflow refuses a request sealed long before its start."""
    key = load_key()
    ran: list[str] = []

    @workflow(name="copied-start", description="Records that it ran.")
    async def flow(wf):  # type: ignore[no-untyped-def]
        ran.append("ran")
        return "ran"

    queue, workflow_id = f"test-{uuid4().hex[:8]}", f"copied-start-{uuid4().hex[:8]}"
    request = RunRequest(workflow=flow.name, run_id="r1", cwd=str(tmp_path), run_dir=str(tmp_path), timeout=60,
                         turn_queue=queue, sealed_at=time.time() - 3600)  # as its starter sealed it, an hour ago
    copied = seal(key, request, kind="start", workflow=workflow_id, run="", name=WORKFLOW_TYPE, by="starter", nonce="")
    client = await connect(temporal_address)
    async with workflow_worker(client, queue, flow, key):
        with anyio.fail_after(30):
            ending = await client.execute_workflow(WORKFLOW_TYPE, copied, id=workflow_id,
                                                   task_queue=f"{queue}.workflow.{flow.name}")
    assert ending["outcome"] == "failed" and ending["reason"].startswith("the run's request was sealed 3600s before"), ending
    assert ran == []
