"""claude, codex and pi as agents, for real: the CLIs from npm, offline, against a scripted model.

Each scenario is one run with the three CLIs side by side (in `wf.parallel`), each played by
the same script: the scripted model reads the taught `wfa` command out of the prompt and
has the CLI run it through its own shell tool. Skipped, saying where it looked, when the
CLIs aren't installed (`.ci/run` installs them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import msgspec
import pytest

import agentswf
from agentswf import Runtime, tool, workflow
from agentswf.testing.models import (
    Conversation,
    ScriptedModel,
    Shell,
    Text,
    claude_env,
    codex_env,
    find_cli,
    pi_env,
)
from agentswf.wire.prompts import NUDGE_TEXT

from ..clis import CLIS, TAUGHT, needs_clis
from .kit import alive

pytestmark = [
    pytest.mark.anyio,
    needs_clis,
]

HANG_SECONDS = 8  # long enough for a loaded machine to start all three CLIs and their shells


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    verdict: Literal["approve", "reject"]


def plan(conv: Conversation, out: Path) -> list[str]:
    """The shell commands the scripted model has this CLI run, by the scenario in its prompt."""
    found = TAUGHT.search(conv.prompt)
    assert found, f"no taught wfa result in: {conv.prompt[:300]}"
    wfa, call = found.groups()
    answer = f"{wfa} result {call} --verdict approve"
    if "SCENARIO correct" in conv.prompt:
        return [f"{wfa} result {call} --verdict maybe", answer]
    if "SCENARIO tool" in conv.prompt:
        return [f"{wfa} tool count --n 2", answer]
    if "SCENARIO silent" in conv.prompt and NUDGE_TEXT not in conv.prompt:
        return []
    if "SCENARIO stray" in conv.prompt:  # claude and pi start each shell command in a session of its own
        return [f"(sleep 300 & echo $! >{out}/$WFA_AGENT.stray)", answer]
    if "SCENARIO hang" in conv.prompt:
        return [f"echo $$ >{out}/$WFA_AGENT.pid; sleep 1000"]
    return [answer]


def script_for(out: Path):
    def script(conv: Conversation):
        commands = plan(conv, out)
        done = len(conv.tool_results)
        return Shell(commands[done]) if done < len(commands) else Text("Finished.")

    return script


def runtimes(model: ScriptedModel, home: Path) -> dict[str, Runtime]:
    return {
        "claude": Runtime(harness="claude", command=(find_cli("claude"),), env=claude_env(model, home / "claude")),
        "codex": Runtime(harness="codex", command=(find_cli("codex"),), env=codex_env(model, home / "codex")),
        "pi": Runtime(harness="pi", command=(find_cli("pi"),), model="fake/fake-model", env=pi_env(model, home / "pi")),
    }


async def run_scenario(tmp_path: Path, scenario: str, *, timeout: float = 60) -> tuple[agentswf.RunResult, ScriptedModel]:
    counted: list[int] = []

    def count(n: int) -> str:
        """Count to n."""
        counted.append(n)
        return f"counted {n}"

    async with ScriptedModel(script_for(tmp_path)) as model:
        agents = runtimes(model, tmp_path / "homes")

        @workflow(name=f"cli-{scenario}", description="The three CLIs, one scenario.")
        async def flow(wf):
            async def one(name: str):
                agent = await wf.agents.open(name, runtime=agents[name], tools={"count": tool(count)})
                turn = await agent.run(f"SCENARIO {scenario}. Review the change.", schema=Verdict, timeout=timeout)
                return {"kind": turn.outcome.kind, "turn": msgspec.to_builtins(turn)}

            return {**dict(zip(CLIS, await wf.parallel(CLIS, one))), "counted": counted}

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    return result, model


@pytest.fixture(params=["asyncio"])
def anyio_backend(request):
    return request.param  # each scenario runs three real CLIs; once, on asyncio, is enough here


async def test_each_cli_answers_a_typed_turn_and_reports_usage(tmp_path):
    result, model = await run_scenario(tmp_path, "answer")
    for name in CLIS:
        turn = result.value[name]["turn"]
        assert result.value[name]["kind"] == "answered", (name, turn)
        assert turn["outcome"]["value"] == {"verdict": "approve"}
        assert turn["session"], name
        assert turn["usage"]["input_tokens"] >= 100 and turn["usage"]["output_tokens"] >= 20, name
    assert {request.dialect for request in model.requests} >= {"anthropic", "responses", "chat"}


async def test_a_wrong_answer_is_refused_and_corrected_in_the_same_turn(tmp_path):
    result, model = await run_scenario(tmp_path, "correct")
    for name in CLIS:
        assert result.value[name]["kind"] == "answered", name
    refusals = [r for r in model.requests if r.conversation and any("invalid-result" in t for t in r.conversation.tool_results)]
    assert len({r.dialect for r in refusals}) == 3  # each CLI read the refusal back, then answered


async def test_each_cli_calls_a_tool(tmp_path):
    result, model = await run_scenario(tmp_path, "tool")
    assert result.value["counted"] == [2, 2, 2]
    for name in CLIS:
        assert result.value[name]["kind"] == "answered", name
    outputs = [t for r in model.requests if r.conversation for t in r.conversation.tool_results]
    assert sum("counted 2" in output for output in outputs) >= 3


async def test_a_silent_turn_is_nudged_by_resuming_the_session(tmp_path):
    result, model = await run_scenario(tmp_path, "silent")
    for name in CLIS:
        turn = result.value[name]["turn"]
        assert result.value[name]["kind"] == "answered" and turn["nudged"], (name, turn)
    nudges = [r for r in model.requests if r.conversation and NUDGE_TEXT in r.conversation.prompt]
    assert {r.dialect for r in nudges} == {"anthropic", "responses", "chat"}
    # resumed: the nudge's request carries the first attempt's conversation
    assert all(any("SCENARIO silent" in str(item) for item in r.conversation.history) for r in nudges)


async def test_a_timed_out_turn_leaves_no_cli_process(tmp_path):
    result, _ = await run_scenario(tmp_path, "hang", timeout=HANG_SECONDS)
    for name in CLIS:
        assert result.value[name]["kind"] == "timed-out", name
        pid = int((tmp_path / f"{name}.pid").read_text())
        assert not alive(pid), name  # codex runs its commands in a group of their own: the session goes too


async def test_what_a_clis_shell_backgrounds_is_gone_when_its_turn_ends(tmp_path):
    result, _ = await run_scenario(tmp_path, "stray")
    for name in CLIS:
        assert result.value[name]["kind"] == "answered", name
        pid = int((tmp_path / f"{name}.stray").read_text())
        assert not alive(pid), name


async def run_failing(tmp_path: Path, status: int) -> dict:
    """The three CLIs given one turn each, their API answering every call with `status`."""
    async with ScriptedModel(script_for(tmp_path), fail_status=status) as model:
        agents = runtimes(model, tmp_path / "homes")

        @workflow(name=f"cli-{status}", description="The three CLIs, their API failing.")
        async def flow(wf):
            async def one(name: str):
                agent = await wf.agents.open(name, runtime=agents[name])
                return msgspec.to_builtins(await agent.run("SCENARIO answer.", schema=Verdict, timeout=60))

            return dict(zip(CLIS, await wf.parallel(CLIS, one)))

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    return result.value


async def test_a_login_failure_fails_for_good_is_never_nudged_and_says_what_to_run(tmp_path):
    turns = await run_failing(tmp_path, 401)
    for name in CLIS:
        turn = turns[name]
        assert turn["outcome"]["kind"] == "failed", (name, turn)
        assert turn["outcome"]["retryable"] is False and not turn["nudged"], name
        assert "isn't logged in" in turn["outcome"]["reason"], name
    hints = {name: turns[name]["outcome"]["reason"].splitlines()[-1] for name in CLIS}
    assert "/login" in hints["claude"] and "codex login" in hints["codex"] and "pi" in hints["pi"]


async def test_a_server_error_fails_the_turn_as_retryable(tmp_path):
    turns = await run_failing(tmp_path, 500)
    for name in CLIS:
        outcome = turns[name]["outcome"]
        assert outcome["kind"] == "failed" and outcome["retryable"] is True, (name, outcome)
