"""The ACP harness end to end, against a real process speaking ACP: tests/acp/fake_agent.py.

That agent is a test stand-in (its "model" is a script in the prompt), run as a subprocess
under the keeper as any ACP agent is; it calls `wfa` through its own shell, asks for permission
first, and keeps its sessions on disk. The real ACP CLIs are tested in test_real_acp_clis.py.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any, Literal

import msgspec
import pytest

import agentswf
from agentswf import Runtime, tool, workflow
from agentswf.cli.logs import print_run
from agentswf.harnesses.acp_rpc import Permissions
from agentswf.harnesses.base import Attempt
from agentswf.harnesses.jsonrpc import METHOD_NOT_FOUND
from agentswf.harnesses.runtime import harness_for

from ..harnesses.kit import alive

pytestmark = pytest.mark.anyio

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")
STOP_SECONDS = 4  # a hanging turn's deadline: long enough for a loaded machine to start the agent


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    verdict: Literal["approve", "reject"]


class Recall(msgspec.Struct, forbid_unknown_fields=True):
    turns: int


def fake(home: Path, **extra: Any) -> Runtime:
    env = {"FAKE_ACP_HOME": str(home), **{f"FAKE_ACP_{name.upper()}": value for name, value in extra.pop("env", {}).items()}}
    return Runtime(harness="acp", command=(sys.executable, str(FAKE_AGENT)), env=env, **extra)


def received(home: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (home / "received.jsonl").read_text().splitlines()]


def answers(home: Path) -> list[str | None]:
    """The option the client chose for each permission request, in order (None: no option)."""
    return [(m["result"]["outcome"].get("optionId")) for m in received(home) if "result" in m and "outcome" in m["result"]]


async def one_turn(tmp_path: Path, scenario: str, schema: type = Verdict, **runtime: Any) -> tuple[dict[str, Any], list[int]]:
    counted: list[int] = []

    def count(n: int) -> str:
        """Count to n."""
        counted.append(n)
        return f"counted {n}"

    @workflow(name=f"acp-{scenario}", description="One turn of a fake ACP agent.")
    async def flow(wf):
        agent = await wf.agents.open("fake", runtime=fake(tmp_path / "home", **runtime), tools={"count": tool(count)})
        turn = await agent.run(f"SCENARIO {scenario}. Review the change.", schema=schema, timeout=runtime_timeout(scenario))
        return msgspec.to_builtins(turn)

    result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    return result.value, counted


def runtime_timeout(scenario: str) -> float:
    return STOP_SECONDS if scenario == "hang" else 60


async def test_a_typed_answer_through_wfa_with_usage_and_the_shell_allowed_once(tmp_path):
    turn, _ = await one_turn(tmp_path, "answer")
    assert turn["outcome"]["kind"] == "answered" and turn["outcome"]["value"] == {"verdict": "approve"}, turn
    assert turn["session"].startswith("fake-")
    assert turn["usage"]["input_tokens"] == 200 and turn["usage"]["output_tokens"] == 40  # the response's usage
    assert turn["usage"]["cost_usd"] == pytest.approx(0.02)  # usage_update's cost
    home = tmp_path / "home"
    assert answers(home) == ["once"] and not (home / "allowed-always").exists()
    refusal = next(m for m in received(home) if "error" in m)  # its fs/read_text_file, which agentswf doesn't serve
    assert refusal["error"]["code"] == METHOD_NOT_FOUND


async def test_a_refused_answer_is_corrected_in_the_same_turn(tmp_path):
    turn, _ = await one_turn(tmp_path, "correct")
    assert turn["outcome"]["kind"] == "answered" and turn["outcome"]["value"] == {"verdict": "approve"}, turn
    assert answers(tmp_path / "home") == ["once", "once"]


async def test_a_tool_call_through_wfa(tmp_path):
    turn, counted = await one_turn(tmp_path, "tool")
    assert turn["outcome"]["kind"] == "answered", turn
    assert counted == [2]


async def test_what_the_permissions_dont_allow_is_rejected_once_and_wfa_still_allowed(tmp_path):
    turn, _ = await one_turn(tmp_path, "forbidden", permissions=Permissions(allow=()))
    assert turn["outcome"]["kind"] == "answered", turn
    assert answers(tmp_path / "home") == ["no", "once"]
    assert not (tmp_path / "home" / "forbidden").exists()


async def test_each_permission_and_its_answer_is_in_the_record_and_awf_logs_shows_them(tmp_path):
    turn, _ = await one_turn(tmp_path, "forbidden", permissions=Permissions(allow=()))
    (call,) = (tmp_path / "runs").glob("*/*/calls/*/attempts.jsonl")
    (attempt,) = [json.loads(line) for line in call.read_text().splitlines()]
    assert attempt["call_id"] == turn["call_id"] and attempt["ending"] == "exited"
    entries = [json.loads(line) for line in attempt["output"].splitlines()]
    assert [(e["answer"], e["why"]) for e in entries if "permission" in e] == [
        ("reject_once", "not allowed by the runtime's permissions"), ("allow_once", "the agent's wfa"),
    ]
    shown = io.StringIO()
    print_run(call.parent.parent.parent, shown)
    logs = shown.getvalue()
    assert "attempt ended: exited" in logs
    assert f"permission execute touch {tmp_path / 'home'}/forbidden -> reject_once (not allowed by the runtime's permissions)" in logs
    assert "-> allow_once (the agent's wfa)" in logs and "refused its request fs/read_text_file" in logs
    forged = {"permission": "x", "kind": "execute\n  answer: forged", "command": "\x1b[2J", "answer": "allow_once"}
    with call.open("a") as record:  # what the agent could put there: shown on awf's lines, or passed over
        record.write('{"at": "noon", "ending": ["x"], "output": 5}\n' + json.dumps({"at": 1.0, "output": json.dumps(forged)}) + "\n")
    shown = io.StringIO()
    print_run(call.parent.parent.parent, shown)
    assert "\x1b" not in shown.getvalue() and "\n  answer: forged" not in shown.getvalue()


@pytest.mark.parametrize("reopen", ["load", "resume", "late_replay"])
async def test_the_next_turn_reopens_the_session_with_its_history_and_a_loads_replay_isnt_the_turns(tmp_path, reopen):
    """`late_replay`: the agent answers `session/load` before it replays the session's history, as gemini does.
    Either way the replay is only counted in the next attempt's transcript, none of it taken for the turn's own."""
    home = tmp_path / "home"

    @workflow(name="acp-recall", description="Two turns of a fake ACP agent.")
    async def flow(wf):
        agent = await wf.agents.open("fake", runtime=fake(home, env={} if reopen == "load" else {reopen: "1"}))
        first = await agent.run("SCENARIO recall. How many turns?", schema=Recall, timeout=60)
        second = await agent.run("SCENARIO recall. And now?", schema=Recall, timeout=60)
        return [msgspec.to_builtins(first), msgspec.to_builtins(second)]

    result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    first, second = result.value
    assert (first["outcome"]["value"], second["outcome"]["value"]) == ({"turns": 1}, {"turns": 2})
    assert first["session"] == second["session"]
    methods = [m.get("method") for m in received(home)]
    assert methods.count("session/new") == 1
    assert methods.count("session/resume" if reopen == "resume" else "session/load") == 1
    assert second["usage"]["cost_usd"] == pytest.approx(0.02)
    (record,) = (tmp_path / "runs").glob(f"*/*/calls/{second['call_id']}/attempts.jsonl")
    (attempt,) = [json.loads(line) for line in record.read_text().splitlines()]
    entries = [json.loads(line) for line in attempt["output"].splitlines()]
    if reopen != "resume":  # which replays nothing
        assert entries[0] == {"before_prompt": 3}  # turn 1's prompt, its command's output, its "Finished."
    assert [e["text"] for e in entries if e.get("update") == "agent_message_chunk"] == ["Finished."]
    assert not any("How many turns" in json.dumps(e) for e in entries)


@pytest.mark.parametrize("budget, spent", [(agentswf.Budget(tokens=300), "480 of 300 tokens"),
                                           (agentswf.Budget(cost_usd=0.03), "$0.0400 of $0.0300")])  # fmt: skip
async def test_what_an_acp_agent_reports_it_spent_counts_in_the_runs_budget(tmp_path, budget, spent):
    """Each turn of the fake agent reports 200 input and 40 output tokens (its prompt's response) and $0.02
    (its usage_update): two turns spend the budget, and the third is stopped before the agent is prompted."""
    home = tmp_path / "home"

    @workflow(name="acp-budget", description="Three turns of a fake ACP agent under a budget.")
    async def flow(wf):
        agent = await wf.agents.open("fake", runtime=fake(home))
        turns = [await agent.run("SCENARIO answer. Review the change.", schema=Verdict, timeout=60) for _ in range(3)]
        run = wf.spent().run
        return [turn.outcome.kind for turn in turns], turns[2].outcome.reason, [run.tokens, run.cost_usd]

    result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path, budget=budget)
    assert result.outcome == "completed", result.reason
    kinds, reason, (tokens, cost) = result.value
    assert kinds == ["answered", "answered", "failed"] and spent in reason, reason
    assert tokens == 480 and cost == pytest.approx(0.04)
    assert [m.get("method") for m in received(home)].count("session/prompt") == 2


async def test_a_silent_turn_is_nudged_in_the_same_session(tmp_path):
    turn, _ = await one_turn(tmp_path, "silent")
    assert turn["outcome"]["kind"] == "answered" and turn["nudged"], turn
    methods = [m.get("method") for m in received(tmp_path / "home")]
    assert (methods.count("session/new"), methods.count("session/load"), methods.count("session/prompt")) == (1, 1, 2)


async def test_a_stop_mid_turn_cancels_the_session_and_leaves_nothing_running(tmp_path):
    turn, _ = await one_turn(tmp_path, "hang", env={"stubborn": "1"})
    assert turn["outcome"]["kind"] == "timed-out", turn
    home = tmp_path / "home"
    assert not alive(int((home / "hang.pid").read_text()))
    assert not any(alive(int(pid.read_text())) for pid in home.glob("agent.*.pid"))
    assert "session/cancel" in [m.get("method") for m in received(home)]


async def test_the_transcript_keeps_each_permission_its_answer_and_each_refusal(tmp_path):
    harness = harness_for(fake(tmp_path / "home", permissions=Permissions(allow=("execute:echo *",))))
    launcher = tmp_path / "wfa"  # never run: the fake agent's command of it fails, which is no matter here
    prompt = f"SCENARIO forbidden. {launcher} result c1 --verdict approve"
    attempt = Attempt(agent="fake", call_id="c1", turn=1, nudge=False, prompt=prompt, launcher=launcher,
                      cwd=tmp_path, env={"FAKE_ACP_HOME": str(tmp_path / "home")})  # fmt: skip
    result = await harness.run(attempt)
    assert result.ending.kind == "exited", result.ending
    entries = [json.loads(line) for line in result.output.splitlines()]
    permissions = [(e["command"], e["answer"], e["why"]) for e in entries if "permission" in e]
    assert permissions == [
        (f"touch {tmp_path / 'home'}/forbidden", "reject_once", "not allowed by the runtime's permissions"),
        (f"{launcher} result c1 --verdict approve", "allow_once", "the agent's wfa"),
    ]
    assert {"refused": "fs/read_text_file"} in entries
    assert any(e.get("update") == "agent_message_chunk" and e["text"] == "Finished." for e in entries)
    assert result.usage is not None and result.usage.input_tokens == 300


async def test_a_confined_attempt_runs_the_command_and_environment_its_sandbox_gives(tmp_path):
    """The sandbox's confine wraps the agent's command line and gives its environment (its own TMPDIR, its
    home): the attempt runs that, and makes no TMPDIR of its own outside."""
    harness = harness_for(fake(tmp_path / "elsewhere"))
    confined: list[list[str]] = []

    def confine(argv, cwd, env):
        confined.append(list(argv))
        inside = tmp_path / "inside-tmp"
        inside.mkdir(exist_ok=True)
        return ["/usr/bin/env", *argv], {**env, "TMPDIR": str(inside), "FAKE_ACP_HOME": str(tmp_path / "home")}

    attempt = Attempt(agent="fake", call_id="c1", turn=1, nudge=False, prompt="SCENARIO answer.", launcher=tmp_path / "wfa",
                      cwd=tmp_path, env={}, confine=confine)  # fmt: skip
    result = await harness.run(attempt)
    assert result.ending.kind == "exited", result.ending
    assert confined == [[sys.executable, str(FAKE_AGENT)]]
    assert (tmp_path / "home" / "received.jsonl").exists() and not (tmp_path / "elsewhere").exists()


def test_an_acp_agent_keeps_its_clis_home_in_a_sandbox_and_an_adapter_its_wrapped_clis(tmp_path):
    adapter = tmp_path / "claude-agent-acp"
    adapter.write_text("#!/bin/sh\n")
    adapter.chmod(0o755)
    named = harness_for(Runtime(harness="opencode", command=(sys.executable,)))
    assert named.cli_home() == "opencode"
    assert harness_for(Runtime(harness="acp", command=(str(adapter),))).cli_home() == "claude"
    assert harness_for(fake(tmp_path / "home")).cli_home() == "acp"  # no home known: an empty one


async def test_a_fork_copies_the_session_where_the_agent_offers_session_fork(tmp_path):
    home = tmp_path / "home"

    @workflow(name="acp-fork", description="A fake ACP agent forked after a turn.")
    async def flow(wf):
        parent = await wf.agents.open("parent", runtime=fake(home, env={"fork": "1"}))
        first = await parent.run("SCENARIO recall. How many turns?", schema=Recall, timeout=60)
        child = await parent.fork("child")
        copied = await child.run("SCENARIO recall. And in the copy?", schema=Recall, timeout=60)
        again = await parent.run("SCENARIO recall. And here?", schema=Recall, timeout=60)
        return [msgspec.to_builtins(turn) for turn in (first, copied, again)]

    result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    first, copied, again = result.value
    assert [turn["outcome"]["value"] for turn in (first, copied, again)] == [{"turns": 1}, {"turns": 2}, {"turns": 2}]
    assert copied["session"] != first["session"] == again["session"]
    assert [m.get("method") for m in received(home)].count("session/fork") == 1


async def test_a_fork_of_an_agent_that_offers_no_session_fork_fails_its_first_turn_saying_so(tmp_path):
    @workflow(name="acp-no-fork", description="A fake ACP agent that can't fork.")
    async def flow(wf):
        parent = await wf.agents.open("parent", runtime=fake(tmp_path / "home"))
        await parent.run("SCENARIO answer.", schema=Verdict, timeout=60)
        child = await parent.fork("child")
        return msgspec.to_builtins(await child.run("SCENARIO answer.", schema=Verdict, timeout=60))

    result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    assert result.value["outcome"]["kind"] == "failed"
    assert "offers no session/fork" in result.value["outcome"]["reason"]


@pytest.mark.parametrize("model,set_to", [("other-model", "other-model"), ("fake-model", None)])
async def test_a_model_is_set_through_the_sessions_config_option_unless_it_is_current(tmp_path, model, set_to):
    turn, _ = await one_turn(tmp_path, "answer", model=model)
    assert turn["outcome"]["kind"] == "answered", turn
    chosen = tmp_path / "home" / "model"
    assert (chosen.read_text() if chosen.exists() else None) == set_to
