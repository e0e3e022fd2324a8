"""Where handlers run: a blocking sync handler freezes nothing, one ignoring its signal is
abandoned (and the run's end doesn't wait for it), and nothing a handler raises ends the run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
import structlog

from agentswf import ToolCall, tool, workflow
from agentswf.harnesses.keeper import KILL_PATIENCE_SECONDS, marked
from agentswf.testing import ToolFailed, ToolResult, answer, run_workflow
from agentswf.workflow.running import CANCEL_CLEANUP_SECONDS

from .kit import call_tool, shell_agent, tool_lines

pytestmark = pytest.mark.anyio
ENDED_WITHIN_SECONDS = 3.0  # past the run's grace after Ctrl-C, for awf run to exit


def _wf(fn):
    return workflow(name="t", description="A test workflow.")(fn)


async def test_a_blocking_sync_handler_freezes_no_other_agent(tmp_path):
    started = threading.Event()
    took: dict[str, float] = {}

    def block() -> str:
        took["started"] = time.monotonic()
        started.set()
        time.sleep(2)  # blocks its worker thread, not the run
        return "woke"

    async def blocker(turn):
        assert await turn.tool("block") == ToolResult(output="woke")
        return "a"

    async def other(turn):
        assert await anyio.to_thread.run_sync(started.wait, 10)
        await turn.peers()
        took["peers"] = time.monotonic() - took["started"]  # answered while the handler sleeps
        return "b"

    async def fn(wf):
        a = await wf.agents.open("a", runtime="shell:true", tools={"block": tool(block, description="Blocks.")})
        b = await wf.agents.open("b", runtime="shell:true")
        turns = await wf.parallel([a, b], lambda agent: agent.run("Go.", timeout=20))
        return [turn.outcome.value for turn in turns]

    run = await run_workflow(_wf(fn), agents={"a": answer(blocker), "b": answer(other)}, run_root=tmp_path)
    assert run.value == ["a", "b"]
    assert took["peers"] < 1.0, took  # 2 s when the handler ran on the loop


class Halt(BaseException):
    """A BaseException of the workflow's own."""


def _raising(error: BaseException):
    def sync() -> str:
        raise error

    async def asynchronous() -> str:
        await anyio.lowlevel.checkpoint()
        raise error

    return sync, asynchronous


@pytest.mark.parametrize(
    "error, shown",
    [
        (SystemExit(3), "SystemExit(3)"),
        (KeyboardInterrupt(), "KeyboardInterrupt()"),
        (GeneratorExit(), "GeneratorExit()"),
        (Halt("now"), "Halt('now')"),
    ],
)
async def test_anything_a_handler_raises_fails_its_call_not_the_run(tmp_path, error, shown):
    seen = []

    async def script(turn):
        seen.append(await turn.tool("sync"))
        seen.append(await turn.tool("asynchronous"))
        return "done"

    async def fn(wf):
        sync, asynchronous = _raising(error)
        tools = {"sync": tool(sync, description="S."), "asynchronous": tool(asynchronous, description="A.")}
        agent = await wf.agents.open("a", runtime="shell:true", tools=tools)
        return (await agent.run("Go.", timeout=10)).outcome.kind

    run = await run_workflow(_wf(fn), agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == "answered"
    assert seen == [ToolFailed(outcome="failed", error=f"the handler raised {shown}")] * 2
    assert [line["outcome"] for line in tool_lines(run.run_dir)] == ["failed", "failed"]


def _stubborn(started: threading.Event, release: threading.Event):
    def stubborn(call: ToolCall) -> str:
        started.set()
        release.wait(30)  # ignores call.cancelled
        return "late"

    return stubborn


@pytest.mark.virtual_time
async def test_a_sync_handler_ignoring_its_signal_is_abandoned_after_the_grace(tmp_path):
    from agentswf.engine.tools.broker import TOOL_SETTLE_GRACE_SECONDS

    started, release = threading.Event(), threading.Event()
    seen = []

    async def script(turn):
        seen.append(await turn.tool("stubborn"))
        return "done"

    async def fn(wf):
        tools = {"stubborn": tool(_stubborn(started, release), description="Ignores its signal.", timeout="1m")}
        agent = await wf.agents.open("a", runtime="shell:true", tools=tools)
        return (await agent.run("Go.", timeout="1h")).outcome.kind

    began = time.monotonic()
    try:
        run = await run_workflow(_wf(fn), agents={"a": answer(script)}, run_root=tmp_path)
        took = time.monotonic() - began
    finally:
        release.set()
    assert run.value == "answered" and took < 3, took
    [failed] = seen
    assert failed.outcome == "timed-out" and "abandoned" in failed.error and "may have run" in failed.error.lower()
    [line] = tool_lines(run.run_dir)
    assert (line["outcome"], line["code"]) == ("timed-out", "abandoned")
    # its time and the grace, not its return
    assert line["ended_at"] - line["started_at"] == pytest.approx(60 + TOOL_SETTLE_GRACE_SECONDS, abs=1)


async def test_a_cancelled_run_does_not_wait_for_a_sync_handler_and_records_it_abandoned(tmp_path):
    """In real time: the handler is a real thread, busy while the run is cancelled, which a virtual
    clock can't see; under load the clock jumped past the settle grace's end to the next deadline."""
    started, release = threading.Event(), threading.Event()

    async def script(turn):
        await turn.tool("stubborn")
        await anyio.sleep_forever()

    async def fn(wf):
        tools = {"stubborn": tool(_stubborn(started, release), description="Ignores its signal.", timeout=False)}
        agent = await wf.agents.open("a", runtime="shell:true", tools=tools)
        await agent.run("Go.", timeout=60)

    async def cancel_when_started(scope: anyio.CancelScope) -> None:
        await anyio.to_thread.run_sync(started.wait, 10)
        scope.cancel()

    began = time.monotonic()
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(cancel_when_started, group.cancel_scope)
            await run_workflow(_wf(fn), agents={"a": answer(script)}, run_root=tmp_path)
        took = time.monotonic() - began
    finally:
        release.set()
    assert took < 8, took  # the settle grace at most, never the handler's 30 s
    [run_dir] = list(tmp_path.glob("t/*"))
    assert json.loads((run_dir / "output.json").read_text())["outcome"] == "cancelled"
    [line] = tool_lines(run_dir)
    assert (line["outcome"], line["code"]) == ("timed-out", "abandoned")


@pytest.mark.virtual_time
async def test_an_async_handler_that_shields_itself_is_abandoned_at_its_time(tmp_path):
    from agentswf.engine.tools.broker import TOOL_SETTLE_GRACE_SECONDS

    async def shielded() -> str:
        with anyio.CancelScope(shield=True):
            await anyio.sleep(600)
        return "late"

    seen = []

    async def script(turn):
        seen.append(await turn.tool("shielded"))
        return "done"

    async def fn(wf):
        tools = {"shielded": tool(shielded, description="Shields itself.", timeout="1m")}
        agent = await wf.agents.open("a", runtime="shell:true", tools=tools)
        return (await agent.run("Go.", timeout="1h")).outcome.kind

    started = anyio.current_time()
    with structlog.testing.capture_logs() as logs:
        run = await run_workflow(_wf(fn), agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == "answered"
    [warned] = [entry for entry in logs if entry["event"] == "a tool handler ignored its signal and was abandoned"]
    assert "the run's end waits for it" in warned["runs_on"]
    assert seen[0].outcome == "timed-out" and "abandoned" in seen[0].error and "ignored its signal" in seen[0].error
    [line] = tool_lines(run.run_dir)
    assert (line["outcome"], line["code"]) == ("timed-out", "abandoned")
    # answered at its time and grace; the run waited for the rest
    assert line["ended_at"] - line["started_at"] == pytest.approx(60 + TOOL_SETTLE_GRACE_SECONDS, abs=1)
    assert anyio.current_time() - started >= 600


CLI_FLOW = '''
import time
from pathlib import Path
from agentswf import tool, workflow

def stubborn() -> str:
    Path({started!r}).write_text("started")
    time.sleep(60)
    return "late"

@workflow(name="stuck", description="A handler that ignores its signal.")
async def stuck(wf):
    agent = await wf.agents.open("a", runtime={runtime!r}, tools={{"stubborn": tool(stubborn, description="S.", timeout=False)}})
    await agent.run("Call it.", timeout="1h")
'''


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_ctrl_c_of_awf_run_does_not_wait_for_an_abandoned_handler(tmp_path: Path, backend: str) -> None:
    started = tmp_path / "started"
    runtime = shell_agent(tmp_path, "a", call_tool("stubborn", "stubborn") + "\nsleep 100")
    flow = tmp_path / "flow.py"
    flow.write_text(CLI_FLOW.format(started=str(started), runtime=runtime))
    process = subprocess.Popen(
        [sys.executable, "-m", "agentswf", "run", str(flow), "--backend", backend],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert started.exists()
    interrupted = time.monotonic()
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    took = time.monotonic() - interrupted
    assert process.returncode == 130, stderr
    assert took < 8, took  # the settle grace at most, never the handler's 60 s
    run_dir = next(tmp_path.glob(".awf/runs/stuck/*"))
    assert json.loads((run_dir / "output.json").read_text())["outcome"] == "cancelled"
    [line] = tool_lines(run_dir)
    assert (line["outcome"], line["code"]) == ("timed-out", "abandoned")


async def test_a_sync_handler_logs_from_its_worker_thread(tmp_path):
    workflows = {}

    def noted(item: str) -> str:
        workflows["wf"].log("noted", item=item)
        return "ok"

    async def script(turn):
        assert await turn.tool("noted", {"item": "one"}) == ToolResult(output="ok")
        return "done"

    async def fn(wf):
        workflows["wf"] = wf
        agent = await wf.agents.open("a", runtime="shell:true", tools={"noted": tool(noted, description="N.")})
        return (await agent.run("Go.", timeout=10)).outcome.kind

    with anyio.fail_after(10):
        run = await run_workflow(_wf(fn), agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == "answered"
    assert [(line["message"], line["fields"]) for line in run.logs] == [("noted", {"item": "one"})]


SHIELDED_FLOW = '''
from pathlib import Path
import anyio
from agentswf import tool, workflow

async def shielded() -> str:
    Path({started!r}).write_text("started")
    with anyio.CancelScope(shield=True):
        await anyio.sleep(60)
    return "late"

@workflow(name="shielded", description="A handler that shields itself from cancellation.")
async def stuck(wf):
    agent = await wf.agents.open("a", runtime={runtime!r}, tools={{"shielded": tool(shielded, description="S.", timeout=False)}})
    await agent.run("Call it.", timeout="1h")
'''


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_ctrl_c_ends_awf_run_within_its_grace_whatever_an_async_handler_does(tmp_path: Path, backend: str) -> None:
    started = tmp_path / "started"
    agent = 'echo "$AGENTSWF_MARK" >"$OUT/mark"; echo "$WFA" >"$OUT/wfa"\n' + call_tool("shielded", "shielded") + "\nsleep 100"
    flow = tmp_path / "flow.py"
    flow.write_text(SHIELDED_FLOW.format(started=str(started), runtime=shell_agent(tmp_path, "a", agent)))
    process = subprocess.Popen(
        [sys.executable, "-m", "agentswf", "run", str(flow), "--backend", backend],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert started.exists()
        interrupted = time.monotonic()
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=CANCEL_CLEANUP_SECONDS + ENDED_WITHIN_SECONDS)
        took = time.monotonic() - interrupted
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    assert took < CANCEL_CLEANUP_SECONDS + ENDED_WITHIN_SECONDS, took  # its grace, never the handler's 60 s
    assert "awf ends without it" in stderr and "awf: interrupted" in stderr and "Traceback" not in stderr, stderr
    run_dir = next(tmp_path.glob(".awf/runs/shielded/*"))
    assert json.loads((run_dir / "output.json").read_text())["outcome"] == "cancelled"
    [line] = tool_lines(run_dir)
    assert (line["outcome"], line["code"]) == ("timed-out", "abandoned")
    run_mark = (tmp_path / "mark").read_text().strip().split("/")[0]
    sockets = Path((tmp_path / "wfa").read_text().strip()).parent.parent  # the run's directory of sockets
    deadline = time.monotonic() + KILL_PATIENCE_SECONDS  # the keepers' and the watchdog's passes, as after kill -9
    while (marked(run_mark) or sockets.exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marked(run_mark) == [] and not sockets.exists()
