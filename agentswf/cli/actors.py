"""`awf trace RUN --actors`: a traced run's mailboxes, actor by actor, and its slowest hops."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TextIO

import msgspec

from ..engine.actor_trace import TRACE_EVENTS_FILE, TRACE_SUMMARY_FILE
from ..engine.record.layout import read_json, read_lines
from .failures import UsageFailure
from .shown import shown


def percentile(values: list[float], share: float) -> float | None:
    """The nearest-rank percentile of `values` (`share` in 0..1); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, round(share * len(ordered) + 0.5 - 1e-9))
    return ordered[min(rank, len(ordered)) - 1]


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.2f}ms"


def actor_rows(summary: dict[str, Any], events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each actor's figures: exact counts from the summary, percentiles of the kept events."""
    queued: dict[str, list[float]] = {}
    handling: dict[str, list[float]] = {}
    for line in events:
        if line.get("queued_s") is not None:
            queued.setdefault(line["actor"], []).append(line["queued_s"])
        if line.get("handling_s") is not None:
            handling.setdefault(line["actor"], []).append(line["handling_s"])
    rows = []
    for actor, figures in summary.get("actors", {}).items():
        rows.append(
            {
                "actor": actor,
                **figures,
                "queued_p50": percentile(queued.get(actor, []), 0.5),
                "queued_p99": percentile(queued.get(actor, []), 0.99),
                "handling_p50": percentile(handling.get(actor, []), 0.5),
                "handling_p99": percentile(handling.get(actor, []), 0.99),
            }
        )
    return rows


def _hop(line: dict[str, Any], took: str) -> str:
    what = shown(f"{line['actor']} {line['message_type']} ({line['event']}")  # the record's: an agent may have written it
    return f"  {_ms(line.get(took))}  {what}, at {line['t']:.3f}s, depth {line['depth']})\n"


def print_actors(run_dir: Path, out: TextIO) -> None:
    try:
        summary = read_json(run_dir / TRACE_SUMMARY_FILE)
    except FileNotFoundError:
        raise UsageFailure(f"run {run_dir.name} was not traced (awf run --trace records its mailboxes)") from None
    except (OSError, msgspec.DecodeError) as error:
        raise UsageFailure(f"run {run_dir.name}'s trace can't be read: {error}") from None
    events = list(read_lines(run_dir / TRACE_EVENTS_FILE))
    out.write(f"{summary['events_seen']} mailbox events, {summary['events_kept']} kept: {shown(str(summary['kept_how']))}\n")
    header = ("ACTOR", "HANDLED", "FAILED", "DEAD", "PEAK", "QUEUED p50", "p99", "HANDLING p50", "p99")
    table = [header]
    for row in actor_rows(summary, events):
        table.append(
            (
                shown(row["actor"]),
                str(row["handled"]),
                str(row["failed"]),
                str(row["dead_lettered"]),
                str(row["peak_depth"]),
                _ms(row["queued_p50"]),
                _ms(row["queued_p99"]),
                _ms(row["handling_p50"]),
                _ms(row["handling_p99"]),
            )
        )
    widths = [max(len(line[column]) for line in table) for column in range(len(header))]
    for line in table:
        out.write("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() + "\n")
    out.write("\nslowest handling:\n")
    out.writelines(_hop(line, "handling_s") for line in summary.get("slowest_handling", []))
    out.write("longest queued:\n")
    out.writelines(_hop(line, "queued_s") for line in summary.get("longest_queued", []))
