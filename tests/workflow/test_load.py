"""Load never ends a run: thousands of agents at once, many tool calls at once, a flood of wf.log.

Before: 500 agents in one `wf.parallel` crashed the run (a `tell_nowait` of each agent's
state filled the switchboard's mailbox), 150 agents answering at once hung it (the scripted
client and the Recorder shared anyio's 40 worker threads), more than 64 agents calling at
once were refused `internal-error` (a fixed connection budget for the whole run), and
wf.log dropped lines once the Recorder fell behind.

The record and the sockets go on /dev/shm where there is one, only to keep these fast.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from agentswf import tool, workflow
from agentswf.engine import run as run_module
from agentswf.engine.mail import switchboard
from agentswf.engine.record.layout import SYNC_FDS_AT_ONCE, read_lines
from agentswf.testing import answer, run_workflow

pytestmark = pytest.mark.anyio

MANY_AGENTS = 2000
CALLING_AGENTS = 200
CALLS_EACH = 10
LOG_LINES = 3000  # well past the Recorder's mailbox (1,024)


@pytest.fixture
def fast_root(monkeypatch) -> Iterator[Path]:
    shm = Path("/dev/shm")
    fast = shm.is_dir() and os.access(shm, os.W_OK)
    if fast:
        monkeypatch.setenv("TMPDIR", str(shm))  # where the run's sockets go
    with tempfile.TemporaryDirectory(prefix="awf-load-", dir=shm if fast else None) as root:
        yield Path(root)


@tool(description="Echo a number.")
def echo(n: int) -> int:
    return n


@workflow(name="crowd", description="Many agents at once.")
async def crowd(wf, args: dict):
    async def one(i: int) -> str:
        tools = {"echo": echo} if args["calls"] else None
        agent = await wf.agents.open(f"a{i}", runtime="codex", tools=tools)
        return (await agent.run("Go.", timeout="300s", nudge=False)).outcome.kind

    return await wf.parallel(list(range(args["agents"])), one, concurrency=args["agents"])


async def test_2000_agents_in_one_parallel_all_answer_with_no_refusal(fast_root):
    responses = []

    async def play(turn):
        responses.append(await turn.result("ok"))

    agents = {f"a{i}": answer(play) for i in range(MANY_AGENTS)}
    run = await run_workflow(crowd, agents=agents, args={"agents": MANY_AGENTS, "calls": 0}, run_root=fast_root)
    assert run.value == ["answered"] * MANY_AGENTS
    assert [r.code for r in responses if not r.ok] == []


async def test_200_agents_calling_tools_at_once_all_complete(fast_root):
    answers = []

    async def play(turn):
        for n in range(CALLS_EACH):
            answers.append(await turn.tool("echo", {"n": n}))
        return "ok"

    agents = {f"a{i}": answer(play) for i in range(CALLING_AGENTS)}
    run = await run_workflow(crowd, agents=agents, args={"agents": CALLING_AGENTS, "calls": 1}, run_root=fast_root)
    assert run.value == ["answered"] * CALLING_AGENTS
    assert len(answers) == CALLING_AGENTS * CALLS_EACH
    assert all(a.kind == "result" for a in answers), [a for a in answers if a.kind != "result"][:3]
    assert len(list(read_lines(run.run_dir / "tools.jsonl"))) == CALLING_AGENTS * CALLS_EACH


@workflow(name="chatty", description="Logs faster than any disk.")
async def chatty(wf):
    for n in range(LOG_LINES):
        wf.log("line", n=n)
    return LOG_LINES


async def test_wf_log_never_drops_a_line_however_far_behind_the_record_is(tmp_path):
    run = await run_workflow(chatty, agents={}, run_root=tmp_path)
    assert run.value == LOG_LINES
    assert [line["fields"]["n"] for line in run.logs] == list(range(LOG_LINES))


TINY_AGENTS = 40


@tool(description="Outlasts its turn.", timeout=False)
async def slow(n: int) -> int:
    await anyio.sleep(10)
    return n


@workflow(name="tiny", description="Every mailbox of the run holds one message.")
async def tiny(wf):
    async def one(i: int) -> str:
        agent = await wf.agents.open(f"a{i}", runtime="codex", tools={"slow": slow, "echo": echo})
        if i % 4 == 0:  # a quarter say hello: fewer than the workflow's inbox holds unread
            await wf.route(agent, wf, purpose="Say hello")
        wf.log("opened", i=i)
        return (await agent.run("Go.", timeout="20s" if i % 2 == 0 else "1s", nudge=False)).outcome.kind

    kinds = await wf.parallel(list(range(TINY_AGENTS)), one, concurrency=TINY_AGENTS)
    heard = sorted([(await wf.receive()).sender for _ in range(TINY_AGENTS // 4)])
    return {"kinds": kinds, "heard": heard}


async def test_a_run_whose_every_mailbox_holds_one_message_still_completes(tmp_path, monkeypatch):
    """Only backpressure and coalescing are left: a tell that can't wait would overflow at once."""
    for name in ("RUN_MAILBOX_CAPACITY", "RECORDER_MAILBOX_CAPACITY", "AGENT_MAILBOX_CAPACITY"):
        monkeypatch.setattr(run_module, name, 1)
    monkeypatch.setattr(switchboard, "ROUTE_MAILBOX_CAPACITY", 1)

    async def play(turn):
        for n in range(3):
            assert (await turn.tool("echo", {"n": n})).kind == "result"
        i = int(turn.agent[1:])
        if i % 4 == 0:
            assert (await turn.send("workflow", "hello")).ok
        if i % 2 == 0:
            return "ok"
        await turn.tool("slow", {"n": 1})  # its turn ends (1 s) while the call runs: the call is cancelled

    agents = {f"a{i}": answer(play) for i in range(TINY_AGENTS)}
    with anyio.fail_after(30):
        run = await run_workflow(tiny, agents=agents, run_root=tmp_path)
    assert run.value["kinds"] == ["answered", "timed-out"] * (TINY_AGENTS // 2)
    assert run.value["heard"] == sorted(f"a{i}" for i in range(0, TINY_AGENTS, 4))
    assert len([line for line in run.logs if line["message"] == "opened"]) == TINY_AGENTS


IDLE_AGENTS = 200
FDS_OF_THE_RUN = 20 + SYNC_FDS_AT_ONCE  # descriptors the run itself may open meanwhile (its record's files, and
# those of a group commit under way as the last turn ends), whatever the agents


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@workflow(name="idle", description="Agents opened, then a turn each, then idle again.")
async def idle(wf):
    before = open_fds()
    agents = [await wf.agents.open(f"a{i}", runtime="codex") for i in range(IDLE_AGENTS)]
    opened = open_fds()
    kinds = await wf.parallel(agents, lambda agent: agent.run("Go.", timeout="60s", nudge=False), concurrency=50)
    return {"before": before, "opened": opened, "after": open_fds(), "answered": sum(t.outcome.answered for t in kinds)}


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc/self/fd")
async def test_an_idle_agent_holds_no_file_descriptor(fast_root):
    """Its socket listens only while it is in a turn: fds grow with what is active, not with what is open."""
    run = await run_workflow(idle, agents={f"a{i}": answer("ok") for i in range(IDLE_AGENTS)}, run_root=fast_root)
    value = run.value
    assert value["answered"] == IDLE_AGENTS
    assert value["opened"] - value["before"] < FDS_OF_THE_RUN, value
    assert value["after"] - value["before"] < FDS_OF_THE_RUN, value
