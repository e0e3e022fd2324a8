"""A run's mailbox trace: per run, bounded then sampled, and read by `awf trace RUN --actors`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

import agentswf
from agentswf import workflow
from agentswf.cli.actors import percentile
from agentswf.engine import actor_trace
from agentswf.engine.actor_trace import RunTrace

AWF = [sys.executable, "-m", "agentswf"]
ANSWER = 'shell:echo fine | "$WFA" result "$WFA_CALL_ID"'


@workflow(name="one-agent", description="The agent named in args answers once.")
async def one_agent(wf, key: str) -> str:  # type: ignore[no-untyped-def]
    agent = await wf.agents.open(key, runtime=ANSWER)
    return (await agent.run("Say fine.")).value


async def test_two_runs_in_one_process_trace_apart_and_an_untraced_one_not_at_all(tmp_path: Path) -> None:
    results = {}

    async def run(key: str, trace: bool) -> None:
        results[key] = await agentswf.run(one_agent, args=key, run_root=tmp_path, cwd=tmp_path, trace=trace)

    async with anyio.create_task_group() as runs:
        runs.start_soon(run, "alpha", True)
        runs.start_soon(run, "beta", True)
        runs.start_soon(run, "gamma", False)
    for key in ("alpha", "beta"):
        result = results[key]
        assert result.completed, result.reason
        summary = json.loads((result.run_dir / "actors.json").read_text())
        assert f"agent:{key}" in summary["actors"]
        assert {"recorder", "run", "switchboard"} <= set(summary["actors"])
        assert not any(other in name for name in summary["actors"] for other in {"alpha", "beta", "gamma"} - {key})
        assert summary["sampled"] is False and summary["events_seen"] == summary["events_kept"] > 0
        assert summary["actors"][f"agent:{key}"]["handled"] > 0
        events = [json.loads(line) for line in (result.run_dir / "actors.jsonl").read_text().splitlines()]
        assert len(events) == summary["events_kept"]
        assert {event["event"] for event in events} >= {"enqueue", "dequeue", "handled"}
        assert all(event["actor"] != "agent:gamma" for event in events)
    assert not (results["gamma"].run_dir / "actors.json").exists()


def test_awf_run_trace_then_awf_trace_actors(tmp_path: Path) -> None:
    flows = tmp_path / "flows.py"
    flows.write_text(
        "from agentswf import workflow\n\n"
        "@workflow(name='traced', description='One agent answers.')\n"
        "async def traced(wf):\n"
        f"    agent = await wf.agents.open('a', runtime={ANSWER!r})\n"
        "    return (await agent.run('Say fine.')).value\n"
    )
    ran = subprocess.run([*AWF, "run", str(flows), "--trace", "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    shown = subprocess.run([*AWF, "trace", run_id, "--actors"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].endswith("kept: every event")
    assert lines[1].split()[:5] == ["ACTOR", "HANDLED", "FAILED", "DEAD", "PEAK"]
    recorder = next(line for line in lines if line.startswith("recorder "))
    assert int(recorder.split()[1]) > 0 and "ms" in recorder
    assert "slowest handling:" in lines and "longest queued:" in lines
    assert lines[lines.index("slowest handling:") + 1].strip().split()[0].endswith("ms")

    untraced = subprocess.run([*AWF, "run", str(flows), "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    other = json.loads(untraced.stdout)["run_id"]
    refused = subprocess.run([*AWF, "trace", other, "--actors"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "was not traced" in refused.stderr


def test_past_the_cap_the_trace_is_a_bounded_sample_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(actor_trace, "TRACE_EVENTS_KEPT", 10)
    monkeypatch.setattr(actor_trace, "TRACE_SAMPLE_KEPT", 5)
    monkeypatch.setattr(actor_trace, "SLOWEST_HOPS_KEPT", 2)
    trace = RunTrace()
    for n in range(1000):
        trace.add("mailbox.enqueue", {"actor": "a", "message_type": "M", "depth": n % 7})
        trace.add("mailbox.handled", {"actor": "a", "message_type": "M", "depth": 0, "handling_s": n / 1000})
    summary = trace.summary()
    assert summary["events_seen"] == 2000 and summary["events_kept"] == 15 and len(trace.events()) == 15
    assert summary["sampled"] is True and "uniform sample of 5 of the other 1990" in summary["kept_how"]
    assert summary["actors"]["a"] == {"enqueued": 1000, "handled": 1000, "failed": 0, "dead_lettered": 0, "peak_depth": 6}
    assert [line["handling_s"] for line in summary["slowest_handling"]] == [0.999, 0.998]  # exact, whatever was sampled


@pytest.mark.parametrize("values, share, expected", [([], 0.5, None), ([3.0], 0.99, 3.0), ([4, 1, 3, 2], 0.5, 2), (list(range(1, 101)), 0.99, 99)])
def test_percentile_is_nearest_rank(values: list[float], share: float, expected: float | None) -> None:
    assert percentile(values, share) == expected
