"""claude, codex (its own sandbox off) and pi in sandboxes, for real: offline, against a scripted model.

The scripted model listens on the host's loopback; inside, the forwarder listens on the same
address and tunnels each connection through the sandbox's proxy, which allows it as the
CLI's model endpoint. Each CLI gets a fresh home holding only its config, copied from where
its environment points; the secret in the user's home stays out of reach.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import msgspec
import pytest

import agentswf
from agentswf import tool, workflow
from agentswf.engine.record.layout import read_lines
from agentswf.testing.models import (
    Conversation,
    ScriptedModel,
    Shell,
    Text,
)

from ..clis import CLIS, TAUGHT, needs_clis, real_runtimes
from .kit import needs_bwrap

pytestmark = [
    pytest.mark.anyio,
    needs_bwrap,
    needs_clis,
]

FETCH = f"{sys.executable} -c 'import urllib.request; urllib.request.urlopen(\"https://example.com/\", timeout=5)' 2>&1 | tail -1"


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    verdict: Literal["approve", "reject"]


def script_for(secret: Path):
    """Each CLI reads the secret (it can't), writes its workspace, calls a tool, then answers."""

    def script(conv: Conversation):
        found = TAUGHT.search(conv.prompt)
        assert found, f"no taught wfa result in: {conv.prompt[:300]}"
        wfa, call = found.groups()
        commands = [
            f"cat {secret} || echo no-secret",
            f'echo "$WFA_AGENT" > "made-$WFA_AGENT" && {FETCH}',
            f"{wfa} tool count --n 2",
            f"{wfa} result {call} --verdict approve",
        ]
        done = len(conv.tool_results)
        return Shell(commands[done]) if done < len(commands) else Text("Finished.")

    return script


@pytest.fixture(params=["asyncio"])
def anyio_backend(request):
    return request.param  # three real CLIs per test: once, on asyncio, is enough here


async def test_each_cli_answers_calls_a_tool_and_reaches_only_its_model_from_a_sandbox(tmp_path):
    secret = tmp_path / "home" / ".ssh" / "id_rsa"
    secret.parent.mkdir(parents=True)
    secret.write_text("SECRET-KEY")
    work = tmp_path / "ws"
    work.mkdir()
    counted: list[int] = []

    def count(n: int) -> str:
        """Count to n."""
        counted.append(n)
        return f"counted {n}"

    async with ScriptedModel(script_for(secret)) as model:
        homes = tmp_path / "homes"
        runtimes = real_runtimes(model, homes)

        @workflow(name="sandboxed-clis", description="The three CLIs in one sandbox.")
        async def flow(wf):
            box = await wf.sandboxes.open("box", cwd="ws", write=["."])

            async def one(name: str):
                agent = await wf.agents.open(name, runtime=runtimes[name], tools={"count": tool(count)}, sandbox=box)
                turn = await agent.run("Review the change.", schema=Verdict, timeout=90)
                return msgspec.to_builtins(turn)

            return dict(zip(CLIS, await wf.parallel(CLIS, one)))

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    for name in CLIS:
        turn = result.value[name]
        assert turn["outcome"]["kind"] == "answered", (name, turn)
        assert turn["outcome"]["value"] == {"verdict": "approve"}
        assert (work / f"made-{name}").read_text().strip() == name
    assert counted == [2, 2, 2]
    outputs = [t for r in model.requests if r.conversation for t in r.conversation.tool_results]
    assert not any("SECRET-KEY" in output for output in outputs)
    assert sum("no-secret" in output for output in outputs) >= 3
    assert {request.dialect for request in model.requests} >= {"anthropic", "responses", "chat"}
    refused = [line["fields"] for line in read_lines(result.run_dir / "log.jsonl") if "refused" in line.get("fields", {})]
    assert sorted((line["agent"], line["target"]) for line in refused) == [(name, "example.com:443") for name in CLIS]


async def test_a_silent_turn_is_nudged_by_resuming_the_session_kept_in_the_sandboxed_home(tmp_path):
    from agentswf.wire.prompts import NUDGE_TEXT

    def script(conv: Conversation):
        wfa, call = TAUGHT.search(conv.prompt).groups()  # type: ignore[union-attr]
        if NUDGE_TEXT not in conv.prompt:
            return Text("Thinking.")  # ends the first attempt without an answer
        return Shell(f"{wfa} result {call} --verdict approve") if not conv.tool_results else Text("Done.")

    (tmp_path / "ws").mkdir()
    async with ScriptedModel(script) as model:
        homes = tmp_path / "homes"
        runtimes = real_runtimes(model, homes)

        @workflow(name="sandboxed-nudge", description="Each CLI nudged in its sandbox.")
        async def flow(wf):
            async def one(name: str):
                agent = await wf.agents.open(name, runtime=runtimes[name], sandbox={"cwd": "ws"})
                return msgspec.to_builtins(await agent.run("Review the change.", schema=Verdict, timeout=90))

            return dict(zip(CLIS, await wf.parallel(CLIS, one)))

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    for name in CLIS:
        turn = result.value[name]
        assert turn["outcome"]["kind"] == "answered" and turn["nudged"], (name, turn)
    nudges = [r for r in model.requests if r.conversation and NUDGE_TEXT in r.conversation.prompt]
    assert {r.dialect for r in nudges} == {"anthropic", "responses", "chat"}
    assert all(any("Review the change" in str(item) for item in r.conversation.history) for r in nudges)  # resumed
