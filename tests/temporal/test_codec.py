"""Payloads encrypted in Temporal's history (agentswf/temporal/codec.py): a run with the payload key
leaves none of its words in the history, where a reader without the key would read them; a
person with the key reads them (`awf codec-server`, `temporal workflow show --codec-endpoint`);
a wrong, missing or malformed key is said in a line; the key reaches no agent, record or log."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from .processes import stop_groups

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")
pytest.importorskip("cryptography", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import History
from temporalio.client import Client
from temporalio.exceptions import ApplicationError

from agentswf.errors import PayloadKeyError
from agentswf.harnesses.environment import PAYLOAD_KEY_VARIABLE, PAYLOAD_OLD_KEYS_VARIABLE, scrubbed
from agentswf.temporal import on_asyncio
from agentswf.temporal.codec import ENCRYPTED, PayloadKeys, data_converter, parse_key, payload_key_id
from agentswf.temporal.devserver import server_binary
from agentswf.temporal.engine import connect
from agentswf.temporal.keys import KEY_FILE_VARIABLE, KEY_VARIABLE

AWF = [sys.executable, "-m", "agentswf"]
READY_SECONDS = 30.0
RUN_SECONDS = 120.0


def new_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def keys(*given: str) -> PayloadKeys:
    """The first key current, the others old."""
    return PayloadKeys(base64.b64decode(given[0]), [base64.b64decode(key) for key in given[1:]])


def payload(text: str) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(text).encode())


@given(st.text(min_size=1))
def test_a_payload_is_encrypted_and_decrypts_to_itself(text: str) -> None:
    held = keys(new_key())
    encrypted = held.encrypt(payload(text))
    assert encrypted.metadata["encoding"] == ENCRYPTED
    assert encrypted.metadata["encryption-key-id"] == (held.current_id or "").encode()
    assert json.dumps(text).encode() not in encrypted.data
    assert held.decrypt(encrypted) == payload(text)
    assert held.encrypt(payload(text)).data != encrypted.data  # a fresh nonce each time


def test_without_a_key_nothing_is_encrypted_and_plaintext_passes() -> None:
    assert PayloadKeys().encrypt(payload("plain")) == payload("plain")
    assert keys(new_key()).decrypt(payload("plain")) == payload("plain")  # a run from before the key


def test_an_old_key_still_decrypts_and_an_unknown_one_is_named() -> None:
    old, new = new_key(), new_key()
    sealed = keys(old).encrypt(payload("from before the rotation"))
    assert keys(new, old).decrypt(sealed) == payload("from before the rotation")
    old_id = payload_key_id(base64.b64decode(old))
    with pytest.raises(PayloadKeyError, match=f"encrypted with payload key '{old_id}', which this process doesn't hold "
                                              f"\\(it holds {keys(new).current_id}\\)"):
        keys(new).decrypt(sealed)
    with pytest.raises(PayloadKeyError, match=f"it has no payload key \\({PAYLOAD_KEY_VARIABLE}\\)"):
        PayloadKeys().decrypt(sealed)


def test_an_altered_payload_does_not_decrypt() -> None:
    held = keys(new_key())
    sealed = held.encrypt(payload("mine"))
    altered = Payload(metadata=sealed.metadata, data=sealed.data[:-1] + bytes([sealed.data[-1] ^ 1]))
    with pytest.raises(PayloadKeyError, match="doesn't decrypt with it: it was altered"):
        held.decrypt(altered)


@pytest.mark.parametrize(("value", "said"), [
    ("not base64!", "is not base64"),
    (base64.b64encode(b"short").decode(), "holds 5 bytes, not 32"),
    (base64.b64encode(bytes(range(48))).decode(), "holds 48 bytes, not 32"),
])
def test_a_malformed_key_is_named_by_its_variable_never_shown(value: str, said: str) -> None:
    with pytest.raises(PayloadKeyError, match=said) as raised:
        PayloadKeys.from_env({PAYLOAD_KEY_VARIABLE: value})
    assert str(raised.value).startswith(PAYLOAD_KEY_VARIABLE) and value not in str(raised.value)
    with pytest.raises(PayloadKeyError, match=f"{PAYLOAD_OLD_KEYS_VARIABLE} \\(its key 2\\)"):
        PayloadKeys.from_env({PAYLOAD_KEY_VARIABLE: new_key(), PAYLOAD_OLD_KEYS_VARIABLE: f"{new_key()},{value}"})
    with pytest.raises(PayloadKeyError, match=f"{PAYLOAD_OLD_KEYS_VARIABLE} is given without {PAYLOAD_KEY_VARIABLE}"):
        PayloadKeys.from_env({PAYLOAD_OLD_KEYS_VARIABLE: new_key()})


def test_a_key_is_read_in_base64_of_either_alphabet() -> None:
    raw = bytes(range(200, 232))  # bytes whose base64 holds + and /
    assert parse_key(base64.b64encode(raw).decode(), "X") == raw
    assert parse_key(base64.urlsafe_b64encode(raw).decode().rstrip("="), "X") == raw
    assert repr(keys(base64.b64encode(raw).decode())) == f"<PayloadKeys current={payload_key_id(raw)} held=['{payload_key_id(raw)}']>"


async def test_a_failures_message_is_encrypted_too() -> None:
    converter, failure = data_converter(keys(new_key())), Failure()
    await converter.encode_failure(ApplicationError("the secret plan failed"), failure)
    assert b"secret plan" not in failure.SerializeToString()
    assert "the secret plan failed" in str(await converter.decode_failure(failure))


def test_a_process_that_holds_the_key_drops_it_from_its_environment_and_is_not_dumpable() -> None:
    code = (
        "import ctypes, os\n"
        "from agentswf.temporal.codec import held_keys\n"
        "held = held_keys()\n"
        "print(held.current_id, os.environ.get('AGENTSWF_PAYLOAD_KEY'), os.environ.get('AGENTSWF_PAYLOAD_OLD_KEYS'),\n"
        "      ctypes.CDLL(None).prctl(3, 0, 0, 0, 0), held_keys() is held)\n"
    )
    key, old = new_key(), new_key()
    env = {**os.environ, PAYLOAD_KEY_VARIABLE: key, PAYLOAD_OLD_KEYS_VARIABLE: old}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    # its variables are gone from its environment, and prctl(PR_GET_DUMPABLE) says 0
    assert done.stdout.split() == [keys(key).current_id, "None", "None", "0", "True"]
    assert PAYLOAD_KEY_VARIABLE not in scrubbed(env) and PAYLOAD_OLD_KEYS_VARIABLE not in scrubbed(env)


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    """The environment of an `awf` command: a run key of its own, and `more`."""
    env = {name: value for name, value in os.environ.items()
           if name not in (KEY_VARIABLE, KEY_FILE_VARIABLE, PAYLOAD_KEY_VARIABLE, PAYLOAD_OLD_KEYS_VARIABLE)}
    return {**env, "XDG_CONFIG_HOME": str(tmp_path / "config"), **more}


def test_awf_worker_without_a_payload_key_says_so_loudly_first(tmp_path: Path) -> None:
    words = [*AWF, "worker", "--address", "127.0.0.1:1", "--task-queue", "q"]  # no server: it exits
    said = subprocess.run(words, env=_env(tmp_path), capture_output=True, text=True, timeout=60, check=False)
    assert said.stderr.startswith("awf: WARNING: no payload key (AGENTSWF_PAYLOAD_KEY): prompts, answers, tool inputs "
                                  "and messages go into Temporal's history in plaintext"), said.stderr
    keyed = subprocess.run(words, env=_env(tmp_path, AGENTSWF_PAYLOAD_KEY=new_key()), capture_output=True, text=True,
                           timeout=60, check=False)
    assert "WARNING" not in keyed.stderr, keyed.stderr


@pytest.mark.parametrize("command", [
    ["worker", "--address", "127.0.0.1:1", "--task-queue", "q"],
    ["run", "flow.py", "--engine", "temporal", "--address", "127.0.0.1:1", "--task-queue", "q"],
    ["codec-server", "--port", "0"],
])
def test_a_malformed_payload_key_is_said_in_a_line(command: list[str], tmp_path: Path) -> None:
    (tmp_path / "flow.py").write_text(
        "from agentswf import workflow\n\n@workflow(name='f', description='Nothing.')\nasync def f(wf):\n    return 1\n"
    )
    secret = base64.b64encode(os.urandom(31)).decode()
    said = subprocess.run([*AWF, *command], env=_env(tmp_path, AGENTSWF_PAYLOAD_KEY=secret), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, check=False)
    assert said.returncode == 2, said.stderr
    assert said.stderr.strip().splitlines()[-1] == (
        "awf: AGENTSWF_PAYLOAD_KEY holds 31 bytes, not 32: give 32 random bytes in base64 "
        "(make one with `openssl rand -base64 32`)"
    )
    assert "Traceback" not in said.stderr and secret not in said.stderr + said.stdout


FLOW = '''
from pathlib import Path

from agentswf import tool, workflow

AGENT = Path(__file__).with_name("keeper.sh")


@workflow(name="secrets", description="An agent looks a thing up, tells a person, and answers.")
async def secrets(wf, topic: str):
    seen = []

    def lookup(query: str) -> str:
        """Look a thing up."""
        seen.append(query)
        return "TOOLRESULT-ibex-" + query

    person = await wf.participants.open("person")
    keeper = await wf.agents.open("keeper", runtime=f"shell:{AGENT}", tools={"lookup": tool(lookup)})
    await wf.route(keeper, person, purpose="Report")
    turn = await keeper.run("PROMPT-zebra-quartz: look up " + topic, timeout="1m")
    mail = await person.receive()
    return {"answer": turn.value, "seen": seen, "mail": mail.text}
'''
AGENT = """#!/bin/sh
cat >/dev/null
found=$("$WFA" tool lookup --query TOOLINPUT-walrus-opal </dev/null)
echo "MESSAGE-heron-basalt" | "$WFA" send person >/dev/null
echo "ANSWER-lynx-garnet $found keys:$(env | grep -c AGENTSWF_PAYLOAD)" | "$WFA" result "$WFA_CALL_ID"
"""
WORDS = ("ARG-okapi-jade", "PROMPT-zebra-quartz", "TOOLINPUT-walrus-opal", "TOOLRESULT-ibex", "MESSAGE-heron-basalt",
         "ANSWER-lynx-garnet")
"""The run's input, a prompt, a tool's input and result, a message and an answer."""


class Processes:
    """`awf` processes of a test (a worker, a codec server), each in its group; stopped at its end."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[str]] = []
        self.said = ""  # what they wrote on stderr past their ready line, once stopped

    def start(self, words: list[str], env: dict[str, str], ready: str) -> tuple[subprocess.Popen[str], list[str]]:
        """The process, once a line of its stderr starts with `ready`; and the lines before and with it."""
        process = subprocess.Popen(words, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                                   start_new_session=True)
        self.started.append(process)
        assert process.stderr is not None
        lines: list[str] = []
        while not lines or not lines[-1].startswith(ready):
            line = process.stderr.readline()
            assert line, f"{words[3]} ended before it was ready: {lines}"
            lines.append(line)
        return process, lines

    def stop(self) -> None:
        self.said += stop_groups(self.started)
        self.started.clear()


@pytest.fixture
def processes() -> Iterator[Processes]:
    started = Processes()
    try:
        yield started
    finally:
        started.stop()


def show(workflow_id: str, address: str, *codec: str) -> bytes:
    """`temporal workflow show -o json`'s history (through a codec server with `codec`), as the bytes of
    its events: payloads' data as they are, not in base64."""
    shown = subprocess.run(
        [str(server_binary()), "workflow", "show", "-w", workflow_id, "--address", address, "-o", "json", *codec],
        capture_output=True, text=True, timeout=60, check=True,
    )
    return json_format.Parse(shown.stdout, History(), ignore_unknown_fields=True).SerializeToString()


def test_a_history_read_without_the_payload_key_holds_none_of_the_runs_words(
    temporal_address: str, tmp_path: Path, processes: Processes
) -> None:
    key, queue = new_key(), f"test-{uuid4().hex[:8]}"
    (tmp_path / "secrets_flow.py").write_text(FLOW)
    (tmp_path / "keeper.sh").write_text(AGENT)
    (tmp_path / "keeper.sh").chmod(0o700)
    env = _env(tmp_path, AGENTSWF_PAYLOAD_KEY=key)
    _, said = processes.start([*AWF, "worker", "--address", temporal_address, "--task-queue", queue, "--run-root",
                               str(tmp_path / "worker")], env, "awf: worker on")
    assert not any("WARNING" in line for line in said), said
    run = subprocess.run(
        [*AWF, "run", "secrets_flow.py", "--engine", "temporal", "--address", temporal_address, "--task-queue", queue,
         "--no-turns-here", "--run-root", str(tmp_path / "runs"), "--plain", "--", "ARG-okapi-jade"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=RUN_SECONDS, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {  # the person who ran it reads it all; the agent had no key
        "answer": "ANSWER-lynx-garnet TOOLRESULT-ibex-TOOLINPUT-walrus-opal keys:0",
        "mail": "MESSAGE-heron-basalt", "seen": ["TOOLINPUT-walrus-opal"],
    }
    [record] = (tmp_path / "runs" / "secrets").iterdir()
    workflow_id = json.loads((record / "temporal.json").read_text())["workflow_id"]

    async def history(client: Client) -> bytes:
        fetched = await client.get_workflow_handle(workflow_id).fetch_history()
        return b"".join(event.SerializeToString() for event in fetched.events)

    async def without_the_key() -> bytes:
        return await history(await Client.connect(temporal_address))  # Temporal's own client: no codec

    raw = anyio.run(on_asyncio, without_the_key)
    assert [word for word in WORDS if word.encode() in raw] == []
    assert [word for word in WORDS if word.encode() in show(workflow_id, temporal_address)] == []

    _, said = processes.start([*AWF, "codec-server", "--port", "0"], env, "awf: codec server on")
    endpoint = said[-1].split()[4]
    assert [word for word in WORDS if word.encode() not in show(workflow_id, temporal_address, "--codec-endpoint",
                                                                 endpoint)] == []

    async def result_with(given: PayloadKeys) -> Any:
        return await (await connect(temporal_address, keys=given)).get_workflow_handle(workflow_id).result()

    assert anyio.run(on_asyncio, lambda: result_with(keys(key)))["value"]["mail"] == "MESSAGE-heron-basalt"
    with pytest.raises(PayloadKeyError, match="which this process doesn't hold"):
        anyio.run(on_asyncio, lambda: result_with(keys(new_key())))

    # A person's command with another key, or none, says which key it lacks (here `awf logs` of a run
    # whose host ended before writing its ending, which it reads from Temporal).
    (record / "output.json").unlink()
    for other in (_env(tmp_path, AGENTSWF_PAYLOAD_KEY=new_key()), _env(tmp_path)):
        said_logs = subprocess.run([*AWF, "logs", record.name, "--run-root", str(tmp_path / "runs")], env=other,
                                   capture_output=True, text=True, timeout=60, check=False)
        assert said_logs.returncode == 2 and "Traceback" not in said_logs.stderr, said_logs.stderr
        assert f"encrypted with payload key '{keys(key).current_id}', which this process doesn't hold" in said_logs.stderr

    # The key is in no record, no worker's files, no history and no process's output.
    written = b"".join(path.read_bytes() for path in tmp_path.rglob("*") if path.is_file() and "config" not in path.parts)
    for form in (key.encode(), base64.b64decode(key)):
        assert form not in written + raw + run.stdout.encode() + run.stderr.encode()
    processes.stop()
    assert key not in processes.said
