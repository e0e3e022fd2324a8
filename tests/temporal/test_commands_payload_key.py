"""A person's command to a Temporal run from a shell with another payload key than the run's, or
none where the run has one: refused at once in one line naming both keys, nothing sent, and the
run goes on as if it never was (codec.py's module docstring). And the run's host, sent an update
it can't decrypt (past `awf`'s check), rejects it at once rather than failing its workflow task."""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from uuid import uuid4

import anyio
import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")
pytest.importorskip("cryptography", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.client import WorkflowUpdateFailedError
from temporalio.converter import ActivitySerializationContext, DefaultFailureConverter, WorkflowSerializationContext
from temporalio.exceptions import ApplicationError

import agentswf
from agentswf import tool, workflow
from agentswf.engine.record.layout import TEMPORAL_FILE
from agentswf.harnesses.environment import PAYLOAD_KEY_VARIABLE, PAYLOAD_OLD_KEYS_VARIABLE
from agentswf.temporal import TemporalEngine, codec, on_asyncio
from agentswf.temporal.codec import (
    HOST_REFUSED,
    UNREADABLE,
    HostCipher,
    HostPayloadConverter,
    PayloadKeys,
    Unreadable,
    command_refused,
    payload_key_id,
    unreadable_in,
)
from agentswf.temporal.engine import connect
from agentswf.temporal.keys import load_key, seal
from agentswf.temporal.messages import DECIDE_UPDATE, DecideRequest
from agentswf.workflow.definition import WorkflowDefinition

AWF = [sys.executable, "-m", "agentswf"]
REFUSED_SECONDS = 15.0  # for a refused command to end, at most (on main: ~22 s, the SDK's retries, then a traceback)
WAITING_SECONDS = 60.0  # for the run's call to wait for approval
RUN_SECONDS = 60.0  # for the run to end once approved
POLL_SECONDS = 0.2  # between asks whether the call waits
AGENT = """#!/bin/sh
cat >/dev/null
said=$("$WFA" tool deploy --target staging </dev/null 2>&1)
printf '%s' "$said" | "$WFA" result "$WFA_CALL_ID"
"""


def approving(script: Path) -> WorkflowDefinition:
    """A workflow whose agent's one call waits for a person's approval, its agent `script`."""

    @workflow(name="approving", description="An agent's one call waits for a person's approval.")
    async def approving(wf):  # type: ignore[no-untyped-def]
        def deploy(target: str) -> str:
            """Deploy to a target."""
            return f"deployed to {target}"

        agent = await wf.agents.open("deployer", runtime=f"shell:{script}",
                                     tools={"deploy": tool(deploy, requires_approval=True)})
        return (await agent.run("Deploy.", timeout="3m")).value

    return approving


def test_a_command_is_sent_only_where_it_encrypts_as_the_runs_host_does() -> None:
    key, newer = os.urandom(32), os.urandom(32)
    host, mine = payload_key_id(key), payload_key_id(newer)
    assert command_refused(host, PayloadKeys(key)) is None and command_refused(None, PayloadKeys()) is None
    assert command_refused(host, PayloadKeys(key, [newer])) is None  # its old keys aren't what it sends with
    assert command_refused(host, PayloadKeys(newer, [key])) == (  # the host's key only among the old: refused
        f"refused, nothing was sent: this run's host encrypts with payload key '{host}', and this command encrypts "
        f"with payload key '{mine}': give the command the host's {PAYLOAD_KEY_VARIABLE}"
    )
    assert command_refused(host, PayloadKeys()) == (
        f"refused, nothing was sent: this run's host encrypts with payload key '{host}', and this command has no "
        f"payload key ({PAYLOAD_KEY_VARIABLE}): give the command the host's {PAYLOAD_KEY_VARIABLE}"
    )
    assert command_refused(None, PayloadKeys(newer)) == (
        f"refused, nothing was sent: this run's host has no payload key, and this command encrypts with payload "
        f"key '{mine}': run it without {PAYLOAD_KEY_VARIABLE}, or give the host that key"
    )


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # no loop of the engine's: the codec alone
async def test_what_a_host_cant_decrypt_is_a_conversion_failure_in_the_workflow_and_ends_the_run_from_a_worker() -> None:
    key, other = os.urandom(32), os.urandom(32)
    sent = PayloadKeys(other).encrypt(Payload(metadata={"encoding": b"json/plain"}, data=b'{"call_id":"c1"}'))
    said = (f"this run's host can't read it: it is encrypted with payload key '{payload_key_id(other)}', which the host "
            f"doesn't hold (it holds {payload_key_id(key)}): give the host and whoever sends to the run the same "
            f"{PAYLOAD_KEY_VARIABLE}")
    in_workflow = HostCipher(PayloadKeys(key)).with_context(WorkflowSerializationContext(namespace="default", workflow_id="w"))
    [handed] = await in_workflow.decode([sent])
    assert handed.metadata["encoding"] == UNREADABLE and handed.data.decode() == said
    with pytest.raises(Unreadable) as raised:
        HostPayloadConverter().from_payloads([handed], [dict])
    # The SDK rejects the update with its own error caused by ours; the sender reads ours.
    rejected = Failure()
    try:
        raise RuntimeError("Failed decoding arguments") from raised.value
    except RuntimeError as sdk_error:
        DefaultFailureConverter().to_failure(sdk_error, HostPayloadConverter(), rejected)
    assert unreadable_in(DefaultFailureConverter().from_failure(rejected, HostPayloadConverter())) == said
    in_activity = HostCipher(PayloadKeys(key)).with_context(ActivitySerializationContext(
        namespace="default", workflow_id="w", workflow_type="agentswf", activity_type="agentswf.turn", activity_id="a",
        activity_task_queue="q", is_local=False,
    ))
    with pytest.raises(ApplicationError) as ended:  # a worker's answer: the run ends (test_workers_payload_key)
        await in_activity.decode([sent])
    assert ended.value.type == HOST_REFUSED and ended.value.non_retryable


def shell(key: bytes | None) -> dict[str, str]:
    """A person's shell: the session's run key, and `key` as its payload key (None: none)."""
    env = {name: value for name, value in os.environ.items() if name not in (PAYLOAD_KEY_VARIABLE, PAYLOAD_OLD_KEYS_VARIABLE)}
    return {**env, PAYLOAD_KEY_VARIABLE: base64.b64encode(key).decode()} if key is not None else env


async def awf(key: bytes | None, *words: str) -> tuple[int, str, float]:
    """`awf WORDS` from a shell with payload key `key`: its exit status, its stderr, how long it took."""
    began = time.monotonic()
    done = await anyio.run_process([*AWF, *words], env=shell(key), check=False)
    return done.returncode, done.stderr.decode(), time.monotonic() - began


async def waiting_call(runs: Path, key: bytes | None) -> tuple[Path, str]:
    """The run's directory and the call waiting for approval, once `awf pending` (with the run's key) lists it."""
    with anyio.fail_after(WAITING_SECONDS):
        while True:
            found = list(runs.glob("approving/*/temporal.json"))
            if found:
                done = await anyio.run_process([*AWF, "pending", str(found[0].parent)], env=shell(key), check=False)
                if b"deploy" in done.stdout:
                    return found[0].parent, done.stdout.decode().split()[0]
            await anyio.sleep(POLL_SECONDS)


def hosted_with(monkeypatch: pytest.MonkeyPatch, key: bytes | None) -> None:
    """This process (the run's host, a TemporalEngine) holds the payload key `key` (None: none)."""
    for name in (PAYLOAD_KEY_VARIABLE, PAYLOAD_OLD_KEYS_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(codec, "_held", PayloadKeys(key))


def hosting(temporal_address: str, tmp_path: Path, runs: Path, results: list[agentswf.RunResult]) -> Callable[[], Awaitable[None]]:
    """The deployer's run on Temporal, its record under `runs`, its result put in `results`."""
    script = tmp_path / "deployer.sh"
    script.write_text(AGENT)
    script.chmod(0o700)
    engine = TemporalEngine(address=temporal_address, task_queue=f"test-{uuid4().hex[:8]}", worker_root=tmp_path / "w")

    async def run() -> None:
        results.append(await agentswf.run(approving(script), run_root=runs, engine=engine))

    return run


@pytest.mark.parametrize("shell_has_key", [True, False], ids=["another-key", "no-key"])
async def test_a_command_with_another_payload_key_or_none_is_refused_at_once_and_the_run_goes_on(
    temporal_address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shell_has_key: bool
) -> None:
    """On main: `awf approve` with another key hung ~22 s, then a traceback; with none it approved the
    call, then said it couldn't read the answer."""
    key, other = os.urandom(32), (os.urandom(32) if shell_has_key else None)
    hosted_with(monkeypatch, key)
    runs = tmp_path / "runs"
    results: list[agentswf.RunResult] = []
    run = hosting(temporal_address, tmp_path, runs, results)

    theirs = f"encrypts with payload key '{payload_key_id(other)}'" if other else f"has no payload key ({PAYLOAD_KEY_VARIABLE})"
    said = (f"awf: refused, nothing was sent: this run's host encrypts with payload key '{payload_key_id(key)}', and "
            f"this command {theirs}: give the command the host's {PAYLOAD_KEY_VARIABLE}\n")
    async with anyio.create_task_group() as group:
        group.start_soon(run)
        run_dir, call = await waiting_call(runs, key)
        for words in (
            ["approve", str(run_dir), call],
            ["stop", str(run_dir), "--reason", "from the wrong shell"],
            ["send", str(run_dir), "deployer", "hello", "--as", "lead"],
            ["tail", str(run_dir), "--no-follow"],  # a query, but one that sends its offsets
        ):
            code, err, seconds = await awf(other, *words)
            assert (code, err) == (2, said), (words, code, err)
            assert seconds < REFUSED_SECONDS, (words, seconds)
        code, err, _ = await awf(key, "approve", str(run_dir), call)  # the person's own shell
        assert code == 0, err
    [result] = results
    assert (result.outcome, result.value) == ("completed", "deployed to staging"), result.reason
    [line] = [json.loads(line) for line in (result.run_dir / "tools.jsonl").read_text().splitlines()]
    assert (line["outcome"], line["approval"]["approved"]) == ("result", True)  # decided once, by the right shell


@pytest.mark.parametrize("host_has_key", [True, False], ids=["another-key", "no-key"])
async def test_a_host_rejects_an_update_it_cant_read_at_once_and_the_run_goes_on(
    temporal_address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host_has_key: bool
) -> None:
    """An update straight to the frontend, encrypted with a key the host doesn't hold (here one newer
    than the host's, the host's among the sender's old keys, so it reads the host's rejection)."""
    key, newer = (os.urandom(32) if host_has_key else None), os.urandom(32)
    hosted_with(monkeypatch, key)
    sender = PayloadKeys(newer, [key] if key is not None else [])
    runs = tmp_path / "runs"
    results: list[agentswf.RunResult] = []
    run = hosting(temporal_address, tmp_path, runs, results)

    async def update(run_dir: Path, call: str) -> BaseException:
        workflow_id = json.loads((run_dir / TEMPORAL_FILE).read_text())["workflow_id"]
        client = await connect(temporal_address, keys=sender)
        run_id = (await client.get_workflow_handle(workflow_id).describe()).run_id
        sealed = seal(load_key(create=False), DecideRequest(call, True, "", "operator"), kind="update",
                      workflow=workflow_id, run=run_id, name=DECIDE_UPDATE, by="person:operator")
        try:
            await client.get_workflow_handle(workflow_id, run_id=run_id).execute_update(DECIDE_UPDATE, sealed)
        except Exception as error:  # what the sender is answered, whatever it is
            return error
        raise AssertionError("the host took an update it can't read")

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        run_dir, call = await waiting_call(runs, key)
        began = time.monotonic()
        answered = await on_asyncio(lambda: update(run_dir, call))
        assert time.monotonic() - began < REFUSED_SECONDS
        assert isinstance(answered, WorkflowUpdateFailedError), repr(answered)
        held = f"it holds {payload_key_id(key)}" if key is not None else f"it has no payload key ({PAYLOAD_KEY_VARIABLE})"
        assert unreadable_in(answered.cause) == (
            f"this run's host can't read it: it is encrypted with payload key '{payload_key_id(newer)}', which the host "
            f"doesn't hold ({held}): give the host and whoever sends to the run the same {PAYLOAD_KEY_VARIABLE}"
        )
        code, err, _ = await awf(key, "approve", str(run_dir), call)  # not decided by the update it rejected
        assert code == 0, err
    [result] = results
    assert (result.outcome, result.value) == ("completed", "deployed to staging"), result.reason
