"""The process's cyclic garbage collector, paced for runs of many agents.

A run leaves the process's cyclic garbage collector as it found it: the process is its
program's, not the library's (engine/run.py). A program running many agents does well to pace it
(`pace_collector`, which `awf` calls as it starts): a run of many agents keeps hundreds of
thousands of live objects (actors, mailboxes, tasks, cancel scopes, turn states), and at
1,000 agents × 10 calls Python's pace spent about a fifth of the run's CPU in collections
(eight full ones of ~150 ms each, a thousand young ones) that found little: what a call
leaves is freed by reference counting. Left at Python's pace, `benchmarks/scale.py --sizes
1000` spent 30-70 % more CPU a tool call and 20-40 % more an agent (benchmarks/RESULTS.md).
At a young threshold of 100,000 rather than 10,000 the young and middle collections of 1,000
agents' turns took 0.14 ms an agent, not 0.2: what a turn holds for a while is more often gone
before a collection looks at it. A full collection (every object of the process, ~0.1-0.2 s
at 1,000 agents open) waits for 20 middle ones instead of Python's 10: at 10 one fell into
almost every 1,000-agent run on trio; at 20 one comes every 20-40 M allocations. Paced as
`awf` paces it, as its process starts, the same measure spent what it did while runs paced it.
"""

from __future__ import annotations

import gc

RUN_GC_YOUNG_THRESHOLD = 100_000
"""Allocations (less deallocations) between two collections of the youngest generation, paced (Python's: 700)."""
RUN_GC_OLDER_THRESHOLD = 20
"""Young collections between two of the middle generation, paced (Python's: 10)."""
RUN_GC_OLDEST_THRESHOLD = 20
"""Middle collections between two full ones, paced (Python's: 10); Python's own rule (a full
one only once the objects promoted since the last one are a quarter of those it kept) holds as well."""


def pace_collector() -> None:
    """Pace the process's cyclic collector for runs of many agents (see the module's
    docstring), each threshold kept where the process has it higher. For the program that
    owns the process, once, as it starts (`awf` does); no run calls it."""
    young, older, oldest = gc.get_threshold()
    gc.set_threshold(
        max(young, RUN_GC_YOUNG_THRESHOLD), max(older, RUN_GC_OLDER_THRESHOLD), max(oldest, RUN_GC_OLDEST_THRESHOLD)
    )
