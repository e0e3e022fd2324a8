"""Review 4: an agent flooding its own socket with empty connections evicts a sibling's large request.

The run's connection budget is shared by every agent's socket, and a newcomer over it evicts the
connection accepted first of those still waiting for their request (`ConnectionBudget.evict_oldest`).
The listener's module says a wfa client "is read within milliseconds and is never the oldest one
waiting": true of a line that fits the socket's buffer, which the run finds whole as it accepts. A
request larger than that (an answer or a tool's input of a few hundred KiB, well under
MAX_REQUEST_BYTES) is still arriving while the attacker's connections come in, and once
`limit` newer ones have been accepted it is the oldest waiting: it is closed, refused
`internal-error`, however fast its bytes were coming. The attacker needs no access to the
sibling's socket: its own, whose admission is checked only after a request is read, is enough.

Real sockets, the run's own `serve` on two sockets sharing one budget, on either backend; the
attacker is another process connecting in a loop, sending nothing, and holding more connections
than the listen backlog (a flood that closes them sooner only queues dead ones, read at once);
the sibling is a process of its own, as wfa is. Measured here: 8 to 38 of 60 calls evicted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from agentswf.launcher.listener import ConnectionBudget, bind, serve
from agentswf.wire import Request, Response, refused

pytestmark = pytest.mark.anyio

# Connects to the socket over and over, never sending, keeping the newest HELD open.
FLOOD = """
import resource, socket, sys, time
path, held = sys.argv[1], int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, held + 64)), hard))
open_ = []
print("flooding", flush=True)
end = time.monotonic() + 60
while time.monotonic() < end:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError:
        s.close()
        time.sleep(0.001)
        continue
    open_.append(s)
    if len(open_) > held:
        open_.pop(0).close()
"""

CALLS = 60
INPUT_BYTES = 900_000  # a tool's input under MAX_STDIN_BYTES, a few times a unix socket's buffer

# The sibling: a process of its own (as wfa is) making CALLS large tool calls, one answer a line.
CALLER = f"""
import json, sys
from agentswf.launcher import client
fields = client.build_request(["tool", "lint"], lambda: json.dumps({{"text": "x" * {INPUT_BYTES}}}))
for _ in range({CALLS}):
    try:
        answer = client.call(sys.argv[1], fields)
    except client.Unreached as error:  # closed mid-send: its refusal was not in yet
        answer = {{"stderr": f"unreached, waited longest: {{error}}"}}
    print(json.dumps(answer), flush=True)
"""
HELD = 6000  # the flood's connections held open: more than the listen backlog (4096), so those accepted are live


async def handled(request: Request) -> Response:
    return refused("tool", "no-operation", "the handler ran")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the flood's rate is Linux's")
@pytest.mark.xfail(
    strict=False,  # a race: most runs evict some of the calls, a few evict none
    reason="eviction goes by accept order alone: a large request still arriving is evicted by a sibling's "
    "flood of empty connections to its own socket (review 4; open: ranking by arrival rate still lost 1 in 60)",
)
async def test_a_flood_on_a_siblings_own_socket_doesnt_evict_a_large_request(tmp_path: Path) -> None:
    budget = ConnectionBudget()
    mine, theirs = tmp_path / "a.sock", tmp_path / "b.sock"
    async with anyio.create_task_group() as group:
        group.start_soon(serve, bind(mine), handled, budget)
        group.start_soon(serve, bind(theirs), handled, budget)
        flood = subprocess.Popen([sys.executable, "-c", FLOOD, str(theirs), str(HELD)], stdout=subprocess.PIPE)
        try:
            assert flood.stdout is not None
            await anyio.to_thread.run_sync(flood.stdout.readline)
            with anyio.fail_after(30):
                while budget.evicted < 20 * budget.limit:  # the flood is under way: stalls evict stalls
                    await anyio.sleep(0.01)
            caller = await anyio.run_process([sys.executable, "-c", CALLER, str(mine)], check=False)
            answers = [json.loads(line) for line in caller.stdout.splitlines()]
            assert len(answers) == CALLS, caller.stderr.decode()
        finally:
            flood.kill()
            flood.wait()
        group.cancel_scope.cancel()
    evicted = [answer for answer in answers if "waited longest" in answer["stderr"]]
    assert not evicted, f"{len(evicted)} of {CALLS} large requests evicted: {evicted[0]['stderr']}"
    assert all("the handler ran" in answer["stderr"] for answer in answers), answers
