"""The real claude TUI in a tmux pane of the agent's own, offline against a scripted model."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Literal

import anyio
import msgspec
import pytest

import agentswf
from agentswf import workflow
from agentswf.engine import turn
from agentswf.harnesses.pane import pane_socket
from agentswf.testing.models import SHELL_ARGUMENTS, Conversation, ScriptedModel, Shell, Text, Tool
from agentswf.wire.prompts import NUDGE_TEXT

from ..clis import TAUGHT
from .kit import alive, claude_pane, needs_claude_and_tmux

pytestmark = [pytest.mark.anyio, needs_claude_and_tmux]


@pytest.fixture(params=["asyncio"])
def anyio_backend(request):
    return request.param  # a real TUI per test: once, on asyncio, is enough here


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    verdict: Literal["approve", "reject"]


OPERATOR_PROBE = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(open(sys.argv[1]).read().strip())
s.sendall(json.dumps({"command": "pending"}).encode() + b"\\n")
s.shutdown(socket.SHUT_WR)
data = b""
while chunk := s.recv(65536):
    data += chunk
open(sys.argv[2], "w").write(data.decode())
"""


SCENARIO = re.compile(r"SCENARIO ([\w-]+)")


def plan(conv: Conversation, out: Path) -> list[str]:
    """The shell commands the scripted model has claude run, by the scenario its session began with."""
    found = TAUGHT.search(conv.prompt)
    if not found:
        return []
    wfa, call = found.groups()
    scenario_found = SCENARIO.search(conv.prompt) or SCENARIO.search(str(conv.history))
    scenario = scenario_found.group(1) if scenario_found else ""
    commands = [f'echo "$TMUX" >{out}/tmux.env']
    if scenario.startswith("silent"):
        if NUDGE_TEXT not in conv.prompt:
            return commands  # the first prompt: works, then stops without an answer
        (out / "check-in.txt").write_text(conv.prompt)
        if scenario == "silent-waits":
            return [f"{wfa} waiting {call} --reason 'the build runs' >{out}/waiting.out", f"{wfa} result {call} --verdict approve"]
        if scenario == "silent-hangs":
            return [f"echo $$ >{out}/shell.pid; sleep 1000"]
        return []  # a check-in read, and answered with prose only
    if scenario == "operator":
        commands.append(f"{sys.executable} {out}/probe.py {out}/control {out}/operator.json")
    if scenario == "hang" or (scenario == "hang-once" and "SCENARIO hang-once 0" in conv.prompt):
        return [*commands, f"echo $$ >{out}/shell.pid; sleep 1000"]
    return [*commands, f"{wfa} result {call} --verdict approve"]


def script_for(out: Path):
    def script(conv: Conversation):
        if not set(conv.tools) & set(SHELL_ARGUMENTS):  # claude 2.1.312's TUI sends the prompt once with no tools
            return Text("Noted.")
        if "SCENARIO write" in conv.prompt and not conv.tool_results:  # a tool claude's pane must ask for
            return Tool("Write", {"file_path": str(out / "written.txt"), "content": "hello\n"})
        commands = plan(conv, out)
        done = len(conv.tool_results)
        return Shell(commands[done]) if done < len(commands) else Text("Finished.")

    return script


async def run_pane(tmp_path: Path, scenario: str, *, timeout: float = 90, turns: int = 1, fail_status: int | None = None):
    (tmp_path / "probe.py").write_text(OPERATOR_PROBE)
    async with ScriptedModel(script_for(tmp_path), fail_status=fail_status) as model:
        runtime = claude_pane(model, tmp_path / "home")

        @workflow(name=f"pane-{scenario}", description="claude in a pane.")
        async def flow(wf):
            (tmp_path / "control").write_text(json.loads((wf.run_dir / "run.json").read_text())["control"])
            agent = await wf.agents.open("claude", runtime=runtime)
            out = []
            for n in range(turns):
                turn = await agent.run(f"SCENARIO {scenario} {n}. Review the change.", schema=Verdict, timeout=timeout)
                out.append(msgspec.to_builtins(turn))
            return out

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    return result, model


def server_pid(tmp_path: Path) -> int:
    """The agent's tmux server, from $TMUX as the pane's shell saw it: socket,pid,session."""
    return int((tmp_path / "tmux.env").read_text().strip().split(",")[1])


async def test_a_turn_in_a_pane_is_answered_and_nothing_is_left(tmp_path):
    result, _ = await run_pane(tmp_path, "answer")
    (turn,) = result.value
    assert turn["outcome"] == {"kind": "answered", "value": {"verdict": "approve"}}, turn
    assert turn["session"]
    assert not alive(server_pid(tmp_path))
    usage = turn["usage"]  # from the transcript: 3 responses (2 commands, the last words) of 100 in, 20 out
    assert (usage["input_tokens"], usage["output_tokens"], usage["model"]) == (300, 60, "claude-opus-5-5"), usage
    assert result.usage.total.output_tokens == 60 and result.usage.turns == 1  # the Ledger counts it


async def test_the_pane_is_kept_across_turns(tmp_path):
    result, _ = await run_pane(tmp_path, "answer", turns=2)
    assert [turn["outcome"]["kind"] for turn in result.value] == ["answered", "answered"]
    assert result.value[0]["session"] == result.value[1]["session"]
    assert len({line for line in (tmp_path / "tmux.env").read_text().splitlines()}) == 1  # one server


async def test_the_operator_socket_refuses_a_panes_shell(tmp_path):
    result, _ = await run_pane(tmp_path, "operator")
    assert result.value[0]["outcome"]["kind"] == "answered"
    answer = json.loads((tmp_path / "operator.json").read_text())
    assert answer["value"] == {"code": "wrong-agent"}, answer


async def watch_from_a_second_client(tmp_path: Path, record: Path) -> tuple[str, str]:
    """`awf attach` (read-only) in a tmux of the test's own, once the agent hangs: what the
    viewer showed, and the agent's own screen after the viewer typed into it."""
    viewer = ["tmux", "-S", str(tmp_path / "viewer.sock"), "-f", "/dev/null"]
    with anyio.fail_after(60):
        while not (tmp_path / "shell.pid").exists():
            await anyio.sleep(0.1)
    attach = f"{sys.executable} -m agentswf attach {record} claude"
    await anyio.run_process([*viewer, "new-session", "-d", "-x", "200", "-y", "50", attach])
    try:
        shown = ""
        with anyio.move_on_after(15):
            while "sleep 1000" not in shown:
                await anyio.sleep(0.2)
                shown = (await anyio.run_process([*viewer, "capture-pane", "-p"])).stdout.decode()
        await anyio.run_process([*viewer, "send-keys", "-l", "typed-by-a-watcher"])
        await anyio.sleep(1)
        agent = ["tmux", "-S", str(pane_socket(Path(json.loads((record / "run.json").read_text())["control"]).parent, "claude"))]
        seen = (await anyio.run_process([*agent, "capture-pane", "-p", "-t", "agent"])).stdout.decode()
        return shown, seen
    finally:
        await anyio.run_process([*viewer, "kill-server"], check=False)


async def test_a_deadline_ends_the_turn_with_the_panes_processes_gone_and_a_watcher_saw_it(tmp_path):
    (tmp_path / "probe.py").write_text(OPERATOR_PROBE)
    async with ScriptedModel(script_for(tmp_path)) as model:
        runtime = claude_pane(model, tmp_path / "home")

        @workflow(name="pane-hang", description="claude in a pane, hanging, watched.")
        async def flow(wf):
            agent = await wf.agents.open("claude", runtime=runtime)
            async def watch() -> None:
                watched.append(await watch_from_a_second_client(tmp_path, wf.run_dir))

            async with anyio.create_task_group() as group:
                group.start_soon(watch)
                turn = await agent.run("SCENARIO hang. Review the change.", schema=Verdict, timeout=25)
            return msgspec.to_builtins(turn)

        watched: list[tuple[str, str]] = []
        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    assert result.value["outcome"]["kind"] == "timed-out"
    assert not alive(int((tmp_path / "shell.pid").read_text()))
    assert not alive(server_pid(tmp_path))
    ((shown, seen),) = watched
    assert "sleep 1000" in shown  # the watcher saw the agent's screen
    assert "typed-by-a-watcher" not in seen  # read-only: nothing it typed reached the agent


@pytest.fixture
def quick_check_ins(monkeypatch):
    """Check-ins on a test's time: a second's quiet, a few seconds' response window."""
    monkeypatch.setattr(turn, "DEFAULT_LIVENESS", turn.Liveness(quiet=1.0, response=6.0))


async def test_a_silent_turn_is_checked_in_on_and_the_agent_waits_then_answers(tmp_path, quick_check_ins):
    result, _ = await run_pane(tmp_path, "silent-waits")
    (turn_,) = result.value
    assert turn_["outcome"]["kind"] == "answered" and turn_["nudged"], turn_
    check_in = (tmp_path / "check-in.txt").read_text()
    assert "waiting" in check_in and "The fixed answer deadline is" in check_in
    granted = (tmp_path / "waiting.out").read_text()
    assert granted.startswith("wfa: waiting granted until ") and "the turn's deadline is" in granted


async def test_a_check_in_answered_with_prose_only_is_unanswered(tmp_path, quick_check_ins):
    result, _ = await run_pane(tmp_path, "silent")
    assert result.value[0]["outcome"] == {"kind": "unanswered", "reason": turn.CHECK_IN_UNANSWERED}
    assert not alive(server_pid(tmp_path))


async def test_a_received_check_in_with_no_reply_in_its_window_is_unanswered(tmp_path, quick_check_ins):
    result, _ = await run_pane(tmp_path, "silent-hangs")
    assert result.value[0]["outcome"] == {"kind": "unanswered", "reason": turn.CHECK_IN_UNANSWERED}
    assert not alive(int((tmp_path / "shell.pid").read_text()))
    assert not alive(server_pid(tmp_path))


async def test_a_permission_prompt_on_screen_ends_the_turn_blocked_with_the_screen(tmp_path):
    result, _ = await run_pane(tmp_path, "write")
    outcome = result.value[0]["outcome"]
    assert outcome["kind"] == "blocked", outcome
    assert "held by a prompt on its screen" in outcome["reason"] and "written.txt" in outcome["reason"]
    assert not (tmp_path / "written.txt").exists()
    record = [json.loads(line) for line in next((tmp_path / "runs").rglob("turns.jsonl")).read_text().splitlines()]
    assert record[-1]["outcome"]["reason"] == outcome["reason"]  # kept in the record


async def test_a_rejected_api_key_fails_the_turn_for_good(tmp_path):
    result, _ = await run_pane(tmp_path, "answer", fail_status=401, timeout=60)
    outcome = result.value[0]["outcome"]
    assert outcome["kind"] == "failed" and not outcome["retryable"], outcome
    assert "isn't logged in" in outcome["reason"]


async def test_after_a_deadline_the_next_turn_starts_the_pane_again_on_the_same_session(tmp_path):
    result, model = await run_pane(tmp_path, "hang-once", timeout=20, turns=2)
    first, second = result.value
    assert first["outcome"]["kind"] == "timed-out"
    assert second["outcome"] == {"kind": "answered", "value": {"verdict": "approve"}}, second
    assert second["session"]  # the cancelled first attempt reported none; the pane kept its id
    resumed = [r for r in model.requests if r.conversation and "SCENARIO hang-once 1" in r.conversation.prompt]
    assert resumed and any("SCENARIO hang-once 0" in str(item) for item in resumed[0].conversation.history)
    assert len(set((tmp_path / "tmux.env").read_text().splitlines())) == 1  # the last server's; it is gone too
    assert not alive(server_pid(tmp_path))
