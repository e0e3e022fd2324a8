"""Deep, wide and malformed JSON through every `wfa` command, to a live run over its real socket.

One run per backend lives in a thread while hypothesis sends its examples: an agent in a
turn, with a tool taking a Struct, one taking a list and one taking nothing. Every
example must get a well-formed answer, the run must go on answering, and at the end the
turn is answered and the run completes.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Literal

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentswf import tool, workflow
from agentswf.launcher.place import SOCKET_NAME
from agentswf.testing import answer, run_workflow
from agentswf.wire import COMMANDS, MAX_NESTING_DEPTH, WIRE_VERSION, Response, decode_request, decode_response


class Done(msgspec.Struct, forbid_unknown_fields=True):
    token: Literal["the fuzz is over"]


class Point(msgspec.Struct, forbid_unknown_fields=True):
    x: int
    y: Any = None


HANDLED: list[str] = []  # every tool call a handler ran, by tool


def _point(point: Point) -> str:
    HANDLED.append("point")
    return "pointed"


def _items(items: list[Any]) -> int:
    HANDLED.append("items")
    return len(items)


def _nothing() -> str:
    HANDLED.append("nothing")
    return "nothing"


class LiveRun:
    """A run in a thread of its own: its agent's socket and call id, and how it ended."""

    def __init__(self, backend: str, root: Path) -> None:
        self.backend = backend
        self.root = root
        self.ready = threading.Event()
        self.over = threading.Event()
        self.socket = ""
        self.call_id = ""
        self.run: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        try:
            anyio.run(self._run, backend=self.backend)
        except BaseException as error:  # the test reports it
            self.error = error
            self.ready.set()

    async def _run(self) -> None:
        async def script(turn):
            self.socket, self.call_id = str(turn.launcher.with_name(SOCKET_NAME)), turn.call_id
            self.ready.set()
            await anyio.to_thread.run_sync(self.over.wait)
            return {"token": "the fuzz is over"}

        @workflow(name="fuzz", description="One agent in one turn while the socket is fuzzed.")
        async def fuzzed(wf):
            tools = {
                "point": tool(_point, description="Takes a point."),
                "items": tool(_items, description="Counts items."),
                "nothing": tool(_nothing, description="Takes nothing."),
            }
            agent = await wf.agents.open("a", runtime="shell:true", tools=tools)
            turn = await agent.run("Wait for the fuzz to end.", schema=Done, timeout=600)
            return turn.outcome.kind

        self.run = await run_workflow(fuzzed, agents={"a": answer(script)}, run_root=self.root)

    def send(self, data: bytes) -> bytes:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
            connection.settimeout(30)
            connection.connect(self.socket)
            try:
                connection.sendall(data)
                connection.shutdown(socket.SHUT_WR)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the run stopped reading: its answer is still there
            answer = b""
            while chunk := connection.recv(65536):
                answer += chunk
        return answer


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def live(request, tmp_path_factory):
    live = LiveRun(request.param, tmp_path_factory.mktemp(f"fuzz-{request.param}"))
    live.thread.start()
    assert live.ready.wait(30) and live.error is None, live.error
    yield live
    live.over.set()
    live.thread.join(60)
    assert live.error is None, repr(live.error)
    assert live.run.outcome == "completed", live.run.reason
    assert live.run.value == "answered"


def _nested(depth: int, opener: str, closer: str, closed: bool) -> str:
    return opener * depth + (closer * depth if closed else "")


deep = st.builds(
    _nested,
    st.integers(min_value=MAX_NESTING_DEPTH - 2, max_value=5000),
    st.sampled_from(["[", '{"a":', '[{"a":']),
    st.sampled_from(["]", "}", "}]"]),
    st.booleans(),
)
wide = st.builds(lambda n, item: "[" + ",".join([item] * n) + "]", st.integers(0, 20_000), st.sampled_from(["0", "[]", '{"x":1}', '"s"']))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=5), inner, max_size=5),
    max_leaves=30,
).map(json.dumps)
malformed = st.text(alphabet='[]{}",:\\0aé \n', max_size=300)
payloads = st.one_of(deep, wide, json_values, malformed)

INPUT_SHAPES = {  # how a payload becomes a tool's input, by tool
    "point": lambda payload: '{"x": 1, "y": ' + payload + "}",
    "items": lambda payload: '{"items": ' + payload + "}",
    "nothing": lambda payload: payload,
}
FIELDS = ("version", "call_id", "name", "args", "input", "reason", "timeout_ms", "json", "peer", "message", "await_reply")


@st.composite
def hostile_lines(draw) -> bytes:
    """One request line: a payload as a command's JSON input, as any field's raw value, or as the line."""
    payload = draw(payloads)
    command = draw(st.sampled_from(COMMANDS))
    how = draw(st.sampled_from(["input", "field", "line"]))
    if how == "line":
        return payload.encode() + b"\n"
    fields: dict[str, Any] = {"version": WIRE_VERSION, "command": command}
    name = draw(st.sampled_from(tuple(INPUT_SHAPES)))
    fields.update(
        {
            "result": {"call_id": "<call>", "args": [], "input": payload},
            "tool": {"name": name, "args": [], "input": INPUT_SHAPES[name](payload)},
            "waiting": {"call_id": "<call>", "reason": "fuzzing"},
            "peers": {"json": True},
            "send": {"peer": "nobody", "message": payload},
            "reply": {"peer": "nobody", "message": payload},
        }[command]
    )
    text = json.dumps(fields)
    if how == "field":  # the payload raw, in place of one field's value
        field = draw(st.sampled_from(FIELDS))
        text = json.dumps({key: value for key, value in fields.items() if key != field})[:-1]
        text += f', "{field}": {payload}}}'
    return text.encode() + b"\n"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=hostile_lines())
def test_every_command_answers_hostile_json_and_the_run_goes_on(live, data):
    line = data.replace(b"<call>", live.call_id.encode())
    answer = live.send(line)
    assert answer.endswith(b"\n"), answer[:200]
    response = decode_response(answer)
    assert response.code != "internal-error", response.stderr
    assert response.exit in (0, 1, 3)


@pytest.mark.parametrize("command", ["result", "tool point", "tool items", "tool nothing"])
def test_deep_json_through_each_command_is_refused_naming_the_limit(live, command):
    payload = _nested(1000, "[", "]", True)
    if command == "result":
        fields = {"call_id": live.call_id, "args": [], "input": payload}
    else:
        name = command.split()[1]
        fields = {"name": name, "args": [], "input": INPUT_SHAPES[name](payload)}
    line = json.dumps({"version": WIRE_VERSION, "command": command.split()[0], **fields}).encode() + b"\n"
    response = decode_response(live.send(line))
    expected = "invalid-result" if command == "result" else "invalid-input"
    assert response.code == expected and "MAX_NESTING_DEPTH" in response.stderr
    peers = decode_response(live.send(json.dumps({"version": WIRE_VERSION, "command": "peers"}).encode() + b"\n"))
    assert peers.ok  # and the run still answers


@pytest.mark.anyio
async def test_a_request_whose_handling_raises_is_internal_error_and_the_agent_goes_on(tmp_path, monkeypatch):
    from agentswf.engine import rules

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug in the rules")

    monkeypatch.setattr(rules, "judge_waiting", broken)
    seen = []

    async def script(turn):
        seen.append(await turn.waiting("a while"))
        seen.append(await turn.request("peers", json=True))
        return "done"

    @workflow(name="raises", description="A request whose handling raises.")
    async def raises(wf):
        agent = await wf.agents.open("a", runtime="shell:true")
        return (await agent.run("Go.")).outcome.kind

    run = await run_workflow(raises, agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == "answered"
    failed, peers = seen
    assert failed.code == "internal-error" and "RuntimeError" not in failed.stdout
    assert peers.ok


def _ask_operator(control: str, data: bytes) -> dict[str, Any]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(30)
        connection.connect(control)
        connection.sendall(data)
        connection.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    return json.loads(answer)


@pytest.mark.anyio
async def test_deep_json_to_the_operator_socket_is_refused_and_it_goes_on_answering(tmp_path):
    from agentswf.engine.record.layout import read_json

    @workflow(name="operator", description="Deep JSON at the operator socket.")
    async def operator(wf):
        control = read_json(wf.run_dir / "run.json")["control"]
        deep = b'{"command": "approve", "call_id": "x", "by": ' + b"[" * 1000 + b"]" * 1000 + b"}\n"
        refused = await anyio.to_thread.run_sync(_ask_operator, control, deep)
        pending = await anyio.to_thread.run_sync(_ask_operator, control, b'{"command": "pending"}\n')
        return refused, pending

    run = await run_workflow(operator, agents={}, run_root=tmp_path)
    refused, pending = run.value
    assert refused["ok"] is False and "MAX_NESTING_DEPTH" in refused["message"]
    assert pending["ok"] is True


IMPOSTOR = """
import socket, sys
for hex_line in sys.stdin:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(30)
        connection.connect(sys.argv[1])
        try:
            connection.sendall(bytes.fromhex(hex_line.strip()))
            connection.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    sys.stdout.write(answer.hex() + "\\n")
    sys.stdout.flush()
"""


@pytest.fixture(scope="module")
def impostor(live):
    """Another process of the same user, not of agent a's attempt, speaking on a's socket."""
    process = subprocess.Popen(
        [sys.executable, "-c", IMPOSTOR, live.socket], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    def send(line: bytes) -> bytes:
        stdin.write(line.hex() + "\n")
        stdin.flush()
        return bytes.fromhex(stdout.readline().strip())

    yield send
    stdin.close()
    process.wait(10)


VALID_LINES = st.sampled_from(
    [
        {"command": "result", "call_id": "<call>", "args": ["--token", "the fuzz is over"]},
        {"command": "result", "call_id": "<call>", "input": '{"token": "the fuzz is over"}'},
        {"command": "tool", "name": "point", "input": '{"x": 1}'},
        {"command": "tool", "name": "nothing"},
        {"command": "peers", "json": True},
        {"command": "waiting", "call_id": "<call>", "reason": "posing"},
        {"command": "send", "peer": "a", "message": "hello"},
    ]
).map(lambda fields: json.dumps({"version": WIRE_VERSION, **fields}).encode() + b"\n")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.one_of(VALID_LINES, hostile_lines()))
def test_an_impostor_on_an_agents_socket_is_refused_whatever_it_sends(live, impostor, data):
    """Identity comes before everything the request asks: a process outside a's attempt gets
    `wrong-agent` for every request that decodes (an undecodable line is refused as such), and
    no handler runs for it."""
    handled = len(HANDLED)
    line = data.replace(b"<call>", live.call_id.encode())
    response = decode_response(impostor(line))
    assert not response.ok, response.stdout
    if not isinstance(decode_request(line), Response):  # it decodes: who sent it is what is refused
        assert response.code == "wrong-agent", response.stderr
    assert len(HANDLED) == handled
