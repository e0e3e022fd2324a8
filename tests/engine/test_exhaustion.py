"""Exhaustion at a live run's sockets: stalled connections on every agent's socket and on
the operator socket keep no well-behaved caller out, and a run whose process runs out of
file descriptors survives, answers and completes."""

from __future__ import annotations

import functools
import json
import socket
import sys
import textwrap
import time
from pathlib import Path

import anyio
import pytest

from agentswf import tool, workflow
from agentswf.engine.operator import MAX_OPERATOR_CONNECTIONS
from agentswf.engine.operator_wire import MAX_INBOX_WAIT_SECONDS, OPERATOR_SOCKET_NAME, Pending, ReadInbox, ask_run
from agentswf.launcher.place import SOCKET_NAME
from agentswf.testing import ToolResult, answer, hang, run_workflow, silent
from agentswf.wire import EXIT_TOOL_UNCERTAIN, MAX_OPEN_CONNECTIONS, decode_response

pytestmark = pytest.mark.anyio

STALLED = 1000
ANSWER_WITHIN_SECONDS = 5.0  # a tool call and an answer take well under 0.1 s unloaded


class Attack:
    """`n` connections spread over `paths`, each sending half a line and holding; one the
    run closes is opened again at once, until `stop`."""

    def __init__(self, paths: list[Path], n: int) -> None:
        self.paths = paths
        self.n = n
        self.connected = 0
        self.answers: list[bytes] = []
        self.stopped = anyio.Event()

    async def run(self) -> None:
        async with anyio.create_task_group() as group:
            for i in range(self.n):
                group.start_soon(self._hold, self.paths[i % len(self.paths)])
            await self.stopped.wait()
            group.cancel_scope.cancel()

    async def _hold(self, path: Path) -> None:
        while True:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.setblocking(False)
                while True:
                    try:
                        sock.connect(str(path))
                        break
                    except BlockingIOError:  # the backlog is full: try again once the run accepts some
                        await anyio.sleep(0.01)
                sock.send(b'{"version":1,"comm')
                self.connected += 1
                answer = b""
                while True:  # raw, as the listener reads: see listener._read_into
                    await anyio.wait_readable(sock)
                    try:
                        chunk = sock.recv(65536)
                    except BlockingIOError:
                        continue
                    except OSError:
                        break
                    if not chunk:
                        break
                    answer += chunk
                if len(self.answers) < 10:
                    self.answers.append(answer)

    async def established(self) -> None:
        with anyio.fail_after(30):
            while self.connected < self.n:
                await anyio.sleep(0.01)


@workflow(name="stalls", description="Agent b calls a tool and answers while a thousand connections stall.")
async def stalls(wf):
    a = await wf.agents.open("a", runtime="codex")
    b = await wf.agents.open("b", runtime="codex", tools={"ping": tool(lambda: "pong", description="Answer pong.")})
    sockets = a.launcher.parent.parent
    attack = Attack([a.launcher.with_name(SOCKET_NAME)], STALLED)  # b's socket opens with its turn: see below
    async with anyio.create_task_group() as turns, anyio.create_task_group() as group:
        turns.start_soon(functools.partial(a.run, "Hang.", timeout="60s"))  # a's socket listens while its turn runs
        while not a.launcher.with_name(SOCKET_NAME).exists():
            await anyio.sleep(0.01)
        group.start_soon(attack.run)
        await attack.established()
        started = time.monotonic()
        turn = await b.run("Call ping, then answer with what it said.", timeout="30s", nudge=False)
        elapsed = time.monotonic() - started
        person = await anyio.to_thread.run_sync(ask_run, sockets / OPERATOR_SOCKET_NAME, Pending())
        attack.stopped.set()
        turns.cancel_scope.cancel()
    return {
        "answer": turn.value,
        "elapsed": elapsed,
        "person": person.ok,
        "connections": attack.connected,
        "evicted": [decode_response(line).stderr for line in attack.answers if line],
    }


async def test_a_thousand_stalled_connections_dont_keep_an_agent_from_its_answer(tmp_path):
    called = []

    async def b(turn):
        called.append(await turn.tool("ping"))
        return called[-1].output

    run = await run_workflow(stalls, agents={"a": hang(), "b": answer(b)}, run_root=tmp_path)
    value = run.value
    assert called == [ToolResult(output="pong")] and value["answer"] == "pong"
    assert value["elapsed"] < ANSWER_WITHIN_SECONDS, value["elapsed"]
    assert value["person"]  # the operator socket answered too
    assert value["connections"] > STALLED  # the run closed stalled ones to make room, and they came back
    assert value["evicted"] and all(f"{MAX_OPEN_CONNECTIONS} connections open" in text for text in value["evicted"])


@workflow(name="operator-stalls", description="Stalled connections on the operator socket.")
async def operator_stalls(wf):
    await wf.participants.open("pat")
    a = await wf.agents.open("a", runtime="codex")
    control = a.launcher.parent.parent / OPERATOR_SOCKET_NAME
    attack = Attack([control], 4 * MAX_OPERATOR_CONNECTIONS)
    async with anyio.create_task_group() as group:
        group.start_soon(attack.run)
        await attack.established()
        pending = await anyio.to_thread.run_sync(ask_run, control, Pending())
        too_long = await anyio.to_thread.run_sync(
            ask_run, control, ReadInbox("pat", int((MAX_INBOX_WAIT_SECONDS + 1) * 1000))
        )
        attack.stopped.set()
    return {
        "pending": pending.ok,
        "too_long": too_long.message,
        "evicted": [json.loads(line)["message"] for line in attack.answers if line],
    }


async def test_stalled_connections_on_the_operator_socket_keep_no_person_out(tmp_path):
    value = (await run_workflow(operator_stalls, agents={"a": silent()}, run_root=tmp_path)).value
    assert value["pending"]
    assert "MAX_INBOX_WAIT_SECONDS" in value["too_long"]
    assert value["evicted"] and all("MAX_OPERATOR_CONNECTIONS" in text for text in value["evicted"])


@workflow(name="busy-operator", description="Every operator slot holds an inbox wait.")
async def busy_operator(wf):
    await wf.participants.open("pat")
    a = await wf.agents.open("a", runtime="codex")
    control = a.launcher.parent.parent / OPERATOR_SOCKET_NAME
    waits: list[str] = []

    async def wait() -> None:
        waits.append((await anyio.to_thread.run_sync(ask_run, control, ReadInbox("pat", 600))).message)

    async with anyio.create_task_group() as group:
        for _ in range(MAX_OPERATOR_CONNECTIONS):
            group.start_soon(wait)
        await anyio.sleep(0.2)
        over = await anyio.to_thread.run_sync(ask_run, control, Pending())
    return {"over": over.message, "waits": waits}


async def test_the_operator_budget_refuses_a_connection_over_it_unread(tmp_path):
    value = (await run_workflow(busy_operator, agents={"a": silent()}, run_root=tmp_path)).value
    assert f"{MAX_OPERATOR_CONNECTIONS} connections open" in value["over"]
    assert "MAX_OPERATOR_CONNECTIONS" in value["over"]
    assert value["waits"] == ["0 message(s)"] * MAX_OPERATOR_CONNECTIONS  # each wait ended at its bound


# Out of file descriptors ----------------------------------------------------------------

FD_LIMIT = 128  # the run's own, lowered: it starts with about 20 open

CHILD = textwrap.dedent(
    """
    import os, resource, sys, anyio, structlog
    from pathlib import Path
    import agentswf
    from agentswf import tool, workflow

    out = Path(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[2]), resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    accept_failed = []

    def mark(logger, method, event):
        if event["event"].startswith("accept failed"):
            accept_failed.append(event)
        return event

    structlog.configure(processors=[mark, *structlog.get_config()["processors"]])

    async def spike():
        # The run's own descriptors run out for a moment, as with hundreds of agents' pipes.
        # b calls once it sees "hogging"; the hog takes every descriptor freed meanwhile (a stalled
        # connection timed out, or the one this call evicted, closed once it waits) until an accept
        # has failed or b's call has ended otherwise.
        (out / "hogging").touch()
        held = []

        def hog():
            try:
                while True:
                    held.append(os.open(os.devnull, os.O_RDONLY))
            except OSError:
                pass

        with anyio.move_on_after(20):
            while not ((out / "calling").exists() and (accept_failed or (out / "during.rc").exists())):
                hog()
                await anyio.sleep(0.002)
        for fd in held:
            os.close(fd)
        return len(held)

    @workflow(name="emfile", description="A run out of file descriptors.")
    async def emfile(wf):
        tools = {"spike": tool(spike, description="Hog every descriptor while b calls."),
                 "ping": tool(lambda: "pong", description="Answer pong.")}
        a = await wf.agents.open("a", runtime=sys.argv[3], tools=tools)
        b = await wf.agents.open("b", runtime=sys.argv[4], tools=tools)
        async with anyio.create_task_group() as group:
            group.start_soon(a.run, "Spike.")
            turn = await b.run("Ping.", timeout="60s")
        return {"b": turn.value}

    result = anyio.run(lambda: agentswf.run(emfile, run_root=out / "runs", cwd=out), backend=sys.argv[5])
    print(result.outcome, result.value, result.reason)
    """
)


WAIT_FOR_STALLS = 'for _ in $(seq 200); do [ -e "$OUT/stalling" ] && break; sleep 0.05; done'


def shell(tmp_path: Path, name: str, body: str) -> str:
    script = tmp_path / f"{name}.sh"
    script.write_text(f"#!/bin/sh\nOUT={tmp_path}\n{body}\n")
    script.chmod(0o755)
    return f"shell:{script}"


async def test_a_run_out_of_file_descriptors_survives_answers_and_completes(tmp_path, anyio_backend):
    """The run's process has FD_LIMIT descriptors; stalled connections hold all they may
    and a tool call hogs the rest while the other agent calls: accept fails with EMFILE meanwhile. The run
    keeps serving: the call made during the spike is answered (once accept works again, or
    refused internal-error where the run can't look up who is calling), the call made after
    it runs, and the run ends completed."""
    socket_of = 'S="$(dirname "$WFA")/s.sock"'
    stall = (  # it inherits the run's lowered limit: it raises its own
        f"{sys.executable} -c 'import resource,socket,sys,time\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (1024, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))\n"
        "held=[]\n"
        "for _ in range(300):\n"
        "    s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.send(b\"{\"); held.append(s)\n"
        "open(sys.argv[2],\"w\").close(); time.sleep(60)' \"$S\" \"$OUT/stalling\" &"
    )
    a = shell(
        tmp_path,
        "a",
        f"""{socket_of}
{stall}
{WAIT_FOR_STALLS}
"$WFA" tool spike </dev/null >"$OUT/spike.out" 2>&1; echo $? >"$OUT/spike.rc"
touch "$OUT/spiked"
echo '"spiked"' | "$WFA" result "$WFA_CALL_ID" >/dev/null 2>&1""",
    )
    b = shell(
        tmp_path,
        "b",
        """for _ in $(seq 600); do [ -e "$OUT/hogging" ] && break; sleep 0.05; done
touch "$OUT/calling"
"$WFA" tool ping </dev/null >"$OUT/during.out" 2>&1; echo $? >"$OUT/during.rc"
for _ in $(seq 200); do [ -e "$OUT/spiked" ] && break; sleep 0.05; done
"$WFA" tool ping </dev/null >"$OUT/after.out" 2>&1; echo $? >"$OUT/after.rc"
echo '"pinged"' | "$WFA" result "$WFA_CALL_ID" >/dev/null 2>&1""",
    )
    with anyio.fail_after(90):
        child = await anyio.run_process(
            [sys.executable, "-c", CHILD, str(tmp_path), str(FD_LIMIT), a, b, anyio_backend], check=False
        )
    stdout, stderr = child.stdout.decode(), child.stderr.decode()
    assert child.returncode == 0, stderr[-3000:]
    assert "completed {'b': 'pinged'}" in stdout, stdout[-3000:] + stderr[-3000:]
    during = (tmp_path / "during.out").read_text().strip(), int((tmp_path / "during.rc").read_text())
    assert during == ("pong", 0) or (during[1] == EXIT_TOOL_UNCERTAIN and "internal-error" in during[0]), during
    assert (tmp_path / "after.out").read_text().strip() == "pong"
    assert int((tmp_path / "spike.rc").read_text()) == 0
    # It did run out: at the accept (structlog prints to stdout), or after it, looking up who called.
    assert "accept failed; retrying" in stdout or during[1] == EXIT_TOOL_UNCERTAIN
