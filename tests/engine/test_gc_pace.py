"""While a run lives, the cyclic collector runs at a run's pace (engine/run.py: at 1,000
agents the default pace spent a fifth of the run's CPU in collections); the process's own
thresholds come back once the last run of the process ends, whatever order runs end in. A full
collection waits longer too: at Python's 10 one fell inside almost every 1,000-agent run on trio."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from agentswf import Workflow, workflow
from agentswf.engine.run import (
    RUN_GC_OLDER_THRESHOLD,
    RUN_GC_OLDEST_THRESHOLD,
    RUN_GC_YOUNG_THRESHOLD,
    gc_paced_for_runs,
)
from agentswf.testing import run_workflow

OWN = (700, 10, 10)  # the process's own, as Python sets them


@pytest.fixture
def own_thresholds() -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(*OWN)
    yield
    gc.set_threshold(*saved)


@workflow(name="gc-pace", description="Says what the collector's thresholds are while it runs.")
async def reports(wf: Workflow) -> list[int]:
    return list(gc.get_threshold())


@pytest.mark.anyio
async def test_a_run_paces_the_collector_while_it_lives(own_thresholds, run_root) -> None:
    run = await run_workflow(reports, agents={}, run_root=run_root)
    assert run.value == [RUN_GC_YOUNG_THRESHOLD, RUN_GC_OLDER_THRESHOLD, RUN_GC_OLDEST_THRESHOLD]
    assert gc.get_threshold() == OWN


def test_the_thresholds_come_back_when_the_last_of_overlapping_runs_ends(own_thresholds) -> None:
    first, second = gc_paced_for_runs(), gc_paced_for_runs()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # not in the order they began
    assert gc.get_threshold() == (RUN_GC_YOUNG_THRESHOLD, RUN_GC_OLDER_THRESHOLD, RUN_GC_OLDEST_THRESHOLD)
    second.__exit__(None, None, None)
    assert gc.get_threshold() == OWN


def test_a_process_already_paced_higher_keeps_its_own(own_thresholds) -> None:
    gc.set_threshold(200_000, 50, 500)
    with gc_paced_for_runs():
        assert gc.get_threshold() == (200_000, 50, 500)
    assert gc.get_threshold() == (200_000, 50, 500)
