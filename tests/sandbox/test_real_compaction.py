"""A sandboxed agent compacts in its sandbox, for real: claude, codex (its app-server) and pi, offline.

The compaction's CLI runs in the agent's sandbox, with its sandboxed home (where its session is)
and the proxy to its model: the compaction's request reaches the scripted model through the
sandbox's way out, and the next turn, in the sandbox too, runs on the summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import msgspec
import pytest

import agentswf
from agentswf import workflow
from agentswf.testing.models import Conversation, ScriptedModel, Shell, Text

from ..clis import CLIS, TAUGHT, compacting, needs_clis, pi_keeps_focus, real_runtimes
from .kit import needs_bwrap

pytestmark = [pytest.mark.anyio, needs_bwrap, needs_clis]
SUMMARY = "SUMMARY: the verdict was approve"


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    verdict: Literal["approve", "reject"]


@pytest.fixture(params=["asyncio"])
def anyio_backend(request):
    return request.param  # three real CLIs in sandboxes: once, on asyncio, is enough


def script(conv: Conversation):
    found = TAUGHT.search(conv.prompt)
    if found is None or compacting(conv):  # a compaction's request
        return Text(SUMMARY)
    wfa, call = found.groups()
    return Shell(f"{wfa} result {call} --verdict approve") if not conv.tool_results else Text("Done.")


def texts(history: tuple) -> str:
    return msgspec.json.encode(list(history)).decode()


async def test_each_cli_compacts_in_its_sandbox_and_its_next_turn_runs_on_the_summary(tmp_path: Path):
    (tmp_path / "ws").mkdir()
    async with ScriptedModel(script) as model:
        homes = tmp_path / "homes"
        runtimes = real_runtimes(model, homes)

        @workflow(name="sandboxed-compaction", description="Each CLI compacted in its sandbox.")
        async def flow(wf):
            box = await wf.sandboxes.open("box", cwd="ws", write=["."])

            async def one(name: str):
                agent = await wf.agents.open(name, runtime=runtimes[name], sandbox=box)
                await agent.run(f"PARENT-ONE {name} review it.", schema=Verdict, timeout=90)
                compacted = await agent.compact(f"FOCUS-MARK {name}", timeout=90)
                after = await agent.run(f"PARENT-TWO {name} review it.", schema=Verdict, timeout=90)
                return compacted.outcome.kind, compacted.value, after.answered

            return dict(zip(CLIS, await wf.parallel(CLIS, one)))

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    calls = [r.conversation for r in model.requests if r.conversation is not None]
    for name in CLIS:
        kind, summary, answered = result.value[name]
        assert (kind, answered) == ("answered", True) and SUMMARY in summary, name  # pi 1.x adds to it
        mark = "" if name == "pi" and not pi_keeps_focus() else f"FOCUS-MARK {name}"  # an older pi drops it (split turn)
        compactions = [c for c in calls if compacting(c) and mark in texts(c.history) + c.prompt]
        assert compactions, name
        later = [c for c in calls if f"PARENT-TWO {name}" in c.prompt]
        assert later and all(SUMMARY in texts(c.history) for c in later), name
