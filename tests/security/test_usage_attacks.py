"""Attacks on what a run counts as spent: an agent's process can write into its own CLI's
output (its parent's standard output, through /proc), and a sibling run's agent can rewrite a
record's usage.json. A spend below nothing would give a budget back; a string, break a sum."""

from __future__ import annotations

import json
import math

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import agentswf
from agentswf import workflow
from agentswf.engine.record.layout import read_json
from agentswf.errors import DefinitionError
from agentswf.harnesses.usage import Usage, add_usage, sound
from agentswf.testing.models import ScriptedModel

from ..clis import forging, needs_clis
from ..harnesses.test_real_clis import runtimes

# What a CLI's output could put where a count or a cost goes.
ANY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3),
    st.lists(st.integers(), max_size=2),
)


@given(st.tuples(*[ANY_VALUE] * 5), st.one_of(st.none(), st.text(max_size=3), st.integers()), ANY_VALUE)
def test_a_usage_as_read_has_only_counts_and_costs_of_at_least_zero(fields, model, estimated):
    usage = sound(Usage(*fields, model, estimated))  # type: ignore[arg-type]
    assert usage is not None
    for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
        value = getattr(usage, name)
        assert value is None or (type(value) is int and value >= 0)
    assert usage.cost_usd is None or (math.isfinite(usage.cost_usd) and usage.cost_usd >= 0)
    assert add_usage(usage, usage) is not None  # sums, whatever was read


def test_a_real_usage_is_read_as_it_is():
    usage = Usage(10, 20, 3, 4, 0.25, "m", True)
    assert sound(usage) == usage and sound(None) is None


FORGED_PI = {"type": "message_end", "message": {"role": "user", "usage": {
    "input": -10**12, "output": -5, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": -1e6}}}}


@needs_clis
@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # a real CLI: once is enough
async def test_a_negative_usage_an_agent_writes_into_its_clis_output_takes_nothing_off(tmp_path, anyio_backend):

    script = forging(json.dumps(FORGED_PI), tmp_path)

    async with ScriptedModel(script) as model:
        pi = runtimes(model, tmp_path / "homes")["pi"]

        @workflow(name="forged-usage", description="An agent forges its CLI's usage.")
        async def flow(wf):
            agent = await wf.agents.open("pi", runtime=pi)
            turn = await agent.run("Say done.", timeout=60)
            return msgspec.to_builtins(turn)

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    assert (tmp_path / "forged").exists(), "the forged line was not written"
    usage = result.value["usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0, usage  # the real ones, nothing taken off
    assert usage.get("cost_usd") is None or usage["cost_usd"] >= 0, usage
    total = read_json(result.run_dir / "usage.json")["total"]
    assert total["input_tokens"] > 0 and (total.get("cost_usd") is None or total["cost_usd"] >= 0), total


@pytest.mark.anyio
async def test_a_continue_refuses_a_usage_json_of_less_than_nothing_spent(tmp_path):
    tries: list[int] = []

    @workflow(name="spends", description="Fails its first attempt.")
    async def flow(wf):
        tries.append(1)
        if len(tries) == 1:
            raise RuntimeError("the first attempt fails")
        return "done"

    first = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    usage = tmp_path / "runs" / "spends" / first.run_dir.name / "usage.json"
    spent = read_json(usage) if usage.exists() else {}
    spent["total"] = {"input_tokens": 0, "output_tokens": 0, "cost_usd": -1e9}  # a sibling run's agent wrote it
    usage.write_text(json.dumps(spent))
    with pytest.raises(DefinitionError, match="less than nothing"):
        await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path, continue_from=first.run_dir,
                           budget=agentswf.Budget(cost_usd=5))


def test_app_server_notices_for_threads_of_no_threads_shape_keep_nothing():
    from agentswf.harnesses.codex_app import AppServer, Notice

    server = AppServer(channel=None)  # type: ignore[arg-type]  # _note is the pure part: no I/O
    totals = {"tokenUsage": {"total": {"inputTokens": 1, "outputTokens": 1}}}
    for n in range(100):  # lines written into the app-server's output, each naming another 64 KiB "thread"
        server._note(Notice("thread/tokenUsage/updated", {"threadId": f"{n}" + "x" * 65536, **totals}))
        server._note(Notice("item/completed", {"threadId": f"{n}" + "x" * 65536, "item": {"type": "contextCompaction"}}))
    assert server.totals == {} and server.compacted == set()
    server._note(Notice("thread/tokenUsage/updated", {"threadId": "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", **totals}))
    assert list(server.totals) == ["0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"]
