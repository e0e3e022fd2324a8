"""The ACP CLIs as agents, for real: each from npm (`.ci/run` pins them), offline, against a scripted model.

The scripted model reads the taught `wfa` command out of the prompt and has the CLI run it
through its own shell tool, which asks for permission over ACP first. Each test runs one CLI;
skipped, saying where it looked, when that CLI isn't installed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import anyio
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
    claude_env,
    codex_env,
    copilot_env,
    find_cli,
    gemini_env,
    opencode_env,
    qwen_env,
)

from ..clis import TAUGHT
from ..harnesses.kit import alive

pytestmark = pytest.mark.anyio

TURN_SECONDS = 120
POLL_SECONDS = 0.2  # for the hanging command to have started


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
    if "SCENARIO sandbox" in conv.prompt:  # the secret beside the workspace (named by no path: opencode asks for one outside)
        secret = 'f=../secret.txt; cat "$f" || echo no-secret'  # and no $(…): gemini refuses it
        return [secret, 'echo "$WFA_AGENT" > "made-$WFA_AGENT"', f"{wfa} tool count --n 2", answer]
    if "SCENARIO hang" in conv.prompt or "SCENARIO hang" in str(conv.history):  # codex-acp's shell gives up waiting
        return [f"echo $$ >>{out}/hang.pids; python3 -c 'import time; time.sleep(1000)'"] * 100  # qwen refuses `sleep N`
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


def adapter(cli: str, model: ScriptedModel, home: Path) -> Runtime:
    """claude and codex through their ACP adapters: `Runtime(harness="acp", command=[…])`. claude-agent-acp
    is given the native claude (its bundled Claude Code looks a name up); codex-acp, codex's config, asking."""
    if cli == "claude-agent-acp":
        env = {**claude_env(model, home), "CLAUDE_CODE_EXECUTABLE": str(find_cli("claude"))}
    else:
        env = codex_env(model, home)
    return Runtime(harness="acp", command=(str(find_cli(cli)), *ADAPTER_ARGS[cli]), env=env)


ADAPTER_ARGS = {"claude-agent-acp": (), "codex-acp": ("-c", 'approval_policy="untrusted"')}
NEEDS = {"claude-agent-acp": ("claude-agent-acp", "claude"), "codex-acp": ("codex-acp",)}
CLIS = [pytest.param(name, marks=pytest.mark.needs(*NEEDS.get(name, (name,)))) for name in (*ENVS, *NEEDS)]


def runtime(cli: str, model: ScriptedModel, home: Path) -> Runtime:
    if cli in NEEDS:
        return adapter(cli, model, home)
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
        if cli != "codex-acp":  # which reports no tokens over ACP (its usage_update is the context's size)
            assert turn["usage"]["input_tokens"] >= 100 and turn["usage"]["output_tokens"] >= 20, turn["usage"]
    assert first["session"] == second["session"]
    last = [r for r in model.requests if r.conversation is not None and TAUGHT.search(r.conversation.prompt)][-1]
    assert sum("SCENARIO answer" in str(item) for item in last.conversation.history) == 2  # turn 1's history came back
    earlier, resumed = (transcript(tmp_path, turn["call_id"]) for turn in (first, second))
    calls = {entry["toolCallId"] for entry in earlier if "toolCallId" in entry}
    assert calls and not calls & {entry.get("toolCallId") for entry in resumed}, resumed  # a load's replay isn't the turn's
    if cli == "gemini":  # which replays turn 1 after answering its load: counted before the prompt, all of it
        assert resumed[0]["before_prompt"] >= 3 and not any(e.get("update") == "user_message_chunk" for e in resumed), resumed


def transcript(tmp_path: Path, call_id: str) -> list[dict[str, Any]]:
    """The protocol transcript of a call's (one) attempt, from the run's record."""
    (record,) = (tmp_path / "runs").glob(f"*/*/calls/{call_id}/attempts.jsonl")
    (attempt,) = [msgspec.json.decode(line) for line in record.read_bytes().splitlines()]
    return [msgspec.json.decode(line) for line in attempt["output"].splitlines()]


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
    pids = tmp_path / "hang.pids"
    async with ScriptedModel(script_for(tmp_path)) as model:
        agent_runtime = runtime(cli, model, tmp_path / "home")

        @workflow(name=f"acp-{cli}-stop", description="An ACP CLI stopped mid-turn, its command running.")
        async def flow(wf):
            agent = await wf.agents.open(cli, runtime=agent_runtime)
            ended: list[Any] = []

            async def hang() -> None:
                ended.append(await agent.run("SCENARIO hang. Review the change.", schema=Verdict, timeout=TURN_SECONDS))

            async with anyio.create_task_group() as turn:
                turn.start_soon(hang)
                while not pids.exists():
                    await anyio.sleep(POLL_SECONDS)
                await wf.agents.stop(cli, "the test stops it mid-turn")
            return msgspec.to_builtins(ended[0])

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    turn = result.value
    assert turn["outcome"]["kind"] == "cancelled", turn
    assert not any(alive(int(pid)) for pid in (tmp_path / "hang.pids").read_text().split())


FORKING = [param for param in CLIS if param.values[0] in ("opencode", "claude-agent-acp")]  # those with session/fork


@pytest.mark.parametrize("cli", FORKING)
async def test_a_fork_answers_with_its_parents_history(tmp_path, cli):
    async with ScriptedModel(script_for(tmp_path)) as model:
        agent_runtime = runtime(cli, model, tmp_path / "home")

        @workflow(name=f"acp-{cli}-fork", description="An ACP CLI forked after a turn.")
        async def flow(wf):
            parent = await wf.agents.open(cli, runtime=agent_runtime)
            first = await parent.run("SCENARIO answer. FIRST-TURN.", schema=Verdict, timeout=TURN_SECONDS)
            child = await parent.fork(f"{cli}-child")
            copied = await child.run("SCENARIO answer. In the copy.", schema=Verdict, timeout=TURN_SECONDS)
            return [msgspec.to_builtins(first), msgspec.to_builtins(copied)]

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    first, copied = result.value
    assert copied["outcome"]["kind"] == "answered" and copied["session"] != first["session"], copied
    last = [r for r in model.requests if r.conversation is not None and "In the copy" in r.conversation.prompt][-1]
    assert "FIRST-TURN" in str(last.conversation.history)  # the copy carries the parent's turn


ALL = tuple(param.values[0] for param in CLIS)


@pytest.mark.needs(*ENVS, *(cli for needed in NEEDS.values() for cli in needed))
async def test_a_workflow_of_every_acp_agent_side_by_side(tmp_path):
    """The issue's workflow: a reviewer on gemini, a fixer on opencode, second opinions on qwen and copilot,
    and claude and codex through their adapters, side by side: each a tool call and a typed answer, then
    a second turn resuming its session, each turn's usage recorded."""
    counted: list[int] = []

    def count(n: int) -> str:
        """Count to n."""
        counted.append(n)
        return f"counted {n}"

    async with ScriptedModel(script_for(tmp_path)) as model:
        runtimes = {cli: runtime(cli, model, tmp_path / "homes" / cli) for cli in ALL}

        @workflow(name="acp-all", description="Every ACP agent, side by side.")
        async def flow(wf):
            async def one(cli: str) -> list[dict[str, Any]]:
                agent = await wf.agents.open(cli, runtime=runtimes[cli], tools={"count": tool(count)})
                first = await agent.run("SCENARIO tool. Review the change.", schema=Verdict, timeout=TURN_SECONDS)
                second = await agent.run("SCENARIO answer. Review it again.", schema=Verdict, timeout=TURN_SECONDS)
                return [msgspec.to_builtins(first), msgspec.to_builtins(second)]

            return dict(zip(ALL, await wf.parallel(ALL, one)))

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    assert counted == [2] * len(ALL)
    for cli, (first, second) in result.value.items():
        for turn in (first, second):
            assert turn["outcome"]["value"] == {"verdict": "approve"}, (cli, turn)
            assert cli == "codex-acp" or turn["usage"]["input_tokens"] >= 100, (cli, turn["usage"])
        assert first["session"] == second["session"], cli


RELAYING = [param for param in CLIS if param.values[0] in ("opencode", "qwen", "gemini")]  # copilot says it as text


@pytest.mark.parametrize("cli", RELAYING)
async def test_a_login_failure_fails_for_good_saying_what_to_configure(tmp_path, cli):
    async with ScriptedModel(script_for(tmp_path), fail_status=401) as model:
        agent_runtime = runtime(cli, model, tmp_path / "home")

        @workflow(name=f"acp-{cli}-401", description="An ACP CLI whose API refuses its key.")
        async def flow(wf):
            agent = await wf.agents.open(cli, runtime=agent_runtime)
            return msgspec.to_builtins(await agent.run("SCENARIO answer.", schema=Verdict, timeout=TURN_SECONDS))

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    outcome = result.value["outcome"]
    assert outcome["kind"] == "failed" and outcome["retryable"] is False and not result.value["nudged"], outcome
    assert "isn't logged in" in outcome["reason"] and "credentials" in outcome["reason"]


@pytest.mark.needs("gemini")
async def test_a_model_set_on_the_runtime_is_the_one_called(tmp_path):
    async with ScriptedModel(script_for(tmp_path)) as model:
        agent_runtime = msgspec.structs.replace(runtime("gemini", model, tmp_path / "home"), model="gemini-2.5-pro")

        @workflow(name="acp-gemini-model", description="gemini on a model of the runtime's.")
        async def flow(wf):
            agent = await wf.agents.open("gemini", runtime=agent_runtime)
            return msgspec.to_builtins(await agent.run("SCENARIO answer.", schema=Verdict, timeout=TURN_SECONDS))

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    assert result.value["outcome"]["kind"] == "answered", result.value
    assert {r.conversation.model for r in model.requests if r.conversation is not None} == {"gemini-2.5-pro"}
    assert result.value["usage"]["model"] == "gemini-2.5-pro"


@pytest.mark.needs("bwrap")
@pytest.mark.parametrize("cli", CLIS)
async def test_a_sandboxed_agent_reads_only_its_sandbox_reaches_its_model_and_resumes_from_the_home_it_is_given(tmp_path, cli):
    """The CLI's config is copied into the sandbox's home, its model reached through the sandbox's proxy; the
    session it keeps there is resumed by the second turn; nothing of the agent outlives the run."""
    from ..sandbox.kit import MARK, marked

    (tmp_path / "secret.txt").write_text("SECRET-KEY")
    (tmp_path / "ws").mkdir()
    token = f"acp-{cli}-{tmp_path.name}"
    counted: list[int] = []

    def count(n: int) -> str:
        """Count to n."""
        counted.append(n)
        return f"counted {n}"

    async with ScriptedModel(script_for(tmp_path)) as model:
        base = runtime(cli, model, tmp_path / "home")
        agent_runtime = msgspec.structs.replace(base, env={**base.env, MARK: token})

        @workflow(name=f"acp-{cli}-sandbox", description="An ACP CLI in a sandbox.")
        async def flow(wf):
            box = await wf.sandboxes.open("box", cwd="ws", write=["."])
            agent = await wf.agents.open(cli, runtime=agent_runtime, tools={"count": tool(count)}, sandbox=box)
            first = await agent.run("SCENARIO sandbox. Review the change.", schema=Verdict, timeout=TURN_SECONDS)
            second = await agent.run("SCENARIO answer. Review it again.", schema=Verdict, timeout=TURN_SECONDS)
            return [msgspec.to_builtins(first), msgspec.to_builtins(second)]

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    first, second = result.value
    for turn in (first, second):
        assert turn["outcome"]["kind"] == "answered" and turn["outcome"]["value"] == {"verdict": "approve"}, turn
    assert first["session"] == second["session"]
    assert counted == [2]
    assert (tmp_path / "ws" / f"made-{cli}").read_text().strip() == cli
    outputs = [t for r in model.requests if r.conversation for t in r.conversation.tool_results]
    assert not any("SECRET-KEY" in output for output in outputs) and any("no-secret" in output for output in outputs)
    last = [r for r in model.requests if r.conversation is not None and TAUGHT.search(r.conversation.prompt)][-1]
    assert "SCENARIO sandbox" in str(last.conversation.history)  # the first turn's session, from the sandbox's home
    assert marked(token) == []
