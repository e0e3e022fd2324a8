"""Review 4: a connection refused while its agent starts is checked again later for a pid only.

An agent's socket listens from the start of its turn, before its attempt's keeper is spawned;
a request on it then waits for the keeper's pid (`admission.agent_admit`, up to
SPAWN_ADMIT_WAIT_SECONDS) and is decided again once it is known. `peer_pid` checked, through
the connection's pidfd, that the connecting process ran when the request arrived, but the
second decision is made for the pid alone, seconds later maybe: by then the connector may have
exited and its pid gone to another process. If that process is the keeper (sibling b's connector
connects as a's socket appears, exits once refused, and b has cycled the pids so that the next one
given is its connector's, as `test_a_sibling_cant_call_anothers_tool_by_reusing_a_pid` cycles
them), b's request is admitted as a's. Here the connector is a real process that exits and is
reaped; the keeper given its pid is the table's (a real pid cycle can't be timed in a test).

A reviewer's follow-up: the start time that told the connector from a later process of its pid
was read after the first decision (when the request was in), not at accept, so a pid given out
between the pidfd check and that read (on a kernel before 6.5, which has no pidfd: any time
before the request was in) passed as the connector. Now `peer.identify` reads the pid and its
start time once, as the connection is taken, and every admission holds only while the pid
still names that process (`peer.is_connector`). The second test gives a pid out again for real,
in a pid namespace of its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentswf.engine.admission import agent_admit, operator_admit
from agentswf.launcher.identity import LiveAttempts
from agentswf.launcher.peer import Peer, started_at

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the identity check reads /proc"),
]


class Recorded:
    """The Recorder's part in a refusal: the refusal is told to it."""

    def __init__(self) -> None:
        self.told: list[Any] = []

    async def tell(self, message: Any) -> None:
        self.told.append(message)


async def test_a_connector_gone_while_its_agent_started_isnt_admitted_as_the_keeper_given_its_pid() -> None:
    attempts = LiveAttempts()
    attempts.begin("a")  # a's turn has begun; its keeper is being spawned
    recorder = Recorded()
    admit = agent_admit("a", attempts, recorder)  # type: ignore[arg-type]
    assert admit is not None
    connector = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])  # b's, connected to a's socket
    decided: list[str | None] = []
    try:
        async with anyio.create_task_group() as group:

            async def check() -> None:
                decided.append(await admit(Peer(connector.pid, started_at(connector.pid))))  # as the listener read it

            group.start_soon(check)
            await anyio.sleep(0.05)  # refused for now, waiting for a's keeper
            assert not decided
            connector.kill()
            connector.wait()  # gone and reaped: its pid is free
            attempts.add(connector.pid, "a")  # a's keeper, given that pid
    finally:
        if connector.poll() is None:
            connector.kill()
            connector.wait()
    assert decided[0] is not None, "b's request was admitted as a's"
    assert recorder.told  # and the refusal recorded


async def test_a_pid_that_names_a_later_process_than_the_connector_is_refused_on_either_socket() -> None:
    """Past any decision, on an agent's socket and on the operator socket. The process at the pid
    is real (a's keeper, and a process of no agent); the connector gone is simulated by a start
    time read at accept one tick before this process's own, as a pid given out again has."""
    recorder = Recorded()
    with subprocess.Popen(["sleep", "30"]) as later:
        try:
            started = started_at(later.pid)
            assert started is not None
            earlier = str(int(started) - 1).encode()
            attempts = LiveAttempts()
            attempts.add(later.pid, "a")
            agent = agent_admit("a", attempts, recorder)  # type: ignore[arg-type]
            operator = operator_admit(LiveAttempts(), recorder, "run-mark")  # type: ignore[arg-type]
            assert agent is not None and operator is not None
            assert await agent(Peer(later.pid, started)) is None  # the connector itself: a's
            assert await operator(Peer(later.pid, started)) is None  # and a person's
            assert "is gone" in (await agent(Peer(later.pid, earlier)) or "")
            assert "is gone" in (await operator(Peer(later.pid, earlier)) or "")
        finally:
            later.kill()
    assert [message.command for message in recorder.told] == [[], []]  # not the later process's


# The run, as the first process of a pid namespace of its own (its end ends the namespace):
# a's socket served by the run's own `serve` and `agent_admit`, while a is starting.
RUN = r"""
import json, subprocess, sys
import anyio
from agentswf.engine.admission import agent_admit, operator_admit
from agentswf.launcher import peer
from agentswf.launcher.identity import LiveAttempts
from agentswf.launcher.listener import ConnectionBudget, bind, serve
from agentswf.wire import refused

path, backend, attacker, variant = sys.argv[1:5]
listening = bind(path)
b = subprocess.Popen([sys.executable, "-c", attacker, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
keeper = []


def tell(command):
    b.stdin.write(command + b"\n")
    b.stdin.flush()


def replace_connector():
    tell(b"exit")
    keeper.append(int(b.stdout.readline()))


if variant == "no-pidfd":
    peer._SO_PEERPIDFD = 0x7FFF  # as a kernel before 6.5 answers: no such option (ENOPROTOOPT)
if variant == "race":
    checked = peer._still_running

    def still_running_then_gone(sock, pid):
        running = checked(sock, pid)
        if not keeper:  # the connector exits just after the check, and its pid is given out again
            replace_connector()
        return running

    peer._still_running = still_running_then_gone


class Recorded:
    def __init__(self):
        self.told = []

    async def tell(self, message):
        self.told.append(message)


async def main():
    attempts, recorder, ran = LiveAttempts(), Recorded(), []
    attempts.begin("a")  # a's turn has begun; its keeper is being spawned
    budget = ConnectionBudget(4)

    async def handle(request):
        ran.append(request)
        return refused("tool", "no-operation", "the handler ran")

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            group.start_soon(serve, listening, handle, budget, agent_admit("a", attempts, recorder))
            connector = int(await anyio.to_thread.run_sync(b.stdout.readline))
            while budget.open < 1:  # the connection is taken
                await anyio.sleep(0.01)
            if variant != "race":
                await anyio.to_thread.run_sync(replace_connector)
            tell(b"send")
            while not keeper:  # race: until the pidfd check, at the take or when the request is in
                await anyio.sleep(0.01)
            await anyio.sleep(0.3)  # decided, or waiting for a's keeper
            attempts.add(keeper[0], "a")  # a's keeper is the process given the connector's pid
            tell(b"answer")
            answer = (await anyio.to_thread.run_sync(b.stdout.readline)).decode()
            group.cancel_scope.cancel()
    told = [{"pid": m.pid, "command": m.command, "reason": m.reason} for m in recorder.told]
    print(json.dumps({"connector": connector, "keeper": keeper[0], "answer": answer, "ran": len(ran), "told": told}))


anyio.run(main, backend=backend)
"""

# Sibling b: its connector, forked once the socket is made (so this process holds the connection
# it makes), connects to a's socket. Told `exit`, the connector exits and is reaped, and the next
# pid given out in the namespace (ns_last_pid) is its own, to a process standing for a's keeper;
# told `send`, b sends its request on the connection; told `answer`, it prints the answer.
ATTACKER = r"""
import json, os, socket, subprocess, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
connected_r, connected_w = os.pipe()
exit_r, exit_w = os.pipe()
connector = os.fork()
if connector == 0:
    s.connect(sys.argv[1])
    os.write(connected_w, b"c")
    os.read(exit_r, 1)
    os._exit(0)
os.read(connected_r, 1)
print(connector, flush=True)
for command in sys.stdin:
    if command == "exit\n":
        time.sleep(0.05)  # start times are in clock ticks (10 ms): a pid comes round again later than that
        os.write(exit_w, b"x")
        os.waitpid(connector, 0)  # gone and reaped: its pid is free
        for _ in range(5):  # the next pid given out, unless another process of the namespace took it first
            with open("/proc/sys/kernel/ns_last_pid", "w") as last:
                last.write(str(connector - 1))
            keeper = subprocess.Popen(["sleep", "60"])
            if keeper.pid == connector:
                break
        print(keeper.pid, flush=True)
    elif command == "send\n":
        s.sendall(json.dumps({"version": 1, "command": "tool", "name": "ping"}).encode() + b"\n")
        s.shutdown(socket.SHUT_WR)
    elif command == "answer\n":
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
        print(answer.decode().strip(), flush=True)
"""

NAMESPACES = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc", "--kill-child"]  # killed, it takes the namespace along


def _own_pid_namespace() -> bool:
    """Whether this user can make a pid namespace of its own (with /proc and its ns_last_pid)."""
    try:
        made = subprocess.run([*NAMESPACES, "sh", "-c", "echo 100 >/proc/sys/kernel/ns_last_pid"], capture_output=True)
    except OSError:
        return False
    return made.returncode == 0


@pytest.mark.skipif(not _own_pid_namespace(), reason="gives a pid out again in a user and pid namespace of its own")
@pytest.mark.parametrize("variant", ["pidfd", "no-pidfd", "race"])
async def test_a_connector_gone_before_its_request_is_decided_isnt_taken_for_the_process_given_its_pid(
    tmp_path: Path, anyio_backend: str, variant: str
) -> None:
    """Every process is real and the pid is given out again for real (`ns_last_pid`, in a pid
    namespace of the test's own). The connector exits once the run has taken its connection and
    before its request is in (`pidfd`, `no-pidfd`), or just after the run checked, through the
    connection's pidfd, that it runs (`race`). Simulated: `no-pidfd` tells the run the kernel has
    no SO_PEERPIDFD, as before Linux 6.5 (supported: the pid is then checked against /proc
    alone), since this kernel's pidfd says the connector is gone; `race` has the connector exit
    from inside the run's pidfd check, since the microseconds between that check and the /proc
    reads after it can't be timed from outside. Before the fix both were admitted as a's."""
    with anyio.fail_after(30):
        done = await anyio.run_process(
            [*NAMESPACES, sys.executable, "-c", RUN, str(tmp_path / "a.sock"), anyio_backend, ATTACKER, variant],
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout.decode().splitlines()[-1])
    assert seen["keeper"] == seen["connector"], "the connector's pid was not given out again"
    assert seen["ran"] == 0 and "the handler ran" not in seen["answer"], f"b's request was admitted as a's: {seen}"
    assert '"wrong-agent"' in seen["answer"], seen["answer"]
    assert seen["told"] and all(refusal["command"] == [] for refusal in seen["told"]), seen["told"]  # not the keeper's
