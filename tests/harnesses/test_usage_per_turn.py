"""Each turn records its own usage, not its session's: claude, codex and pi, resumed and nudged.

A resume reports the session's running totals where the CLI keeps them (`codex exec resume`:
every token count; claude: `total_cost_usd`), so a second turn, or a nudge, counted what the
turns before it spent again. The scripted model reports the same usage on every call it
answers, so what a turn spent is known from the calls the server answered in it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentswf
from agentswf import tool, workflow
from agentswf.harnesses.prices import Price, Prices
from agentswf.harnesses.usage import Usage, add_usage
from agentswf.testing.models import ModelRequest, ScriptedModel
from agentswf.testing.models.envs import CODEX_MODEL
from agentswf.wire.prompts import NUDGE_TEXT

from .test_real_clis import CLIS, Verdict, runtimes, script_for
from .test_real_clis import pytestmark as real_clis

pytestmark = real_clis
INPUT_TOKENS, OUTPUT_TOKENS = 100, 20  # what the scripted model reports for every call
DIALECTS = {"claude": "anthropic", "codex": "responses", "pi": "chat"}
MARK = re.compile(r"TURN-(\d)")
# The turns each agent takes: an answer, another (a resume), a silent one that is nudged (a resume
# within the turn), one that calls a tool (more calls in one attempt).
SCENARIOS = ("answer", "answer", "silent", "tool")
# codex prints no dollars: its tokens are priced from the runtime's table, and marked estimated
CODEX_PRICE = Price(input=2.0, output=10.0, cache_read=0.5)
PRICES = Prices(as_of="2026-12-01", models={CODEX_MODEL: CODEX_PRICE})


def count(n: int) -> str:
    """Count to n."""
    return f"counted {n}"


@pytest.fixture(params=["asyncio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)  # three real CLIs; once, on asyncio, is enough here


def calls_per_turn(requests: list[ModelRequest], dialect: str) -> dict[int, int]:
    """How many model calls the server answered in each turn, for one CLI (one dialect).

    A call belongs to the turn whose mark its prompt carries; the nudge's prompt carries none,
    so its calls go to the turn before them."""
    counted: dict[int, int] = {}
    turn = 0
    for request in requests:
        if request.dialect != dialect or request.conversation is None or request.status != 200:
            continue
        found = MARK.search(request.conversation.prompt)
        if found:
            turn = int(found.group(1))
        elif NUDGE_TEXT not in request.conversation.prompt:
            assert turn, f"a call before any turn: {request.conversation.prompt[:200]}"
        counted[turn] = counted.get(turn, 0) + 1
    return counted


async def run_turns(tmp_path: Path) -> tuple[agentswf.RunResult, ScriptedModel]:
    async with ScriptedModel(script_for(tmp_path), input_tokens=INPUT_TOKENS, output_tokens=OUTPUT_TOKENS) as model:
        agents = runtimes(model, tmp_path / "homes")
        agents["codex"] = msgspec.structs.replace(agents["codex"], model=CODEX_MODEL, prices=PRICES)

        @workflow(name="usage-per-turn", description="Four turns of each CLI, resumed and nudged.")
        async def flow(wf: agentswf.Workflow) -> dict[str, list[dict[str, Any]]]:
            async def one(name: str) -> list[dict[str, Any]]:
                # keys of one group, `cli`
                agent = await wf.agents.open(f"cli:{name}", runtime=agents[name], tools={"count": tool(count)})
                turns = []
                for n, scenario in enumerate(SCENARIOS, start=1):
                    turn = await agent.run(f"TURN-{n} SCENARIO {scenario}. Review the change.", schema=Verdict, timeout=60)
                    turns.append(msgspec.to_builtins(turn))
                return [*turns, msgspec.to_builtins(agent.usage)]

            return dict(zip(CLIS, await wf.parallel(CLIS, one), strict=True))

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    return result, model


async def test_each_turn_records_what_it_spent_itself_tokens_and_dollars(tmp_path: Path) -> None:
    result, model = await run_turns(tmp_path)
    turns = {name: result.value[name][:-1] for name in CLIS}
    for name in CLIS:
        calls = calls_per_turn(model.requests, DIALECTS[name])
        assert sorted(calls) == [1, 2, 3, 4], (name, calls)
        assert calls[3] >= 2 and calls[4] >= 2, (name, calls)  # the nudge, the tool call: more calls
        for n, turn in enumerate(turns[name], start=1):
            assert turn["outcome"]["kind"] == "answered", (name, n, turn)
            usage = turn["usage"]
            assert usage["input_tokens"] == calls[n] * INPUT_TOKENS, (name, n, usage, calls)
            assert usage["output_tokens"] == calls[n] * OUTPUT_TOKENS, (name, n, usage, calls)
        assert turns[name][2]["nudged"], name
    # claude prints a resumed session's running cost: each turn costs what its own calls cost
    calls = calls_per_turn(model.requests, DIALECTS["claude"])
    costs = [turn["usage"]["cost_usd"] for turn in turns["claude"]]
    per_call = costs[0] / calls[1]  # every call reports the same tokens, so each costs the same
    assert per_call > 0
    for n, cost in enumerate(costs, start=1):
        assert cost == pytest.approx(calls[n] * per_call), (n, costs, calls)
        assert "estimated" not in turns["claude"][n - 1]["usage"]  # claude prints its dollars
    # codex's cost is its tokens at the runtime's prices, estimated; claude's and pi's are printed
    for n, turn in enumerate(turns["codex"], start=1):
        usage = turn["usage"]
        cost = (usage["input_tokens"] * CODEX_PRICE.input + usage["output_tokens"] * CODEX_PRICE.output) / 1e6
        assert usage["estimated"] is True and usage["cost_usd"] == pytest.approx(cost), (n, usage)
        assert usage["model"] == CODEX_MODEL
    assert turns["claude"][0]["usage"]["model"] and turns["pi"][0]["usage"]["model"]
    # the sums: each agent's, its group's, the run's, the record's usage.json
    spent = result.usage
    for name in CLIS:
        mine = None
        for turn in turns[name]:
            mine = add_usage(mine, msgspec.convert(turn["usage"], Usage))
        assert msgspec.convert(result.value[name][-1], Usage) == mine == spent.agents[f"cli:{name}"], name
    assert spent.turns == 12 and spent.groups == {"cli": spent.total} and spent.total is not None
    assert spent.total.estimated and spent.total.input_tokens == sum(
        turn["usage"]["input_tokens"] for name in CLIS for turn in turns[name]
    )
    assert msgspec.json.decode((result.run_dir / "usage.json").read_bytes())["total"] == msgspec.to_builtins(spent.total)
