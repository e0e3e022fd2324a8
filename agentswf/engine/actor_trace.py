"""A run's mailbox trace (`agentswf.run(..., trace=True)`, `awf run --trace`): bounded, then sampled.

The run's Supervisor is given a `Tracer` whose sink is `RunTrace.add`: every enqueue,
dequeue, handled, failed and dead-lettered event of the run's own actors, and of no other
run's. What is kept is bounded: the first `TRACE_EVENTS_KEPT` events whole, then a uniform
sample of `TRACE_SAMPLE_KEPT` of the rest (reservoir sampling), and the record says so. The
per-actor counts, peak depths and the slowest hops are exact whatever was sampled; the
percentiles are of the kept events.

Written when the run's actors have stopped (so a stop's dead letters are in it), beside the
run's record: `actors.json` (how it was sampled, each actor's figures, the slowest hops)
and `actors.jsonl` (the kept events in time order).
"""

from __future__ import annotations

import heapq
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ..actors import Tracer
from .record.layout import encode, write_private

TRACE_EVENTS_KEPT = 20_000  # the first events of a run's trace, kept whole (events)
TRACE_SAMPLE_KEPT = 5_000  # past those, a uniform sample of the rest (events)
SLOWEST_HOPS_KEPT = 10  # the slowest handlings and the longest queue waits, each (events)
TRACE_SUMMARY_FILE = "actors.json"
TRACE_EVENTS_FILE = "actors.jsonl"


@dataclass
class ActorFigures:
    """One actor's exact counts over the whole run."""

    enqueued: int = 0
    handled: int = 0
    failed: int = 0
    dead_lettered: int = 0
    peak_depth: int = 0


@dataclass
class RunTrace:
    """The sink of one run's `Tracer`; see the module docstring."""

    started: float = field(default_factory=time.perf_counter)
    kept: list[dict[str, Any]] = field(default_factory=list)
    sample: list[dict[str, Any]] = field(default_factory=list)
    seen: int = 0
    actors: dict[str, ActorFigures] = field(default_factory=dict)
    slowest: list[tuple[float, int, dict[str, Any]]] = field(default_factory=list)  # min-heaps by time
    longest_queued: list[tuple[float, int, dict[str, Any]]] = field(default_factory=list)
    _random: random.Random = field(default_factory=lambda: random.Random(0))

    def tracer(self) -> Tracer:
        return Tracer(self.add)

    def add(self, event: str, fields: dict[str, Any]) -> None:
        kind = event.removeprefix("mailbox.")
        line = {"t": time.perf_counter() - self.started, "event": kind, **fields}
        self.seen += 1
        figures = self.actors.get(fields["actor"])
        if figures is None:
            figures = self.actors[fields["actor"]] = ActorFigures()
        if kind == "enqueue":
            figures.enqueued += 1
            figures.peak_depth = max(figures.peak_depth, fields["depth"])
        elif kind == "handled":
            figures.handled += 1
        elif kind == "failed":
            figures.failed += 1
        elif kind == "dead_letter":
            figures.dead_lettered += 1
        if fields.get("handling_s") is not None:
            self._keep_slowest(self.slowest, fields["handling_s"], line)
        if fields.get("queued_s") is not None:
            self._keep_slowest(self.longest_queued, fields["queued_s"], line)
        if len(self.kept) < TRACE_EVENTS_KEPT:
            self.kept.append(line)
            return
        past = self.seen - TRACE_EVENTS_KEPT  # the how-manieth event past the kept ones
        if len(self.sample) < TRACE_SAMPLE_KEPT:
            self.sample.append(line)
        else:
            slot = self._random.randrange(past)
            if slot < TRACE_SAMPLE_KEPT:
                self.sample[slot] = line

    def _keep_slowest(self, heap: list[tuple[float, int, dict[str, Any]]], took: float, line: dict[str, Any]) -> None:
        entry = (took, self.seen, line)
        if len(heap) < SLOWEST_HOPS_KEPT:
            heapq.heappush(heap, entry)
        elif took > heap[0][0]:
            heapq.heapreplace(heap, entry)

    def summary(self) -> dict[str, Any]:
        sampled = self.seen > TRACE_EVENTS_KEPT
        kept = len(self.kept) + len(self.sample)
        how = (
            f"the first {TRACE_EVENTS_KEPT} events whole, then a uniform sample of {len(self.sample)} "
            f"of the other {self.seen - TRACE_EVENTS_KEPT}"
            if sampled
            else "every event"
        )
        return {
            "events_seen": self.seen,
            "events_kept": kept,
            "cap": TRACE_EVENTS_KEPT,
            "sample_size": TRACE_SAMPLE_KEPT,
            "sampled": sampled,
            "kept_how": how,
            "actors": {name: vars(figures) for name, figures in sorted(self.actors.items())},
            "slowest_handling": [line for _, _, line in sorted(self.slowest, key=lambda e: -e[0])],
            "longest_queued": [line for _, _, line in sorted(self.longest_queued, key=lambda e: -e[0])],
        }

    def events(self) -> list[dict[str, Any]]:
        return self.kept + sorted(self.sample, key=lambda line: line["t"])


def write_trace(record_dir: Path, trace: RunTrace) -> None:
    """`actors.json` and `actors.jsonl` beside the run's record (blocking: run it in a thread)."""
    lines = b"".join(encode(line) + b"\n" for line in trace.events())
    write_private(record_dir / TRACE_EVENTS_FILE, lines)
    write_private(record_dir / TRACE_SUMMARY_FILE, msgspec.json.format(encode(trace.summary())))
