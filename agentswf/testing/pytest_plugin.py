"""The pytest plugin agentswf installs (the `pytest11` entry point `agentswf`).

With it, a project's tests need nothing copied from anywhere:

- every `async def test_…` runs, on asyncio and on trio: it is marked for anyio's
  pytest plugin, whose `anyio_backend` fixture is parametrized by both. A test marked
  for another async plugin (`@pytest.mark.trio`, `@pytest.mark.asyncio`, or every test
  under pytest-trio's `trio_mode`) is left to that plugin.
- `--agentswf-backend trio` (or the ini option `agentswf_backend = trio`) runs them on
  one backend only: the tests of the other are deselected.
- a skipped test says why in the summary (as `-rs` would), unless `-rN` is given.
- the fixtures `run_root` (where the test's runs are recorded, under its `tmp_path`)
  and `run_record` (a finished run's record, read back).
- `@pytest.mark.virtual_time` (or `pytestmark = pytest.mark.virtual_time` for a module) runs an
  async test on a virtual clock, on both backends: its time jumps to the next deadline whenever
  the run has been idle a moment (`agentswf.testing.clock`).
"""

from __future__ import annotations

import inspect
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from ..engine.record.layout import find_run
from ..errors import WorkflowError
from ..workflow.running import RunResult
from .clock import virtual_clock
from .record import Record, RunRecord, read_record
from .runs import TestRun, remove_scratch_run_roots

BACKENDS = ("asyncio", "trio")
OTHER_ASYNC_MARKERS = ("trio", "asyncio")  # the markers of pytest-trio and pytest-asyncio
VIRTUAL_TIME = "virtual_time"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("agentswf")
    group.addoption(
        "--agentswf-backend",
        choices=BACKENDS,
        dest="agentswf_backend",
        help="run async tests on this backend only (default: both asyncio and trio)",
    )
    parser.addini("agentswf_backend", "run async tests on this backend only: asyncio or trio", default="")


@pytest.hookimpl(tryfirst=True)  # before the terminal reporter reads the report characters
def pytest_configure(config: pytest.Config) -> None:
    if "N" not in config.option.reportchars:
        config.option.reportchars += "s"
    config.addinivalue_line(
        "markers", f"{VIRTUAL_TIME}: run the async test on a virtual clock that jumps to the next deadline when idle"
    )
    _backend(config)  # a wrong ini value is a usage error before anything runs


def pytest_unconfigure(config: pytest.Config) -> None:
    remove_scratch_run_roots()  # run_workflow's, where a test gave no run_root


@pytest.hookimpl(wrapper=True)  # before anyio's own hook, which reads the mark
def pytest_pycollect_makeitem(collector: pytest.Module | pytest.Class, name: str, obj: object) -> Generator[None, Any, Any]:
    if collector.istestfunction(obj, name) and _unclaimed_coroutine(collector, obj):
        pytest.mark.anyio(obj)
        if _marked(collector, obj, VIRTUAL_TIME):
            _on_virtual_time(obj)
    return (yield)


def _marked(collector: pytest.Module | pytest.Class, obj: object, name: str) -> bool:
    return any(mark.name == name for mark in getattr(obj, "pytestmark", ())) or bool(collector.get_closest_marker(name))


def _on_virtual_time(obj: object) -> None:
    """Give the test anyio's backends with a virtual clock each: a clock of its own per test
    (unless it gives its own `anyio_backend`, or was given them already)."""
    if any(mark.name == "parametrize" and "anyio_backend" in str(mark.args[:1]) for mark in getattr(obj, "pytestmark", ())):
        return
    backends = [pytest.param((backend, virtual_clock(backend)), id=backend) for backend in BACKENDS]
    pytest.mark.parametrize("anyio_backend", backends)(obj)


def _unclaimed_coroutine(collector: pytest.Module | pytest.Class, obj: object) -> bool:
    function = getattr(getattr(obj, "hypothesis", None), "inner_test", obj)
    if not inspect.iscoroutinefunction(function):
        return False
    if _ini(collector.config, "trio_mode") is True:
        return False
    return not any(_marked(collector, obj, name) for name in OTHER_ASYNC_MARKERS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    backend = _backend(config)
    if backend is None:
        return
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        ran_on = _backend_of(item)
        (dropped if ran_on is not None and ran_on != backend else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _backend(config: pytest.Config) -> str | None:
    chosen = config.getoption("agentswf_backend") or str(config.getini("agentswf_backend")).strip()
    if chosen and chosen not in BACKENDS:
        raise pytest.UsageError(f"agentswf_backend = {chosen}: it is one of {', '.join(BACKENDS)}")
    return chosen or None


def _backend_of(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    backend = callspec.params.get("anyio_backend") if callspec is not None else None
    if isinstance(backend, tuple):  # anyio's (name, options) form
        backend = backend[0]
    return backend if isinstance(backend, str) else None


def _ini(config: pytest.Config, name: str) -> object:
    try:
        return config.getini(name)
    except ValueError:  # no plugin registered that option
        return None


@pytest.fixture
def run_root(tmp_path: Path) -> Path:
    """Where this test's runs are recorded: `runs/` under its `tmp_path`."""
    return tmp_path / "runs"


@pytest.fixture
def run_record(run_root: Path) -> RunRecord:
    """`run_record(run)`: the Record of a run (a RunResult, TestRun, directory or run id).

    `run_record()` without one is the latest run recorded under `run_root`.
    """

    def read(run: RunResult | TestRun | str | Path | None = None) -> Record:
        if run is not None:
            return read_record(run, run_root=run_root)
        found = find_run(run_root, None)
        if found is None:
            raise WorkflowError(f"no run was recorded under {run_root}")
        return Record(found)

    return read
