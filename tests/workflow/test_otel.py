"""The `agentswf[otel]` extra: a run's spans, checked with the SDK's in-memory exporter.

Skipped without the extra (.ci/run installs it for this file)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import agentswf
from agentswf import tool, workflow
from agentswf.otel import export_run

AGENT = """#!/bin/sh
"$WFA" tool note --text 'first' </dev/null >/dev/null 2>&1
"$WFA" send workflow 'a note is kept' </dev/null >/dev/null 2>&1
echo done | "$WFA" result "$WFA_CALL_ID" >/dev/null 2>&1
"""


def note(text: str) -> str:
    """Keep a note."""
    return "kept"


def _flow(script: Path):  # type: ignore[no-untyped-def]
    @workflow(name="spans", description="An agent calls a tool, tells the workflow, answers.")
    async def spans(wf):  # type: ignore[no-untyped-def]
        agent = await wf.agents.open("worker", runtime=f"shell:{script}", tools={"note": tool(note)})
        await wf.route(agent, wf, purpose="notes")
        turn = await agent.run("Note, tell, answer.")
        await wf.receive()
        return turn.value

    return spans


@pytest.fixture
def provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return tracer_provider, exporter


async def test_a_traced_run_exports_its_run_turn_tool_and_message_spans(tmp_path, provider, monkeypatch) -> None:
    tracer_provider, exporter = provider
    monkeypatch.setattr(otel_trace, "get_tracer_provider", lambda: tracer_provider)  # the global one, for this test
    script = tmp_path / "agent.sh"
    script.write_text(AGENT)
    script.chmod(0o755)
    result = await agentswf.run(_flow(script), run_root=tmp_path, cwd=tmp_path, trace=True)
    assert result.completed, result.reason
    spans = {span.name: span for span in exporter.get_finished_spans()}
    run = spans["run spans"]
    turn = spans["turn worker 1"]
    tool_call = spans["tool note"]
    message = spans["message worker -> workflow"]
    assert run.attributes["agentswf.outcome"] == "completed" and run.status.status_code is StatusCode.OK
    assert run.attributes["agentswf.run_id"] == result.run_id
    assert turn.parent.span_id == run.context.span_id and message.parent.span_id == run.context.span_id
    assert tool_call.parent.span_id == turn.context.span_id
    assert turn.attributes["agentswf.agent"] == "worker" and turn.attributes["agentswf.outcome"] == "answered"
    assert tool_call.attributes["agentswf.outcome"] == "result"
    assert message.attributes["agentswf.outcome"] == "read"
    assert run.start_time <= turn.start_time <= tool_call.start_time <= tool_call.end_time <= turn.end_time <= run.end_time


async def test_an_untraced_run_exports_nothing_until_asked(tmp_path, provider, monkeypatch) -> None:
    tracer_provider, exporter = provider
    monkeypatch.setattr(otel_trace, "get_tracer_provider", lambda: tracer_provider)
    script = tmp_path / "agent.sh"
    script.write_text(AGENT)
    script.chmod(0o755)
    result = await agentswf.run(_flow(script), run_root=tmp_path, cwd=tmp_path)
    assert result.completed, result.reason
    assert exporter.get_finished_spans() == ()
    assert export_run(result.run_dir, tracer_provider) == 4  # a recorded run, exported afterwards
    failed = [span for span in exporter.get_finished_spans() if span.status.status_code is StatusCode.ERROR]
    assert failed == []
