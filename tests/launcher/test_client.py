"""The `wfa` client: its command lines, its wire bytes against the server's decoder, and how it
fails when the run can't be reached or its answer is lost.

Most tests run the real client as the launcher does (``python -S -I client.py --at <socket>``)
against a stub server that records the raw request and answers a canned response line.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from agentswf.launcher import client
from agentswf.wire import (
    PeersRequest,
    ReplyRequest,
    ResultRequest,
    SendRequest,
    ToolRequest,
    WaitingRequest,
    accepted,
    decode_request,
    encode_response,
    refused,
)

CLIENT = str(Path(client.__file__).resolve())
MiB = 1024 * 1024


@pytest.fixture
def sockdir():
    # Short, because a unix socket's path is limited to about 100 bytes.
    directory = tempfile.mkdtemp(prefix="wfa", dir="/tmp")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def wfa_command(sock: str, *args: str) -> list[str]:
    return [sys.executable, "-S", "-I", CLIENT, "--at", sock, *args]


def run_sync(sock: str, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return subprocess.run(wfa_command(sock, *args), input=stdin, capture_output=True, timeout=20)


async def run(sock: str, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess:
    return await anyio.run_process(wfa_command(sock, *args), input=stdin, check=False)


class Stub:
    """Records each connection's raw request; answers `answer` (None: close without one,
    "hang": never answer)."""

    def __init__(self, path: str, answer):
        self.path = path
        self.answer = answer
        self.requests: list[bytes] = []

    async def handle(self, stream) -> None:
        async with stream:
            data = b""
            try:
                while True:
                    data += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                pass
            self.requests.append(data)
            if self.answer == "hang":
                await anyio.sleep_forever()
            if self.answer is not None:
                await stream.send(self.answer)


OK = encode_response(accepted("result", stdout="accepted\n"))


@asynccontextmanager
async def serving(sockdir: str, answer=OK):
    path = os.path.join(sockdir, "s.sock")
    listener = await anyio.create_unix_listener(path)
    stub = Stub(path, answer)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, stub.handle)
        yield stub
        tg.cancel_scope.cancel()


async def request_of(sockdir: str, *args: str, stdin: bytes = b""):
    """Run `wfa args` against the stub; the request it sent, decoded by the server's decoder."""
    async with serving(sockdir) as stub:
        done = await run(stub.path, *args, stdin=stdin)
    assert done.returncode == 0, done.stderr
    assert done.stdout == b"accepted\n"
    assert len(stub.requests) == 1
    return decode_request(stub.requests[0])


# Usage errors: exit 2, the usage on standard error, nothing sent -------------------------------

USAGE_ERRORS = {
    "no command": ([], b""),
    "unknown command": (["answer", "c1"], b""),
    "result without call id": (["result"], b""),
    "result with a flag for call id": (["result", "--verdict", "approve"], b""),
    "tool without name": (["tool"], b""),
    "result stdin over 1 MiB": (["result", "c1"], b"x" * (MiB + 1)),
    "tool stdin over 1 MiB": (["tool", "label"], b"x" * (MiB + 1)),
    "send stdin over 1 MiB": (["send", "architect"], b"x" * (MiB + 1)),
    "waiting without call id": (["waiting", "--reason", "build"], b""),
    "waiting without reason": (["waiting", "c1"], b""),
    "waiting reason without value": (["waiting", "c1", "--reason"], b""),
    "waiting blank reason": (["waiting", "c1", "--reason", "  \t"], b""),
    "waiting empty reason": (["waiting", "c1", "--reason="], b""),
    "waiting reason over 2048 bytes": (["waiting", "c1", "--reason", "é" * 1025], b""),
    "waiting bad duration": (["waiting", "c1", "--reason", "build", "--timeout", "10"], b""),
    "waiting zero duration": (["waiting", "c1", "--reason", "build", "--timeout=0s"], b""),
    "waiting negative duration": (["waiting", "c1", "--reason", "b", "--timeout", "-1m"], b""),
    "waiting unknown flag": (["waiting", "c1", "--reason", "build", "--json"], b""),
    "waiting reason twice": (["waiting", "c1", "--reason", "a", "--reason", "b"], b""),
    "waiting two call ids": (["waiting", "c1", "c2", "--reason", "build"], b""),
    "peers unknown flag": (["peers", "--all"], b""),
    "peers argument": (["peers", "architect"], b""),
    "send without peer": (["send"], b"hello\n"),
    "send only flags": (["send", "--await-reply"], b"hello\n"),
    "reply without peer": (["reply"], b"hello\n"),
    "send unknown flag": (["send", "--urgent", "architect", "hi"], b""),
    "send message starting with --": (["send", "architect", "--hi"], b""),
    "send flag after message": (["send", "architect", "hi", "--await-reply"], b""),
    "send two message words": (["send", "architect", "hello", "there"], b""),
    "send empty stdin": (["send", "architect"], b""),
    "send only a newline": (["send", "architect"], b"\n"),
    "send empty argument": (["send", "architect", ""], b""),
    "send timeout without await": (["send", "--timeout", "10m", "architect", "hi"], b""),
    "reply timeout without await": (["reply", "architect", "--timeout=1h", "hi"], b""),
    "send bad duration": (["send", "--await-reply", "--timeout", "soon", "architect", "hi"], b""),
    "reply timeout without value": (["reply", "--await-reply", "architect", "--timeout"], b""),
}


@pytest.mark.parametrize("args, stdin", USAGE_ERRORS.values(), ids=USAGE_ERRORS.keys())
def test_usage_errors_exit_2_and_send_nothing(sockdir, args, stdin):
    path = os.path.join(sockdir, "s.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(8)
    listener.setblocking(False)
    with listener:
        done = run_sync(path, *args, stdin=stdin)
        # A connect would sit in the backlog even unaccepted: there is none.
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert done.returncode == 2
    assert done.stdout == b""
    err = done.stderr.decode()
    assert err.startswith("wfa: ")
    launcher = os.path.join(sockdir, "wfa")
    assert f"\nusage: {launcher} result <call-id> --<name> '<value>' ...\n" in err
    assert f"       {launcher} peers [--json]\n" in err


def test_a_flag_after_the_message_is_refused_saying_where_flags_go(sockdir):
    """The seed's grammar: flags go before the message, before or right after the peer
    (docs/reference/wfa.md); one after it is refused, and the refusal says where it goes."""
    done = run_sync(os.path.join(sockdir, "s.sock"), "send", "architect", "hi", "--await-reply")
    assert done.returncode == 2
    assert done.stderr.decode().startswith(
        "wfa: flags go before the message, before or right after the peer: wfa send --await-reply architect ...\n"
    )


def test_without_the_launcher_exits_2(sockdir):
    done = subprocess.run(
        [sys.executable, "-S", "-I", CLIENT, "result", "c1"], capture_output=True, timeout=20
    )
    assert done.returncode == 2
    assert b"launcher" in done.stderr


def test_usage_text_is_the_reference_block():
    text = client.usage("/tmp/awf-1/a2/wfa")
    lines = text.splitlines()
    assert lines[0] == "usage: /tmp/awf-1/a2/wfa result <call-id> --<name> '<value>' ..."
    assert lines[8] == (
        "       /tmp/awf-1/a2/wfa waiting <call-id> --reason <text> [--timeout <duration>]"
    )
    assert len(lines) == 16
    assert client.usage().splitlines()[9] == "       wfa peers [--json]"


# The request bytes decode into the server's Structs ------------------------------------------


@pytest.mark.anyio
async def test_result_flags(sockdir):
    request = await request_of(
        sockdir, "result", "c1", "--verdict", "approve", "--notes=Tests pass.", stdin=b"ignored"
    )
    assert request == ResultRequest(
        version=1, call_id="c1", args=["--verdict", "approve", "--notes=Tests pass."], input=None
    )


@pytest.mark.anyio
async def test_result_heredoc(sockdir):
    body = '{"verdict": "approve", "notes": "Tests pass — ünïcode \\"q\\""}\n'
    request = await request_of(sockdir, "result", "c1", stdin=body.encode())
    assert request == ResultRequest(version=1, call_id="c1", args=[], input=body)


@pytest.mark.anyio
async def test_result_with_nothing(sockdir):
    request = await request_of(sockdir, "result", "c-9")
    assert request == ResultRequest(version=1, call_id="c-9", args=[], input="")


@pytest.mark.anyio
async def test_result_stdin_of_exactly_1_mib_is_sent(sockdir):
    # Escaping at worst doubles text without raw control characters (each of those is 6 bytes).
    request = await request_of(sockdir, "result", "c1", stdin=b'\t"' * (MiB // 2))
    assert isinstance(request, ResultRequest)
    assert request.input == '\t"' * (MiB // 2)


@pytest.mark.anyio
async def test_tool_flags_and_stdin(sockdir):
    request = await request_of(
        sockdir, "tool", "add_finding", "--file", "src/report.ts", "--line=41", stdin=b"ignored"
    )
    assert request == ToolRequest(
        version=1, name="add_finding", args=["--file", "src/report.ts", "--line=41"], input=None
    )
    request = await request_of(sockdir, "tool", "label_item", stdin=b'{"id": "b2"}\n')
    assert request == ToolRequest(version=1, name="label_item", args=[], input='{"id": "b2"}\n')
    request = await request_of(sockdir, "tool", "list_findings")
    assert request == ToolRequest(version=1, name="list_findings", args=[], input="")


@pytest.mark.anyio
async def test_waiting(sockdir):
    request = await request_of(
        sockdir, "waiting", "c1", "--reason", "Running the full test suite", "--timeout", "10m"
    )
    assert request == WaitingRequest(
        version=1, call_id="c1", reason="Running the full test suite", timeout_ms=600_000
    )
    request = await request_of(sockdir, "waiting", "--reason=build", "--timeout=1.5m", "c2")
    assert request == WaitingRequest(version=1, call_id="c2", reason="build", timeout_ms=90_000)
    request = await request_of(sockdir, "waiting", "c3", "--reason", "--not a flag")
    assert request == WaitingRequest(version=1, call_id="c3", reason="--not a flag")


@pytest.mark.anyio
async def test_peers(sockdir):
    assert await request_of(sockdir, "peers") == PeersRequest(version=1, json=False)
    assert await request_of(sockdir, "peers", "--json") == PeersRequest(version=1, json=True)


@pytest.mark.anyio
async def test_send_forms(sockdir):
    heredoc = "Retries are in;\nthe client's timeout is now per attempt.\n"
    request = await request_of(sockdir, "send", "architect", stdin=heredoc.encode())
    assert request == SendRequest(version=1, peer="architect", message=heredoc[:-1])
    # Only one final newline is dropped.
    request = await request_of(sockdir, "send", "architect", stdin=b"two\n\n")
    assert request == SendRequest(version=1, peer="architect", message="two\n")
    request = await request_of(
        sockdir, "send", "architect", "Retries are in.\n", stdin=b"ignored"
    )
    assert request == SendRequest(version=1, peer="architect", message="Retries are in.\n")
    request = await request_of(
        sockdir, "send", "--await-reply", "--timeout", "10m", "architect", stdin=b"Where?\n"
    )
    assert request == SendRequest(
        version=1, peer="architect", message="Where?", await_reply=True, timeout_ms=600_000
    )
    request = await request_of(
        sockdir, "send", "architect", "--await-reply", "--timeout=90s", "-1 is wrong"
    )
    assert request == SendRequest(
        version=1, peer="architect", message="-1 is wrong", await_reply=True, timeout_ms=90_000
    )


@pytest.mark.anyio
async def test_reply_forms(sockdir):
    request = await request_of(sockdir, "reply", "implementer", stdin=b"In the queue.\n")
    assert request == ReplyRequest(version=1, peer="implementer", message="In the queue.")
    request = await request_of(
        sockdir, "reply", "--await-reply", "implementer", "--timeout", "1h", "And you?"
    )
    assert request == ReplyRequest(
        version=1, peer="implementer", message="And you?", await_reply=True, timeout_ms=3_600_000
    )


# The answer is passed through ------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    "response, exit",
    [
        (accepted("tool", stdout='{"ok": true}', stderr="wfa: you owe reviewer a reply.\n"), 0),
        (refused("result", "invalid-result", "verdict must be one of: approve, reject."), 1),
        (refused("tool", "unknown-tool", "no tool add; your tools: list."), 3),
        (refused("tool", "timed-out", "the handler took over 30s."), 4),
    ],
)
async def test_stdout_stderr_and_exit_pass_through(sockdir, response, exit):
    async with serving(sockdir, encode_response(response)) as stub:
        done = await run(stub.path, "tool", "add", "--x", "1")
    assert done.returncode == exit
    assert done.stdout == response.stdout.encode()
    assert done.stderr == response.stderr.encode()


@pytest.mark.anyio
async def test_output_is_written_exactly(sockdir):
    answer = b'{"version":1,"exit":0,"code":null,"stdout":"a\\u00e9\\n\\tb","stderr":"","value":[1]}\n'
    async with serving(sockdir, answer) as stub:
        done = await run(stub.path, "peers")
    assert (done.returncode, done.stdout, done.stderr) == (0, "aé\n\tb".encode(), b"")


# Failures without an answer --------------------------------------------------------------------


@pytest.mark.parametrize("command, exit", [("result", 1), ("peers", 1), ("send", 1), ("tool", 3)])
def test_never_reached(sockdir, command, exit):
    args = {"result": ["c1", "--x", "1"], "peers": [], "send": ["a", "hi"], "tool": ["t"]}[command]
    done = run_sync(os.path.join(sockdir, "missing.sock"), command, *args)
    assert done.returncode == exit
    err = done.stderr.decode()
    assert "never reached" in err and "the run is over" in err and "Try again" not in err
    if command == "tool":
        assert "the handler didn't run" in err


def test_never_reached_when_refused(sockdir):
    path = os.path.join(sockdir, "s.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(path)  # bound but not listening: connection refused
        done = run_sync(path, "tool", "t", "--x", "1")
    assert done.returncode == 3
    assert b"never reached the workflow" in done.stderr
    assert b"the run is over" in done.stderr  # a socket nobody listens on: the run has ended



LOST = {
    "result": (["c1", "--x", "1"], 1, "the result may have been accepted: check before"),
    "tool": (["t", "--x", "1"], 4, "the call may have run: check before calling again"),
    "waiting": (["c1", "--reason", "build"], 1, "the wait may have been granted; nothing was"),
    "peers": ([], 1, "nothing was retried"),
    "send": (["architect", "hi"], 1, "the message may have been queued; do not send it again"),
    "reply": (["architect", "hi"], 1, "the reply may have been queued; do not send it again"),
}


@pytest.mark.anyio
@pytest.mark.parametrize("command", LOST)
async def test_lost_when_closed_without_answer(sockdir, command):
    args, exit, says = LOST[command]
    async with serving(sockdir, answer=None) as stub:
        done = await run(stub.path, command, *args)
    assert len(stub.requests) == 1
    assert done.returncode == exit
    assert done.stdout == b""
    err = done.stderr.decode()
    assert "was lost" in err and says in err


@pytest.mark.anyio
@pytest.mark.parametrize(
    "answer",
    [
        b"not json\n",
        b'{"version":1,"exit":0,"stdout":"","stderr":""}',  # no newline
        b'{"version":1,"exit":0,"stdout":"","stderr":""}\n{}\n',
        b'{"version":1,"exit":"0","stdout":"","stderr":""}\n',
        b'{"version":1,"exit":0,"stdout":null,"stderr":""}\n',
        b"[1]\n",
    ],
)
async def test_lost_when_malformed(sockdir, answer):
    async with serving(sockdir, answer=answer) as stub:
        done = await run(stub.path, "tool", "t")
    assert len(stub.requests) == 1
    assert done.returncode == 4
    assert b"may have run" in done.stderr


@pytest.mark.anyio
async def test_lost_when_oversize(sockdir, monkeypatch):
    monkeypatch.setattr(client.common, "MAX_RESPONSE_BYTES", 100)
    async with serving(sockdir, answer=b'{"stdout":"' + b"x" * 200 + b'"}\n') as stub:
        with pytest.raises(client.Lost, match="over 100 bytes"):
            await anyio.to_thread.run_sync(
                client.call, stub.path, {"command": "peers", "version": 1, "json": False}
            )


@pytest.mark.anyio
async def test_lost_when_no_answer_in_time(sockdir):
    async with serving(sockdir, answer="hang") as stub:
        with anyio.fail_after(10):
            with pytest.raises(client.Lost, match="no answer within 0.3 seconds"):
                await anyio.to_thread.run_sync(
                    client.call, stub.path, {"command": "peers", "version": 1, "json": False}, 0.3
                )
    assert len(stub.requests) == 1


@pytest.mark.anyio
async def test_tool_waits_past_a_slow_answer(sockdir):
    # `wfa tool` has no answer timeout (None): a slow answer still arrives.
    async def handle(stream):
        async with stream:
            await stream.receive()
            await anyio.sleep(0.5)
            await stream.send(encode_response(accepted("tool", stdout="done")))

    path = os.path.join(sockdir, "s.sock")
    fields = {"command": "tool", "version": 1, "name": "t", "args": [], "input": None}
    async with await anyio.create_unix_listener(path) as listener:
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, handle)
            response = await anyio.to_thread.run_sync(client.call, path, fields, None)
            tg.cancel_scope.cancel()
    assert response["stdout"] == "done"


# The pure parts, in process ----------------------------------------------------------------


def test_build_request_reads_stdin_only_when_needed():
    def no_stdin():
        raise AssertionError("standard input read")

    assert client.build_request(["result", "c1", "--x", "1"], no_stdin) == {
        "command": "result",
        "version": 1,
        "call_id": "c1",
        "args": ["--x", "1"],
        "input": None,
    }
    assert client.build_request(["send", "a", "hi"], no_stdin)["message"] == "hi"
    assert client.build_request(["waiting", "c1", "--reason", "x"], no_stdin)["timeout_ms"] is None
    assert client.build_request(["peers", "--json"], no_stdin) == {
        "command": "peers",
        "version": 1,
        "json": True,
    }
    assert client.build_request(["tool", "t"], lambda: "{}")["input"] == "{}"


def test_build_request_returns_usage_errors():
    error = client.build_request(["send", "a"], lambda: "")
    assert isinstance(error, client.UsageError)
    assert "no message" in str(error)

    def too_much():
        raise client.UsageError("standard input is over 1048576 bytes")

    assert isinstance(client.build_request(["result", "c1"], too_much), client.UsageError)


def test_tiny_duration_is_at_least_a_millisecond():
    fields = client.build_request(["waiting", "c1", "--reason", "x", "--timeout", "0.0001s"])
    assert fields["timeout_ms"] == 1


@pytest.mark.parametrize(
    "fields",
    [
        {"command": "result", "version": 1, "call_id": "c1", "args": ["--a=\"q\"\\"], "input": None},
        {"command": "tool", "version": 1, "name": "t", "args": [], "input": "\x00\x1f\u2028é😀"},
        {"command": "waiting", "version": 1, "call_id": "c1", "reason": "r", "timeout_ms": 30000},
        {"command": "send", "version": 1, "peer": "p", "message": "m\n", "await_reply": True,
         "timeout_ms": None},
    ],
)
def test_encode_request_decodes_on_the_server(fields):
    line = client.encode_request(fields)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    request = decode_request(line)
    assert not hasattr(request, "exit"), request
    assert {f: getattr(request, f) for f in fields if f != "command"} == {
        f: v for f, v in fields.items() if f != "command"
    }


def test_encode_request_passes_undecodable_argv_bytes_through():
    arg = b"caf\xe9".decode("utf-8", "surrogateescape")
    line = client.encode_request({"command": "result", "version": 1, "call_id": "c1", "args": [arg]})
    assert b"caf\xe9" in line


def test_decode_response():
    line = encode_response(refused("send", "no-route", "no route to x.", notice="wfa: owe.\n"))
    response = client.decode_response(line)
    assert response == {
        "version": 1,
        "exit": 1,
        "code": "no-route",
        "stdout": "",
        "stderr": "wfa: owe.\nwfa: send refused (no-route): no route to x.\n",
        "value": None,
        "error": "no route to x.",
    }
    for bad in [
        b'{"exit":0,"stdout":"","stderr":""}',
        b'{"exit":0,"stdout":"","stderr":""} x\n',
        b'{"exit":true,"stdout":"","stderr":""}\n',
        b'{"exit":256,"stdout":"","stderr":""}\n',
        b'{"exit":0,"stdout":"","stderr":3}\n',
        b'{"exit":0,"stdout":"\xff","stderr":""}\n',
        b'"text"\n',
        b"\n",
    ]:
        with pytest.raises(ValueError):
            client.decode_response(bad)


def test_read_stdin_times_out_when_not_closed():
    r, w = os.pipe()
    try:
        os.write(w, b"partial")
        with pytest.raises(client.UsageError, match="not closed within 0.2 seconds"):
            client.read_stdin(r, timeout=0.2)
    finally:
        os.close(r)
        os.close(w)


def test_read_stdin_limit_and_close():
    r, w = os.pipe()
    os.write(w, b"12345")
    os.close(w)
    assert client.read_stdin(r, limit=5) == "12345"
    os.close(r)
    r, w = os.pipe()
    os.write(w, b"123456")  # over the limit: refused without waiting for the close
    try:
        with pytest.raises(client.UsageError, match="over 5 bytes"):
            client.read_stdin(r, limit=5, timeout=5)
    finally:
        os.close(r)
        os.close(w)


def test_read_stdin_from_a_terminal_is_empty():
    main, other = os.openpty()
    try:
        assert client.read_stdin(other) == ""
    finally:
        os.close(main)
        os.close(other)


def test_read_stdin_closed_fd_is_empty():
    r, w = os.pipe()
    os.close(r)
    os.close(w)
    assert client.read_stdin(r) == ""


def test_starts_without_heavy_modules(sockdir):
    done = subprocess.run(
        [sys.executable, "-S", "-I", "-X", "importtime", CLIENT, "--at",
         os.path.join(sockdir, "missing.sock"), "result", "c1", "--x", "1"],
        capture_output=True,
        timeout=20,
    )
    assert done.returncode == 1
    imported = _imported(done.stderr)
    heavy = {"socket", "json", "re", "enum", "os", "selectors", "msgspec", "agentswf", "signal"}
    assert not imported & heavy, imported & heavy
    # common.py, _json and _socket are loaded from where they are, never searched for on sys.path;
    # errno only on this path, to tell that the run is over.
    assert imported - _interpreter_imports() <= {"errno"}, imported - _interpreter_imports()


def _imported(stderr: bytes) -> set[str]:
    """The modules `-X importtime` says were found and loaded by an import."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.decode().splitlines()
        if line.startswith("import time:") and "|" in line
    }


def _interpreter_imports() -> set[str]:
    """What the bare interpreter imports as it starts."""
    done = subprocess.run([sys.executable, "-S", "-I", "-X", "importtime", "-c", "pass"], capture_output=True, timeout=20)
    return _imported(done.stderr)


@pytest.mark.anyio
async def test_the_launcher_searches_sys_path_for_nothing(sockdir):
    """Every search lists directories (a quarter of a millisecond here): the launcher loads
    client.py by its path, and client.py its modules by theirs."""
    path = os.path.join(sockdir, "s.sock")
    launcher = os.path.join(sockdir, "wfa")
    with open(launcher, "w") as f:
        f.write(client.launcher_script(sys.executable, path))
    os.chmod(launcher, 0o500)
    listener = await anyio.create_unix_listener(path)
    stub = Stub(path, OK)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, stub.handle)
        done = await anyio.run_process([sys.executable, "-S", "-I", "-X", "importtime", launcher, "peers"], check=False)
        tg.cancel_scope.cancel()
    assert (done.returncode, done.stdout) == (0, b"accepted\n")
    assert _imported(done.stderr) - _interpreter_imports() == set()


def test_a_c_module_not_in_lib_dynload_is_left_to_import():
    with pytest.raises(ImportError):  # not a file there, and import finds it nowhere
        client._load_extension("_no_such_module_here")
    assert "_no_such_module_here" not in sys.modules
    before = sys.modules["_socket"]
    assert client._load_extension("_socket") is before  # loaded already: as it is
    assert client._load_extension("marshal") is sys.modules["marshal"]  # built in


@pytest.mark.anyio
async def test_launcher_script_round_trip(sockdir):
    # The launcher `launcher_script` writes imports client.py from its bytecode; quotes survive.
    directory = os.path.join(sockdir, "it's")
    os.mkdir(directory)
    path = os.path.join(directory, "s.sock")
    launcher = os.path.join(directory, "wfa")
    with open(launcher, "w") as f:
        f.write(client.launcher_script(sys.executable, path))
    os.chmod(launcher, 0o500)
    listener = await anyio.create_unix_listener(path)
    stub = Stub(path, OK)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, stub.handle)
        done = await anyio.run_process([launcher, "send", "a b", "it's"], check=False)
        usage = await anyio.run_process([launcher, "peers", "--all"], check=False)
        tg.cancel_scope.cancel()
    assert (done.returncode, done.stdout) == (0, b"accepted\n")
    assert decode_request(stub.requests[0]) == SendRequest(version=1, peer="a b", message="it's")
    assert usage.returncode == 2
    assert f"usage: {launcher} result".encode() in usage.stderr
    assert len(stub.requests) == 1


@pytest.mark.parametrize(("command", "exit"), [("tool", 3), ("result", 1)])
def test_a_request_over_the_runs_limit_is_refused_before_it_is_sent(sockdir, command, exit):
    """1 MiB of control characters escapes to 6 MiB of JSON: over the run's limit, so nothing goes out."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = os.path.join(sockdir, "s.sock")
    listener.bind(path)
    listener.listen(1)
    listener.setblocking(False)
    try:
        done = run_sync(path, command, "name-or-id", stdin=b"\x01" * (1024 * 1024))
        assert done.returncode == exit
        assert b"refused (request-too-large)" in done.stderr and b"nothing was sent" in done.stderr
        with pytest.raises(BlockingIOError):
            listener.accept()  # no connection was made
    finally:
        listener.close()


def test_the_launcher_ends_its_process_without_the_interpreters_teardown(monkeypatch):
    """About a millisecond, as much as all of wfa's own work: `launch` exits at once with main's status."""
    ended: list[int] = []

    def exit_now(status: int) -> None:
        ended.append(status)

    monkeypatch.setattr(client.posix, "_exit", exit_now)
    monkeypatch.setattr(client, "main", lambda argv: 7 if argv == ["--at", "s", "peers"] else 0)
    client.launch(["--at", "s", "peers"])
    assert ended == [7]
    assert "c.launch(" in client.launcher_script("/usr/bin/python3", "/tmp/a/s.sock")
    assert "c.launch(" in client.launcher_script("/a path/python3", "/tmp/a/s.sock")  # the /bin/sh form
