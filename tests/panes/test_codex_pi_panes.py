"""The real codex and pi TUIs in tmux panes of the agent's own, offline against a scripted model.

Neither confirms delivery, so the older rule holds: a silent turn is nudged once, then
`unanswered`, and `wfa waiting` is refused `unsupported-command`. After every ending nothing
of the agent is left: no tmux server, no TUI, no shell, no codex daemon.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Literal

import msgspec
import pytest

import agentswf
from agentswf import workflow
from agentswf.testing.models import Conversation, ScriptedModel, Shell, Text
from agentswf.testing.models.script import SHELL_ARGUMENTS
from agentswf.wire.prompts import NUDGE_TEXT

from ..clis import TAUGHT
from .kit import alive, needs, needs_tmux, pane_runtime, processes_with

pytestmark = [pytest.mark.anyio, needs_tmux]
CLIS = [pytest.param("codex", marks=needs("codex")), pytest.param("pi", marks=needs("pi"))]
SCENARIO = re.compile(r"SCENARIO ([\w-]+)")
HANG_SECONDS = 10  # a hung turn's deadline: codex gives up waiting on a command after 10 s of its own


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    verdict: Literal["approve", "reject"]


def plan(conv: Conversation, out: Path) -> list[str]:
    """The shell commands the scripted model has the TUI run, by the scenario its session began with."""
    found = TAUGHT.search(conv.prompt)
    if not found:
        return []
    wfa, call = found.groups()
    scenario_found = SCENARIO.search(conv.prompt) or SCENARIO.search(str(conv.history))
    scenario = scenario_found.group(1) if scenario_found else ""
    commands = [f'echo "$TMUX" >{out}/tmux.env']
    answer = f"{wfa} result {call} --verdict approve"
    if scenario.startswith("silent"):
        if NUDGE_TEXT not in conv.prompt:
            return commands  # the first prompt: works, then stops without an answer
        if scenario == "silent-twice":
            return []
        return [f"{wfa} waiting {call} --reason 'the build runs' >{out}/waiting.out 2>&1; echo $? >>{out}/waiting.out",
                answer]  # fmt: skip
    if scenario == "hang":
        return [*commands, f"echo $$ >{out}/shell.pid; sleep 1000"]
    return [*commands, answer]


def script_for(out: Path):
    def script(conv: Conversation):
        if not set(conv.tools) & set(SHELL_ARGUMENTS):  # codex asking for its session's title
            return Text("Review the change")
        commands = plan(conv, out)
        done = len(conv.tool_results)
        return Shell(commands[done]) if done < len(commands) else Text("Finished.")

    return script


async def run_pane(cli: str, tmp_path: Path, scenario: str, *, timeout: float = 90, turns: int = 1, **runtime):
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", str(work)], check=True)  # codex asks to trust a git folder first
    async with ScriptedModel(script_for(tmp_path)) as model:
        agent_runtime = pane_runtime(cli, model, tmp_path / "home", **runtime)

        @workflow(name=f"pane-{cli}-{scenario}", description="A TUI in a pane.")
        async def flow(wf):
            agent = await wf.agents.open(cli, runtime=agent_runtime)
            out = []
            for n in range(turns):
                turn = await agent.run(f"SCENARIO {scenario} {n}. Review the change.", schema=Verdict, timeout=timeout)
                out.append(msgspec.to_builtins(turn))
            return out

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=work)
    assert result.outcome == "completed", result.reason
    return result, model


def nothing_left(tmp_path: Path) -> None:
    """No process of the agent's (its tmux server, the TUI, its shells) is running."""
    assert processes_with(tmp_path / "home") == []
    if (tmp_path / "tmux.env").exists():
        assert not alive(int((tmp_path / "tmux.env").read_text().strip().split(",")[1]))


@pytest.mark.parametrize("cli", CLIS)
async def test_a_turn_in_a_pane_is_answered_and_the_pane_kept_across_turns(cli, tmp_path):
    result, _ = await run_pane(cli, tmp_path, "answer", turns=2)
    first, second = result.value
    assert first["outcome"] == {"kind": "answered", "value": {"verdict": "approve"}}, first
    assert second["outcome"]["kind"] == "answered", second
    assert first["session"] and first["session"] == second["session"]  # found in its session file, resumed
    assert len(set((tmp_path / "tmux.env").read_text().splitlines())) == 1  # one server for both turns
    for turn in (first, second):  # from its session file: each response 100 in, 20 out, the turn's own only
        usage = turn["usage"]
        assert usage["output_tokens"] in (40, 60) and usage["input_tokens"] == 5 * usage["output_tokens"], usage
    assert result.usage.total.output_tokens == first["usage"]["output_tokens"] + second["usage"]["output_tokens"]
    nothing_left(tmp_path)


@pytest.mark.parametrize("cli", CLIS)
async def test_a_silent_turn_is_nudged_once_and_wfa_waiting_is_refused(cli, tmp_path):
    result, _ = await run_pane(cli, tmp_path, "silent")
    (turn,) = result.value
    assert turn["outcome"]["kind"] == "answered" and turn["nudged"], turn
    refused = (tmp_path / "waiting.out").read_text()
    assert "unsupported-command" in refused and refused.split()[-1] == "1", refused
    nothing_left(tmp_path)


@pytest.mark.parametrize("cli", CLIS)
async def test_a_nudge_answered_with_prose_only_is_unanswered(cli, tmp_path):
    result, _ = await run_pane(cli, tmp_path, "silent-twice")
    outcome = result.value[0]["outcome"]
    assert outcome["kind"] == "unanswered" and "after a nudge" in outcome["reason"], outcome
    nothing_left(tmp_path)


@pytest.mark.parametrize("cli", CLIS)
async def test_a_deadline_ends_the_turn_with_the_panes_processes_gone(cli, tmp_path):
    result, _ = await run_pane(cli, tmp_path, "hang", timeout=HANG_SECONDS)
    assert result.value[0]["outcome"]["kind"] == "timed-out", result.value
    shell = tmp_path / "shell.pid"  # on a loaded machine the deadline may come before the shell started
    assert not shell.exists() or not alive(int(shell.read_text()))
    nothing_left(tmp_path)


@pytest.mark.parametrize("cli", CLIS)
async def test_a_tui_that_isnt_logged_in_fails_the_turn_for_good(cli, tmp_path):
    if cli == "codex":  # no provider of its own: codex's sign-in menu
        signed_out = tmp_path / "signed-out"
        signed_out.mkdir()
        (signed_out / "config.toml").write_text("check_for_update_on_startup = false\n[features]\nplugins = false\n")
        env = {"CODEX_HOME": str(signed_out)}
    else:  # no provider it has a key for: pi answers the prompt with /login
        signed_out = tmp_path / "signed-out"
        signed_out.mkdir()
        env = {"PI_CODING_AGENT_DIR": str(signed_out)}
    result, model = await run_pane(cli, tmp_path, "answer", timeout=60, env=env, model=None)
    outcome = result.value[0]["outcome"]
    assert outcome["kind"] == "failed" and not outcome["retryable"], outcome
    assert "isn't logged in" in outcome["reason"] and not result.value[0]["nudged"]
    assert not any(request.conversation for request in model.requests)
    nothing_left(tmp_path)
