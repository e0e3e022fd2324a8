"""The review-fix example on the real claude, codex and pi (offline, against a scripted model), its
run recorded, then replayed: the recorded value, with no CLI process started and no request
reaching the model server. Skipped, saying where it looked, when the CLIs aren't installed."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import agentswf
from agentswf import Runtime, Workflow, workflow
from agentswf.harnesses.runtime import harness_for
from agentswf.testing import fork, read_record, replay
from agentswf.testing.models import Conversation, ScriptedModel, Shell, Text, claude_env, codex_env, find_cli, pi_env

from ..clis import TAUGHT, needs_clis

pytestmark = [needs_clis]

REPO = Path(__file__).resolve().parents[2]
review_fix = agentswf.load_workflow(REPO / "examples" / "review_fix" / "review_fix.py")
PROBLEM = "calc.py: add(2, 3) returns -1, not 5"


def scripted() -> Callable[[Conversation], Shell | Text]:
    """The reviewer asks for a change in its first turn, then approves; the fixer says what it fixed."""
    reviews: list[str] = []  # the reviewer's turns' call ids, as first seen

    def script(conv: Conversation) -> Shell | Text:
        found = TAUGHT.search(conv.prompt)
        if found is None or conv.tool_results:
            return Text("Done.")
        wfa, call = found.groups()
        if "Review the project" not in conv.prompt:
            return Shell(f"{wfa} result {call} <<'WF_JSON'\n" '{"files": ["calc.py"], "summary": "add adds"}\nWF_JSON')
        reviews.extend([call] if call not in reviews else [])
        verdict = f"--verdict changes --problem {shlex.quote(PROBLEM)}" if reviews[0] == call else "--verdict approve"
        return Shell(f"{wfa} result {call} {verdict}")

    return script


def logged(cli: str, env: dict[str, str], log: Path, home: Path) -> Runtime:
    """`cli` behind a script that logs each start to `log` (a replay must start none), with `env`:
    the example's runtime is a shell agent's, so the CLI's own environment goes in the script."""
    wrapper = home / f"{cli}-logged"
    exports = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in env.items())
    wrapper.write_text(f"#!/bin/sh\necho {cli} >> {shlex.quote(str(log))}\n{exports}exec {shlex.quote(str(find_cli(cli)))} \"$@\"\n")
    wrapper.chmod(0o755)
    return Runtime(harness=cli, command=(str(wrapper),), model="fake/fake-model" if cli == "pi" else None)


@pytest.mark.parametrize("clis", [("claude", "codex"), ("pi", "claude"), ("codex", "pi")], ids="-".join)
async def test_a_run_on_real_clis_replays_with_no_cli_and_no_model(tmp_path: Path, clis: tuple[str, str]) -> None:
    log = tmp_path / "started"
    async with ScriptedModel(scripted()) as model:
        homes = tmp_path / "homes"
        envs = {"claude": claude_env, "codex": codex_env, "pi": pi_env}
        on = dict(zip(("reviewer", "fixer"), clis, strict=True))
        real = {key: harness_for(logged(cli, envs[cli](model, homes / cli), log, tmp_path)) for key, cli in on.items()}
        recorded = await agentswf.run(review_fix, args={"rounds": 3}, run_root=tmp_path / "runs", cwd=tmp_path,
                                      harnesses=lambda key, runtime: real[key])  # fmt: skip
        assert recorded.outcome == "completed", recorded.reason
        assert recorded.value == {"verdict": "approve", "rounds": 2, "fixed": ["calc.py"]}
        started, requests = log.read_text(), len(model.requests)
        assert started and requests
        run = await replay(review_fix, recorded.run_dir, run_root=tmp_path / "replays", cwd=tmp_path)
        assert run.value == recorded.value
        assert (log.read_text(), len(model.requests)) == (started, requests)  # no CLI started, no model asked
    assert [(turn["agent"], turn["outcome"]["kind"]) for turn in run.turns] == [
        ("reviewer", "answered"), ("fixer", "answered"), ("reviewer", "answered")
    ]
    assert [turn["session"] for turn in run.turns] == [turn["session"] for turn in read_record(recorded).turns]
    spent = [turn.usage for turn in recorded.usage.by_turn]
    assert all(usage is not None and usage.input_tokens for usage in spent)  # real turns' spend, as recorded
    assert [turn.usage for turn in run.result.usage.by_turn] == spent  # replayed as recorded


@workflow(name="three-parts", description="One agent's three turns.")
async def three_parts(wf: Workflow, args: dict[str, Any]) -> list[str]:
    writer = await wf.agents.open("writer", runtime=RUNTIMES[args["cli"]])
    return [(await writer.run(f"Write part {n}.", timeout=90)).value for n in (1, 2, 3)]


RUNTIMES: dict[str, Runtime] = {}  # the test's, by CLI: a workflow's runtime is given by its code


def parts(conv: Conversation) -> Shell | Text:
    found, asked = TAUGHT.search(conv.prompt), re.search(r"Write part (\d)", conv.prompt)
    if found is None or asked is None or conv.tool_results:
        return Text("Done.")
    wfa, call = found.groups()
    return Shell(f"{wfa} result {call} part{asked.group(1)}")


NEW_MODEL = {"claude": "claude-sonnet-9-9", "codex": "gpt-5.5-mini", "pi": "fake/other-model"}  # a model each CLI takes


@pytest.mark.parametrize("cli", ["claude", "codex", "pi"])
async def test_a_fork_at_turn_2_of_three_runs_turns_2_and_3_on_the_real_cli_resuming_turn_1s_session(
    tmp_path: Path, cli: str
) -> None:
    envs = {"claude": claude_env, "codex": codex_env, "pi": pi_env}
    old_model = "fake/fake-model" if cli == "pi" else None
    async with ScriptedModel(parts) as model:
        RUNTIMES[cli] = Runtime(harness=cli, command=(find_cli(cli),), env=envs[cli](model, tmp_path / "home"), model=old_model)
        recorded = await agentswf.run(three_parts, args={"cli": cli}, run_root=tmp_path / "runs", cwd=tmp_path)
        assert recorded.value == ["part1", "part2", "part3"], recorded.reason
        before = len(model.requests)
        forked = await fork(three_parts, recorded.run_dir, "writer:2", settings={"writer": {"model": NEW_MODEL[cli]}})
    assert forked.value == ["part1", "part2", "part3"], forked.reason
    ran = [r.conversation.model for r in model.requests[before:] if r.conversation and "Write part" in r.conversation.prompt]
    assert ran and all(name == NEW_MODEL[cli].removeprefix("fake/") for name in ran)  # turns 2 and 3 asked the model given
    assert [turn["model"] for turn in read_record(forked).turns] == [old_model, NEW_MODEL[cli], NEW_MODEL[cli]]
    asked = [r.conversation.prompt for r in model.requests[before:] if r.conversation and "Write part" in r.conversation.prompt]
    assert asked and not any("Write part 1." in prompt for prompt in asked)  # turn 1 was played: no model asked
    resumed = next(r for r in model.requests[before:] if r.conversation and "Write part 2." in r.conversation.prompt)
    assert "Write part 1." in str(resumed.conversation.history)  # turn 2 resumed the session turn 1 left
    spent = [turn.usage for turn in forked.usage.by_turn]
    assert spent[0] is not None and (spent[0].input_tokens, spent[0].cost_usd) == (0, 0.0)  # played: nothing spent
    assert all(usage is not None and usage.input_tokens for usage in spent[1:])  # turns 2 and 3: the new run's spend
    assert read_record(forked).run["forked_from"]["turn"] == 2
