"""A run leaves the process's collector as it found it (the process is its program's); the
program that owns the process paces it with `pace_collector` (`awf` does, as it starts)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from agentswf import Workflow, workflow
from agentswf.engine.collector import (
    RUN_GC_OLDER_THRESHOLD,
    RUN_GC_OLDEST_THRESHOLD,
    RUN_GC_YOUNG_THRESHOLD,
    pace_collector,
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
async def test_a_run_leaves_the_collector_as_it_found_it(own_thresholds, run_root) -> None:
    run = await run_workflow(reports, agents={}, run_root=run_root)
    assert run.value == list(OWN)
    assert gc.get_threshold() == OWN


def test_the_program_paces_the_collector(own_thresholds) -> None:
    pace_collector()
    assert gc.get_threshold() == (RUN_GC_YOUNG_THRESHOLD, RUN_GC_OLDER_THRESHOLD, RUN_GC_OLDEST_THRESHOLD)


def test_a_process_already_paced_higher_keeps_its_own(own_thresholds) -> None:
    gc.set_threshold(200_000, 50, 500)
    pace_collector()
    assert gc.get_threshold() == (200_000, 50, 500)


def test_awf_paces_its_process_before_a_run(tmp_path) -> None:
    """`awf run` is the program that owns its process: the workflow sees the paced thresholds."""
    import subprocess
    import sys

    flow = tmp_path / "flow.py"
    flow.write_text(
        "import gc\nfrom agentswf import Workflow, workflow\n\n"
        "@workflow(name='thresholds', description='Says the collector\\'s thresholds.')\n"
        "async def thresholds(wf: Workflow) -> str:\n    return ' '.join(map(str, gc.get_threshold()))\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "agentswf", "run", str(flow), "--run-root", str(tmp_path / "runs")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    paced = f"{RUN_GC_YOUNG_THRESHOLD} {RUN_GC_OLDER_THRESHOLD} {RUN_GC_OLDEST_THRESHOLD}"
    assert paced in done.stdout, done.stdout + done.stderr
