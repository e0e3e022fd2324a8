"""The suite's shared settings: Hypothesis without deadlines, and which tests are end-to-end.

Hypothesis has no per-example deadline, since the suite runs in parallel workers on loaded
machines and a deadline there fails on timing, not on a property.

A test that needs an agent CLI, bubblewrap or tmux says so with the mark `needs(...)` (the
helpers in tests/clis.py, tests/sandbox/kit.py and tests/panes/kit.py give it) and is marked
`e2e` here: a plain `pytest` leaves those out (`-m "not e2e"` in pyproject's addopts) and
`pytest -m e2e` runs them. Where what a test needs is missing it skips here, in one place, so
the summary folds the skips of one reason into one line rather than a line per test; a module
that skips whole (an extra not installed) is said at this folder, so those fold by reason too."""

from __future__ import annotations

import functools
import shutil
from collections.abc import Generator
from pathlib import Path

import pytest
from hypothesis import settings

from agentswf.testing.models import CLI_DIR_VARIABLE, find_cli

from .clis import ACP_CLIS, CLIS  # importing it points $AGENTSWF_CLI_DIR at .ci/run's install, where there is one

pytest_plugins = ["pytester"]  # tests/testing/test_pytest_plugin.py runs a project's pytest in-process

settings.register_profile("agentswf-suite", deadline=None)
settings.load_profile("agentswf-suite")

SUITE = Path(__file__).parent
TOOLS = {
    "bwrap": "bubblewrap (`bwrap`; .ci/run installs the package bubblewrap where apt can)",
    "tmux": "tmux (apt-get install tmux)",
}
"""What a `needs` mark may name besides the agent CLIs, and how the skip names it."""


@functools.cache
def missing(thing: str) -> bool:
    return find_cli(thing) is None if thing in (*CLIS, *ACP_CLIS) else shutil.which(thing) is None


def why_skipped(needed: tuple[str, ...]) -> str | None:
    """The skip's reason where something in `needed` is missing, else None."""
    absent = [thing for thing in dict.fromkeys(needed) if missing(thing)]
    clis = [thing for thing in absent if thing in (*CLIS, *ACP_CLIS)]
    said = [TOOLS[thing] for thing in absent if thing in TOOLS]
    if clis:
        some = len(clis) > 1
        where = f"looked in ${CLI_DIR_VARIABLE} and PATH; .ci/run installs {'them' if some else 'it'} from npm"
        said.insert(0, f"the agent CLI{'s' if some else ''} {', '.join(clis)} ({where})")
    return f"not installed here: {'; '.join(said)}" if said else None


def needed_by(item: pytest.Item) -> tuple[str, ...]:
    return tuple(thing for mark in item.iter_markers("needs") for thing in mark.args)


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        needed = needed_by(item)
        unknown = [thing for thing in needed if thing not in (*CLIS, *ACP_CLIS, *TOOLS)]
        if unknown:
            raise pytest.UsageError(f"{item.nodeid} needs {unknown}: a `needs` mark names one of {[*CLIS, *ACP_CLIS, *TOOLS]}")
        if needed:
            item.add_marker(pytest.mark.e2e)


@pytest.hookimpl(tryfirst=True)  # before the test's fixtures start anything
def pytest_runtest_setup(item: pytest.Item) -> None:
    reason = why_skipped(needed_by(item))
    if reason:
        pytest.skip(reason)


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """A module skipped whole is said at the suite's folder, so those of one reason fold into one
    line (which xdist counts once, as it passes on one of identical collection reports)."""
    report = yield
    if report.skipped and isinstance(collector, pytest.Module) and isinstance(report.longrepr, tuple):
        report.longrepr = (str(SUITE), None, report.longrepr[2])
    return report
