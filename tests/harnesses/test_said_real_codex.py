"""The real codex that can't reach its model (a closed port, its retries on as a real config has
them) reconnects over and over on its JSON output until the turn's deadline: the turn's reason and
the record say so (harnesses/said.py), where before it timed out saying nothing of why."""

from __future__ import annotations

import socket
import types
from pathlib import Path

import pytest

import agentswf
from agentswf import Runtime, workflow
from agentswf.engine.record.layout import read_lines
from agentswf.testing.models import codex_env, find_cli

from .kit import turns


@pytest.fixture(params=["asyncio"])
def anyio_backend(request):
    return request.param  # a real CLI waiting out its deadline: once is enough (the engine's part runs on both in test_said.py)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.needs("codex")
async def test_the_real_codex_that_cant_reach_its_model_times_out_saying_so(tmp_path):
    unreachable = types.SimpleNamespace(base_url=f"http://127.0.0.1:{_closed_port()}")
    env = codex_env(unreachable, tmp_path / "home")  # type: ignore[arg-type]  # only its base_url is read
    config = Path(env["CODEX_HOME"]) / "config.toml"
    config.write_text(config.read_text().replace("_max_retries = 0", "_max_retries = 5"))
    codex = find_cli("codex")
    assert codex is not None

    @workflow(name="rx", description="codex with no model to reach")
    async def flow(wf):
        agent = await wf.agents.open("reviewer", runtime=Runtime(harness="codex", command=(codex,), env=env))
        turn = await agent.run("Review.", timeout="10s", nudge=False)
        return [turn.outcome.kind, turn.outcome.reason]

    result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    kind, reason = result.value
    assert kind == "timed-out" and "; the CLI's last lines:\n" in reason and "Reconnecting..." in reason, reason
    [turn] = turns(result)
    [line] = read_lines(result.run_dir / "calls" / turn["call_id"] / "attempts.jsonl")
    assert line["ending"] == "stopped" and "Reconnecting..." in line["stderr"], line
