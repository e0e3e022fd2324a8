"""OpenTelemetry spans of a run, from its record (the `agentswf[otel]` extra).

One span for the run, a child of it for each turn, a child of its turn for each tool call,
and one for each message (from sent to read), each with its recorded start and end time
and attributes for the agent, the outcome and the usage. They are made from the record
after the run rather than as it goes, so a run pays nothing for them while it works and
a recorded run can be exported any time: `export_run(run_dir)`. `agentswf.run(...,
trace=True)` (`awf run --trace`) exports each run so when the extra is installed, to the
global tracer provider (OpenTelemetry's no-op one unless the program configured one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider

from .engine.record.layout import read_json, read_lines

INSTRUMENTATION_NAME = "agentswf"
_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cost_usd")


def _ns(unix: float | None) -> int | None:
    return None if unix is None else int(unix * 1e9)


def _usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    return {f"agentswf.usage.{name}": usage[name] for name in _USAGE_FIELDS if usage and usage.get(name) is not None}


def _end(span: Span, at: float | None, ok: bool, reason: str = "") -> None:
    span.set_status(Status(StatusCode.OK) if ok else Status(StatusCode.ERROR, reason[:200]))
    span.end(end_time=_ns(at))


def export_run(run_dir: Path, provider: TracerProvider | None = None) -> int:
    """The spans of the run recorded in `run_dir`, to `provider` (the global one by default);
    returns how many. Blocking, as the provider's exporter may be."""
    tracer = (provider or trace.get_tracer_provider()).get_tracer(INSTRUMENTATION_NAME)
    info = read_json(run_dir / "run.json")
    output_path = run_dir / "output.json"
    output = read_json(output_path) if output_path.exists() else {}
    run_span = tracer.start_span(
        f"run {info['workflow']}",
        kind=SpanKind.INTERNAL,
        start_time=_ns(info.get("started_at")),
        attributes={"agentswf.run_id": info["run_id"], "agentswf.workflow": info["workflow"],
                    "agentswf.outcome": output.get("outcome", "unfinished")},
    )
    count = 1
    context = trace.set_span_in_context(run_span)
    turns: dict[str, Span] = {}
    endings: dict[str, tuple[float | None, bool, str]] = {}  # call id -> ended at, answered, reason
    for turn in read_lines(run_dir / "turns.jsonl"):
        outcome = turn.get("outcome") or {}
        span = tracer.start_span(
            f"turn {turn['agent']} {turn['n']}",
            context=context,
            start_time=_ns(turn.get("started_at")),
            attributes={"agentswf.agent": turn["agent"], "agentswf.turn": turn["n"], "agentswf.call_id": turn["call_id"],
                        "agentswf.outcome": outcome.get("kind", "?"), **_usage(turn.get("usage"))},
        )
        turns[turn["call_id"]] = span
        endings[turn["call_id"]] = (turn.get("ended_at"), outcome.get("kind") == "answered", outcome.get("reason", ""))
        count += 1
    for call in read_lines(run_dir / "tools.jsonl"):
        parent = turns.get(call.get("turn_call_id", ""))
        span = tracer.start_span(
            f"tool {call['tool']}",
            context=trace.set_span_in_context(parent) if parent is not None else context,
            start_time=_ns(call.get("started_at")),
            attributes={"agentswf.agent": call["agent"], "agentswf.tool": call["tool"], "agentswf.outcome": call["outcome"]},
        )
        _end(span, call.get("ended_at"), call["outcome"] == "result", call.get("error", ""))
        count += 1
    read_at = {line["message_id"]: line["at"] for line in read_lines(run_dir / "messages.jsonl") if line.get("event") == "read"}
    for line in read_lines(run_dir / "messages.jsonl"):
        if line.get("event") != "sent":
            continue
        mail = line["mail"]
        span = tracer.start_span(
            f"message {mail['sender']} -> {mail['to']}",
            context=context,
            start_time=_ns(mail.get("at")),
            attributes={"agentswf.agent": mail["sender"], "agentswf.to": mail["to"], "agentswf.kind": mail["kind"],
                        "agentswf.outcome": "read" if mail["id"] in read_at else "unread"},
        )
        span.end(end_time=_ns(read_at.get(mail["id"], mail.get("at"))))
        count += 1
    for call_id, span in turns.items():  # after their tool calls: a parent ends after its children
        _end(span, *endings[call_id])
    _end(run_span, output.get("ended_at"), output.get("outcome") == "completed", output.get("reason") or "")
    return count
