"""What hostile connections cost a live run: a well-behaved agent's wait, and the run's memory.

    python benchmarks/exhaustion.py [N]        (default N=50)

A real run (the engine on asyncio, in a process of its own as in real use) opens a shell agent
with a no-op tool; the agent's command is this file's timing loop, so every `wfa` it times comes
from inside the agent's attempt, under its keeper, as an agent's own does (a `wfa` from anywhere
else is refused `wrong-agent`). This process attacks the agent's socket from outside, as any
process of the user's may. It measures:

- `wfa tool noop` through the real launcher, N times unloaded and N times while 1,000
  connections stall on the agent's socket (each sent half a line and holds), then N times
  while they stall and each one the run closes is opened again at once: the medians, and
  their ratios to the unloaded one;
- the run's resident memory unloaded, and once 200 connections have each sent 2 MiB
  (just under the request limit) and hold without ending it: the ratio
  (before the budget was taken ahead of reading, 30 MB became 441 MB);
- what an accept costs the listener once its budget is full of 100, then 1,000, connections
  whose bytes are all in their sockets unread (`_pending`: a flood that trickles, the run
  behind), or none of whose are (`_empty`: a flood that sends nothing): one
  `ConnectionBudget.take` evicting one, on real sockets, in this process. The baseline is the
  rule before MAX_EVICTION_PEEKS, which asked every waiting socket, timed alternately on the
  same sockets. `python benchmarks/exhaustion.py --evict` measures only this.
"""

from __future__ import annotations

import os
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import anyio

import agentswf
from agentswf import Workflow, tool, workflow
from agentswf.launcher import listener
from agentswf.launcher.listener import ConnectionBudget, Slot, ranked_at
from agentswf.launcher.place import SOCKET_NAME
from agentswf.wire import MAX_REQUEST_BYTES

STALLED = 1000
FLOODING = 200
EVICT_WAITING = (100, 1000)  # connections waiting, every one with bytes unread
EVICT_ACCEPTS = 200  # accepts timed at each size, each evicting one
EVICT_ROUNDS = 5  # of ours and the baseline, alternated; the best of each
PHASES = ("quiet", "stalled", "reopened")  # the agent times N calls in each, when told to go
WAIT = 300.0  # seconds either side waits for the other before giving up


def awaited(path: Path, alive: Callable[[], bool] = lambda: True) -> str:
    """The text of `path`, once the other side has written it (whole: it is renamed into place)."""
    deadline = time.monotonic() + WAIT
    while not path.exists():
        if not alive():
            sys.exit(f"the run ended before {path.name} was written")
        if time.monotonic() > deadline:
            sys.exit(f"gave up waiting for {path.name}")
        time.sleep(0.01)
    return path.read_text()


def put(path: Path, text: str) -> None:
    part = path.with_name(f"{path.name}.part")
    part.write_text(text)
    os.replace(part, path)


def client(n: int, out: Path) -> None:
    """The agent's side: in each phase, once told to go, time `wfa tool noop` N times and write the median."""
    wfa = os.environ["WFA"]
    put(out / "socket", str(Path(wfa).with_name(SOCKET_NAME)))
    timed(wfa, 3)  # warm the caches
    for phase in PHASES:
        awaited(out / f"{phase}.go")
        put(out / phase, repr(statistics.median(timed(wfa, n))))
    awaited(out / "end")  # the turn, and so the socket, stays open for the flood


@workflow(name="bench-exhaustion", description="One agent times wfa from inside its turn.")
async def bench(wf: Workflow, args: list[str]) -> None:
    n, out = args
    noop = tool(lambda: None, description="Nothing.")
    command = f"{sys.executable} {Path(__file__).resolve()} --client {n} {out}"
    agent = await wf.agents.open("bench", runtime=f"shell:{command}", tools={"noop": noop})
    turn = await agent.run("Time wfa.", timeout="1h", nudge=False)
    if turn.outcome.kind != "unanswered":
        wf.stop(f"the timing agent ended {turn.outcome.kind}: {turn.outcome.reason}")


def serve(n: str, out: str) -> None:
    """The run, in a process of its own; its record under `out`."""
    result = anyio.run(lambda: agentswf.run(bench, args=[n, out], run_root=Path(out) / "runs", cwd=out))
    if result.outcome != "completed":
        sys.exit(f"the run ended {result.outcome}: {result.reason}")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def stall(path: str, n: int, stop: threading.Event, reopen: bool) -> None:
    """Hold `n` connections that each sent half a line (reopening each the run closes)."""
    selector = selectors.DefaultSelector()

    def open_one() -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        sock.send(b'{"version":1,"comm')
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)

    for _ in range(n):
        open_one()
    while not stop.is_set():
        for key, _ in selector.select(0.1):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                if sock.recv(65536):
                    continue
            except OSError:
                pass
            selector.unregister(sock)
            sock.close()
            if reopen:
                open_one()
    for key in list(selector.get_map().values()):
        key.fileobj.close()  # type: ignore[union-attr]


def flood(path: str, n: int) -> list[socket.socket]:
    """`n` connections that each send 2 MiB, as far as the run reads, and hold."""
    payload = memoryview(b"x" * (MAX_REQUEST_BYTES - 4096))
    held = []
    for _ in range(n):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        sock.settimeout(0.5)
        sent = 0
        try:
            while sent < len(payload):
                sent += sock.send(payload[sent:])
        except OSError:
            pass  # the run stopped reading (or evicted it)
        held.append(sock)
    return held


def timed(wfa: str, n: int) -> list[float]:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        done = subprocess.run([wfa, "tool", "noop"], stdin=subprocess.DEVNULL, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
        if done.returncode != 0:
            sys.exit(f"wfa tool noop exited {done.returncode}: {done.stderr.decode()}")
    return times


def asking_every_one(waiting: Iterable[Slot], now: float, arriving: Callable[[Slot], bool]) -> Slot | None:
    """The eviction rule before MAX_EVICTION_PEEKS (0143d32): the lowest ranked asked, then, if its
    bytes were arriving, every waiting connection sorted and asked in turn."""
    candidates = list(waiting)
    rank = ranked_at(now)
    lowest = min(candidates, key=rank, default=None)
    if lowest is None or not arriving(lowest):
        return lowest
    ranked = sorted(candidates, key=rank)
    return next((slot for slot in ranked[1:] if not arriving(slot)), lowest)


Choose = Callable[[Iterable[Slot], float, Callable[[Slot], bool]], Slot | None]


def per_accept(waiting: int, pending: bool, choose: Choose) -> float:
    """Seconds an accept's `take` costs, evicting by `choose`, with `waiting` connections waiting,
    each with a byte in its socket unread if `pending`."""
    pairs = [socket.socketpair() for _ in range(waiting + EVICT_ACCEPTS)]
    ours = listener.choose_eviction
    try:
        for _, client in pairs:
            if pending:
                client.send(b"{")
        budget = ConnectionBudget(waiting)
        for server, _ in pairs[:waiting]:
            slot = budget.take(server)
            assert slot is not None
            budget.wait_for(slot)
        vars(listener)["choose_eviction"] = choose  # what `ConnectionBudget.evict` calls
        start = time.perf_counter()
        for server, _ in pairs[waiting:]:
            slot = budget.take(server)
            assert slot is not None and budget.evicted
            budget.wait_for(slot)
        return (time.perf_counter() - start) / EVICT_ACCEPTS
    finally:
        vars(listener)["choose_eviction"] = ours
        for server, client in pairs:
            server.close()
            client.close()


def eviction_lines() -> list[str]:
    lines = []
    for pending in (True, False):
        for waiting in EVICT_WAITING:
            rounds: dict[str, list[float]] = {"ours": [], "baseline": []}
            for _ in range(EVICT_ROUNDS):
                rounds["ours"].append(per_accept(waiting, pending, listener.choose_eviction))
                rounds["baseline"].append(per_accept(waiting, pending, asking_every_one))
            o, b = min(rounds["ours"]), min(rounds["baseline"])
            name = f"accept_evicting_{waiting}_{'pending' if pending else 'empty'}"
            lines.append(f"{name}: ours={o * 1e6:.1f}us baseline={b * 1e6:.1f}us ratio={o / b:.3f}")
    return lines


def attacked(n: int) -> list[str]:
    """The run in a process of its own, its agent timing `wfa`, this process attacking its socket."""
    with tempfile.TemporaryDirectory(prefix="awf-bench-exhaustion-") as root:
        out = Path(root)
        engine = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(n), root], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
        )

        def alive() -> bool:
            return engine.poll() is None

        try:
            path = awaited(out / "socket", alive)
            (out / "quiet.go").touch()
            medians = {"quiet": float(awaited(out / "quiet", alive))}
            for phase in PHASES[1:]:
                stop = threading.Event()
                stalling = threading.Thread(target=stall, args=(path, STALLED, stop, phase == "reopened"), daemon=True)
                stalling.start()
                time.sleep(1.0)
                (out / f"{phase}.go").touch()
                medians[phase] = float(awaited(out / phase, alive))
                stop.set()
                stalling.join()
                time.sleep(0.5)
            before = rss_bytes(engine.pid)
            held = flood(path, FLOODING)
            time.sleep(0.5)
            after = rss_bytes(engine.pid)
            for sock in held:
                sock.close()
            (out / "end").touch()
            if engine.wait(60) != 0:
                sys.exit(f"the run exited {engine.returncode}")
        finally:
            if engine.poll() is None:
                engine.kill()
                engine.wait()
    quiet = medians["quiet"]
    lines = []
    for phase in ("stalled", "reopened"):
        name = f"wfa_tool_noop_under_{STALLED}_stalls{'_reopened' if phase == 'reopened' else ''}"
        lines.append(f"{name}: ours={medians[phase]:.5f} baseline={quiet:.5f} ratio={medians[phase] / quiet:.2f}")
    lines.append(
        f"run_rss_after_{FLOODING}x2MiB: ours={after / 2**20:.1f}MiB baseline={before / 2**20:.1f}MiB ratio={after / before:.2f}"
    )
    return lines


def main(argv: list[str]) -> None:
    if argv[:1] == ["--serve"]:
        serve(argv[1], argv[2])
        return
    if argv[:1] == ["--client"]:
        client(int(argv[1]), Path(argv[2]))
        return
    if argv == ["--evict"]:
        print("\n".join(eviction_lines()))
        return
    print("\n".join(attacked(int(argv[0]) if argv else 50)))
    print("\n".join(eviction_lines()))


if __name__ == "__main__":
    main(sys.argv[1:])
