"""fork, compact, set and stop on the real CLIs, offline, against the scripted model.

claude, codex (through its app-server) and pi fork and compact, `set` switches the model of each,
and `wf.agents.stop` ends a turn of each mid-way. Skipped, saying where it looked, when the CLIs aren't installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import anyio
import msgspec
import pytest

import agentswf
from agentswf import Runtime, workflow
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

from ..clis import PI_REPORTS_COMPACTION_USAGE, TAUGHT, compacting, needs_clis, pi_keeps_focus, pi_version
from ..harnesses.kit import alive

pytestmark = [pytest.mark.anyio, needs_clis]
SUMMARY = "SUMMARY: the verdict was approve"


@pytest.fixture(params=["asyncio"])
def anyio_backend(request):
    return request.param  # real CLIs: once, on asyncio, is enough


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    verdict: Literal["approve", "reject"]


def script_for(out: Path):
    def script(conv: Conversation):
        found = TAUGHT.search(conv.prompt)
        if found is None or compacting(conv):  # not a turn: a compaction asks for a summary
            return Text(SUMMARY)
        wfa, call = found.groups()
        commands = [f"{wfa} result {call} --verdict approve"]
        if "HANG" in conv.prompt:
            commands = [f"echo $PPID >{out}/hang.cli; echo $$ >{out}/hang.pid; sleep 1000"]
        done = len(conv.tool_results)
        return Shell(commands[done]) if done < len(commands) else Text("Finished.")

    return script


def texts(history: tuple) -> str:
    return msgspec.json.encode(list(history)).decode()


def runtime_of(cli: str, model: ScriptedModel, home: Path) -> Runtime:
    env = {"claude": claude_env, "codex": codex_env, "pi": pi_env}[cli](model, home)
    return Runtime(harness=cli, command=(find_cli(cli),), env=env, model="fake/fake-model" if cli == "pi" else None)


@pytest.mark.parametrize("cli", ["claude", "codex", "pi"])
async def test_a_fork_copies_the_history_and_the_parent_never_sees_the_forks(tmp_path, cli):
    async with ScriptedModel(script_for(tmp_path)) as model:
        runtime = runtime_of(cli, model, tmp_path / "home")

        @workflow(name=f"{cli}-fork", description="fork after a first turn")
        async def flow(wf):
            a = await wf.agents.open("a", runtime=runtime)
            first = await a.run("PARENT-ONE review it.", schema=Verdict, timeout=90)
            before = len(model.requests)
            b = await a.fork("b")
            forked_without_a_call = len(model.requests) == before
            fork_turn = await b.run("FORK-TWO review it.", schema=Verdict, timeout=90)
            parent_turn = await a.run("PARENT-THREE review it.", schema=Verdict, timeout=90)
            return [first.answered, forked_without_a_call, fork_turn.answered, parent_turn.answered,
                    fork_turn.session != first.session, msgspec.to_builtins(fork_turn.usage)]

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    *flags, fork_usage = result.value
    assert flags == [True, True, True, True, True]
    calls = [r.conversation for r in model.requests if r.conversation is not None]
    fork_calls = [c for c in calls if "FORK-TWO" in c.prompt]
    parent_calls = [c for c in calls if "PARENT-THREE" in c.prompt]
    assert fork_calls and all("PARENT-ONE" in texts(c.history) for c in fork_calls)
    assert parent_calls and all("FORK-TWO" not in texts(c.history) for c in parent_calls)
    if cli == "claude":  # the copy's running total_cost_usd is the parent's: the fork's first turn counts its own
        assert fork_usage["cost_usd"] is not None and fork_usage["cost_usd"] < 0.0008 * (len(fork_calls) + 1)
    assert fork_usage["input_tokens"] == 100 * len(fork_calls)




@pytest.mark.parametrize("cli", ["claude", "codex", "pi"])
async def test_a_compaction_sends_the_focus_and_the_next_turn_runs_on_the_summary(tmp_path, cli):
    async with ScriptedModel(script_for(tmp_path)) as model:
        runtime = runtime_of(cli, model, tmp_path / "home")

        @workflow(name=f"{cli}-compact", description="compact after a first turn")
        async def flow(wf):
            a = await wf.agents.open("a", runtime=runtime)
            await a.run("PARENT-ONE review it.", schema=Verdict, timeout=90)
            compacted = await a.compact("keep the verdict FOCUS-MARK", timeout=90)
            after = await a.run("PARENT-TWO review it.", schema=Verdict, timeout=90)
            return compacted.outcome.kind, compacted.value, after.answered, msgspec.to_builtins(compacted.usage)

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    kind, summary, answered, usage = result.value
    assert (kind, answered) == ("answered", True)
    assert SUMMARY in summary  # pi 1.x puts what it kept of a turn it cut after its summary's
    calls = [r.conversation for r in model.requests if r.conversation is not None]
    compactions = [c for c in calls if compacting(c)]
    focused = cli != "pi" or pi_keeps_focus()  # an older pi drops the focus from a split turn's request
    assert compactions and (not focused or all("FOCUS-MARK" in texts(c.history) + c.prompt for c in compactions))
    later = [c for c in calls if "PARENT-TWO" in c.prompt]
    assert later and all(SUMMARY in texts(c.history) for c in later)  # the context is the summary now
    pi_counts = cli == "pi" and (pi_version() or (0,)) >= PI_REPORTS_COMPACTION_USAGE  # an older pi's answer has none
    if cli == "codex" or pi_counts:  # claude's result line after /compact counts none of its tokens
        assert usage["input_tokens"] == 100 * len(compactions)


@pytest.mark.parametrize("cli", ["claude", "codex", "pi"])
async def test_set_names_the_new_model_in_the_next_request(tmp_path, cli):
    async with ScriptedModel(script_for(tmp_path)) as model:
        runtime = runtime_of(cli, model, tmp_path / "home")
        new_model = {"claude": "claude-sonnet-9-9", "codex": "gpt-5.5-mini", "pi": "fake/other-model"}[cli]

        @workflow(name=f"{cli}-set", description="set between turns")
        async def flow(wf):
            a = await wf.agents.open("a", runtime=runtime)
            await a.run("PARENT-ONE review it.", schema=Verdict, timeout=90)
            switched = await a.set(model=new_model, effort="low")
            after = await a.run("PARENT-TWO review it.", schema=Verdict, timeout=90)
            return switched.answered, after.answered, after.model, after.effort, after.session == switched.session

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    assert list(result.value) == [True, True, new_model, "low", True]
    later = [r.conversation for r in model.requests if r.conversation is not None and "PARENT-TWO" in r.conversation.prompt]
    assert later and all(c.model == new_model.removeprefix("fake/") for c in later)


@pytest.mark.parametrize("cli", ["claude", "codex", "pi"])
async def test_stop_mid_turn_cancels_it_and_leaves_nothing_running(tmp_path, cli):
    async with ScriptedModel(script_for(tmp_path)) as model:
        runtime = runtime_of(cli, model, tmp_path / "home")

        @workflow(name=f"{cli}-stop", description="stop mid-turn")
        async def flow(wf):
            a = await wf.agents.open("a", runtime=runtime)
            turns: list = []

            async def hang() -> None:
                turns.append(await a.run("HANG here.", schema=Verdict, timeout=90))

            async with anyio.create_task_group() as group:
                group.start_soon(hang)
                with anyio.fail_after(60):
                    while not (tmp_path / "hang.pid").exists():
                        await anyio.sleep(0.1)
                stopped = await wf.agents.stop("a", "enough")
            return stopped, turns[0].outcome.kind

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    assert list(result.value) == [True, "cancelled"]
    shell, cli_process = int((tmp_path / "hang.pid").read_text()), int((tmp_path / "hang.cli").read_text())
    assert not alive(shell) and not alive(cli_process)  # the turn's shell, and the CLI that ran it


def processes_with(variable: str) -> list[int]:
    """Live processes whose environment has `variable` (NAME=value)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and variable.encode() in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return [pid for pid in found if alive(pid)]


@pytest.mark.parametrize("cli", ["codex", "pi"])
async def test_stop_mid_compaction_cancels_it_and_its_session_cli_is_gone(tmp_path, cli):
    held = anyio.Event()
    turns = script_for(tmp_path)

    async def script(conv: Conversation):
        if compacting(conv):  # the compaction's request: held until the stop
            held.set()
            await anyio.sleep(600)
        return turns(conv)

    async with ScriptedModel(script) as model:
        runtime = runtime_of(cli, model, tmp_path / "home")
        home = f"HOME={tmp_path / 'home'}"

        @workflow(name=f"{cli}-stop-compacting", description="stop mid-compaction")
        async def flow(wf):
            a = await wf.agents.open("a", runtime=runtime)
            await a.run("PARENT-ONE review it.", schema=Verdict, timeout=90)
            ended: list = []

            async def compact() -> None:
                ended.append(await a.compact("FOCUS-MARK", timeout=90))

            async with anyio.create_task_group() as group:
                group.start_soon(compact)
                with anyio.fail_after(60):
                    await held.wait()
                running = processes_with(home)
                stopped = await wf.agents.stop("a", "enough")
            return stopped, ended[0].outcome.kind, running, processes_with(home)

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    stopped, kind, running, left = result.value
    assert (stopped, kind) == (True, "cancelled")
    assert running and left == []  # the session CLI was running the compaction, and is gone


@pytest.mark.parametrize("cli", ["claude", "codex", "pi"])
async def test_a_compaction_after_set_runs_with_the_new_model(tmp_path, cli):
    async with ScriptedModel(script_for(tmp_path)) as model:
        runtime = runtime_of(cli, model, tmp_path / "home")
        new_model = {"claude": "claude-sonnet-9-9", "codex": "gpt-5.5-mini", "pi": "fake/other-model"}[cli]

        @workflow(name=f"{cli}-set-compact", description="set, then compact")
        async def flow(wf):
            a = await wf.agents.open("a", runtime=runtime)
            await a.run("PARENT-ONE review it.", schema=Verdict, timeout=90)
            await a.set(model=new_model, effort="low")
            return (await a.compact("FOCUS-MARK", timeout=90)).outcome.kind

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    assert result.value == "answered"
    requests = [r for r in model.requests if r.conversation is not None and compacting(r.conversation)]
    assert requests and all(r.conversation.model == new_model.removeprefix("fake/") for r in requests)
    if cli == "codex":  # and with the effort set left (claude and pi name it in ways of their own)
        assert all(r.body["reasoning"]["effort"] == "low" for r in requests)


class CompactionRefused(Exception):
    """What the scripted model raises at a compaction's request: it answers HTTP 500."""


@pytest.mark.parametrize("cli", ["claude", "codex", "pi"])
async def test_a_failed_compaction_leaves_the_context_as_it_was(tmp_path, cli):
    turns = script_for(tmp_path)

    def script(conv: Conversation):
        if compacting(conv):
            raise CompactionRefused("no compaction today")
        return turns(conv)

    found: dict = {}
    with pytest.raises(CompactionRefused):  # the scripted model raises its script's error again at its end
        async with ScriptedModel(script) as model:
            runtime = runtime_of(cli, model, tmp_path / "home")

            @workflow(name=f"{cli}-compact-fails", description="a compaction that fails")
            async def flow(wf):
                a = await wf.agents.open("a", runtime=runtime)
                first = await a.run("PARENT-ONE review it.", schema=Verdict, timeout=90)
                compacted = await a.compact("FOCUS-MARK", timeout=90)
                after = await a.run("PARENT-TWO review it.", schema=Verdict, timeout=90)
                return compacted.outcome.kind, after.answered, after.session == first.session

            found["result"] = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
            found["requests"] = list(model.requests)
    result = found["result"]
    assert result.outcome == "completed", result.reason
    assert list(result.value) == ["failed", True, True]
    later = [r.conversation for r in found["requests"] if r.conversation is not None and "PARENT-TWO" in r.conversation.prompt]
    assert later and all("PARENT-ONE" in texts(c.history) and "FOCUS-MARK" not in texts(c.history) for c in later)
