"""A changed CLI fails loudly, for real: wrappers over claude, codex and pi from npm, offline.

One wrapper gives the real CLI a flag it doesn't know, as a CLI that dropped one of agentswf's
does: the turn fails, not retryable, naming the CLI, its version and the flag. Another renames
the usage in claude's output, as a CLI that changed its events does: the turn is answered with
its spend unknown, the run says so once, and a token budget that can't be checked stops the next
turn, saying why (`unknown="count"` counts it as nothing spent).
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

import agentswf
from agentswf import Budget, Runtime, workflow
from agentswf.engine.record.layout import read_lines
from agentswf.harnesses.versions import shown
from agentswf.testing.models import Conversation, ScriptedModel, Shell, Text, claude_env, codex_env, find_cli, pi_env

from ..clis import TAUGHT, needs_clis, version_of

pytestmark = [pytest.mark.anyio, needs_clis]
DROPPED = "--awf-dropped-flag"


@pytest.fixture(params=["asyncio"])
def anyio_backend(request):
    return request.param  # real CLIs: once, on asyncio, is enough


def answer(conv: Conversation):
    found = TAUGHT.search(conv.prompt)
    if found is None:
        return Text("Nothing to do.")
    wfa, call = found.groups()
    return Shell(f"printf approve | {wfa} result {call}") if not conv.tool_results else Text("Done.")


def wrapper(directory: Path, name: str, body: str) -> str:
    """An executable over the real `name`: its `--version` as it is, the rest through `body` ($REAL is the CLI)."""
    path = directory / f"{name}-changed"
    path.write_text(f'#!/bin/sh\nREAL={find_cli(name)}\nif [ "$1" = --version ]; then exec "$REAL" --version; fi\n{body}\n')
    path.chmod(0o755)
    return str(path)


def runtime(cli: str, command: str, model: ScriptedModel, home: Path, **options) -> Runtime:
    env = {"claude": claude_env, "codex": codex_env, "pi": pi_env}[cli](model, home)
    extra = {"model": "fake/fake-model"} if cli == "pi" else {}
    return Runtime(harness=cli, command=(command,), env=env, **extra, **options)


@pytest.mark.parametrize("cli", ["claude", "codex", "pi"])
async def test_a_flag_the_cli_doesnt_know_fails_the_turn_for_good_naming_cli_version_and_flag(tmp_path, cli):
    changed = wrapper(tmp_path, cli, f'exec "$REAL" {DROPPED} "$@"')
    async with ScriptedModel(answer) as model:

        @workflow(name=f"{cli}-dropped-flag", description="A CLI that doesn't know a flag it is given.")
        async def flow(wf):
            agent = await wf.agents.open("a", runtime=runtime(cli, changed, model, tmp_path / "home"))
            return await agent.run("Approve it.", timeout=90)

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    turn = result.value
    version = shown(version_of(cli) or ())
    assert (turn.outcome.kind, turn.outcome.retryable) == ("failed", False), turn.outcome
    assert f"{cli} {version}" in turn.outcome.reason and f"refused the flag {DROPPED}" in turn.outcome.reason
    assert "isn't logged in" not in turn.outcome.reason  # pi's usage error goes on about /login
    assert model.requests == []


async def test_a_turn_with_its_usage_renamed_is_told_once_and_a_token_budget_it_leaves_unchecked_stops_the_next(tmp_path):
    renamed = wrapper(tmp_path, "claude", '"$REAL" "$@" | sed -e \'s/"usage"/"usaje"/g\' -e \'s/"total_cost_usd"/"total_cost"/g\'')
    async with ScriptedModel(answer) as model:

        @workflow(name="renamed-usage", description="A claude whose result event renamed its usage.")
        async def flow(wf):
            strict = await wf.agents.open("strict", runtime=runtime("claude", renamed, model, tmp_path / "home"))
            lax = await wf.agents.open("lax:one", runtime=runtime("claude", renamed, model, tmp_path / "home"))
            wf.budget("strict", tokens=1_000_000)
            wf.budget("lax", Budget(tokens=1_000_000, unknown="count"))
            turns = [await strict.run("Approve it.", timeout=90), await strict.run("Again.", timeout=90)]
            turns += [await lax.run("Approve it.", timeout=90), await lax.run("Again.", timeout=90)]
            return [(turn.outcome.kind, turn.outcome.reason if not turn.answered else "") for turn in turns], msgspec.to_builtins(
                wf.spent().groups["strict"]
            )

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    (first, second, lax_first, lax_second), strict_spent = result.value
    assert first == ("answered", "") and lax_first == lax_second == ("answered", "")
    assert second[0] == "failed" and second[1] == (
        "key group strict's budget: 1 turn reported no tokens, so its tokens cap can't be checked "
        "(Budget(unknown='count') counts such a turn as spending none)"
    )
    assert strict_spent["unknown_tokens"] == 1 and strict_spent["tokens"] == 0
    told = [line["message"] for line in read_lines(result.run_dir / "log.jsonl") if "gave no usage" in line["message"]]
    assert told == [f"claude {shown(version_of('claude') or ())} gave no usage for this turn; cost and tokens unknown"]  # once
