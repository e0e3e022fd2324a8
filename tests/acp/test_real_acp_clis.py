"""The ACP CLIs as agents, for real: each from npm (`.ci/run` pins them), offline, against a scripted model.

The scripted model reads the taught `wfa` command out of the prompt and has the CLI run it
through its own shell tool, which asks for permission over ACP first. Each test runs one CLI;
skipped, saying where it looked, when that CLI isn't installed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import msgspec
import pytest

import agentswf
from agentswf import Runtime, tool, workflow
from agentswf.testing.models import (
    SHELL_ARGUMENTS,
    Conversation,
    ScriptedModel,
    Shell,
    Text,
    copilot_env,
    find_cli,
    gemini_env,
    opencode_env,
    qwen_env,
)

from ..clis import TAUGHT
from ..harnesses.kit import alive

pytestmark = pytest.mark.anyio

HANG_SECONDS = 20  # a hanging turn's deadline: long enough for a loaded machine to start the CLI and its shell
TURN_SECONDS = 120


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    verdict: Literal["approve", "reject"]


def plan(conv: Conversation, out: Path) -> list[str]:
    """The shell commands the scripted model has the CLI run, by the scenario in its prompt."""
    found = TAUGHT.search(conv.prompt)
    if found is None or not any(name in SHELL_ARGUMENTS for name in conv.tools):
        return []  # a side request (opencode's title, qwen's schema check): answered with text
    wfa, call = found.groups()
    answer = f"{wfa} result {call} --verdict approve"
    if "SCENARIO correct" in conv.prompt:
        return [f"{wfa} result {call} --verdict maybe", answer]
    if "SCENARIO tool" in conv.prompt:
        return [f"{wfa} tool count --n 2", answer]
    if "SCENARIO hang" in conv.prompt:
        return [f"echo $$ >{out}/hang.pid; python3 -c 'import time; time.sleep(1000)'"]  # qwen refuses `sleep N`
    return [answer]


def script_for(out: Path) -> Callable[[Conversation], Shell | Text]:
    def script(conv: Conversation) -> Shell | Text:
        commands = plan(conv, out)
        done = len(conv.tool_results)
        return Shell(commands[done]) if done < len(commands) else Text("Finished.")

    return script


ENVS: dict[str, Callable[[ScriptedModel, Path], dict[str, str]]] = {
    "opencode": opencode_env, "qwen": qwen_env, "gemini": gemini_env, "copilot": copilot_env,
}
CLIS = [pytest.param(name, marks=pytest.mark.needs(name)) for name in ENVS]


def runtime(cli: str, model: ScriptedModel, home: Path) -> Runtime:
    return Runtime(harness=cli, command=(str(find_cli(cli)),), env=ENVS[cli](model, home))


async def turns(tmp_path: Path, cli: str, scenarios: list[str], timeout: float = TURN_SECONDS) -> tuple[list[dict[str, Any]], ScriptedModel, list[int]]:
    counted: list[int] = []

    def count(n: int) -> str:
        """Count to n."""
        counted.append(n)
        return f"counted {n}"

    async with ScriptedModel(script_for(tmp_path)) as model:
        agent_runtime = runtime(cli, model, tmp_path / "home")

        @workflow(name=f"acp-{cli}", description="An ACP CLI's turns.")
        async def flow(wf):
            agent = await wf.agents.open(cli, runtime=agent_runtime, tools={"count": tool(count)})
            done = []
            for scenario in scenarios:
                turn = await agent.run(f"SCENARIO {scenario}. Review the change.", schema=Verdict, timeout=timeout)
                done.append(msgspec.to_builtins(turn))
            return done

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    return result.value, model, counted


@pytest.mark.parametrize("cli", CLIS)
async def test_typed_answers_over_two_turns_the_second_resuming_with_usage_per_turn(tmp_path, cli):
    (first, second), model, _ = await turns(tmp_path, cli, ["answer", "answer"])
    for turn in (first, second):
        assert turn["outcome"]["kind"] == "answered" and turn["outcome"]["value"] == {"verdict": "approve"}, turn
        assert turn["usage"]["input_tokens"] >= 100 and turn["usage"]["output_tokens"] >= 20, turn["usage"]
    assert first["session"] == second["session"]
    last = [r for r in model.requests if r.conversation is not None and TAUGHT.search(r.conversation.prompt)][-1]
    assert sum("SCENARIO answer" in str(item) for item in last.conversation.history) == 2  # turn 1's history came back


@pytest.mark.parametrize("cli", CLIS)
async def test_a_refused_answer_is_corrected_in_the_same_turn(tmp_path, cli):
    (turn,), model, _ = await turns(tmp_path, cli, ["correct"])
    assert turn["outcome"]["kind"] == "answered" and turn["outcome"]["value"] == {"verdict": "approve"}, turn
    assert any("invalid-result" in t for r in model.requests if r.conversation for t in r.conversation.tool_results)


@pytest.mark.parametrize("cli", CLIS)
async def test_a_tool_call(tmp_path, cli):
    (turn,), _, counted = await turns(tmp_path, cli, ["tool"])
    assert turn["outcome"]["kind"] == "answered", turn
    assert counted == [2]


@pytest.mark.parametrize("cli", CLIS)
async def test_a_stop_mid_turn_leaves_nothing_running(tmp_path, cli):
    (turn,), _, _ = await turns(tmp_path, cli, ["hang"], timeout=HANG_SECONDS)
    assert turn["outcome"]["kind"] == "timed-out", turn
    assert not alive(int((tmp_path / "hang.pid").read_text()))
