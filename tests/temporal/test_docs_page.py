"""docs/guide/temporal.md's code runs: its blocks are skipped by the docs test (which runs
without agentswf[temporal]) and run here, on asyncio and on trio, with the extra installed."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

from tests.docs.test_docs import run_page

PAGE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "temporal.md"
OURS = "<!-- docs-test: skip: needs agentswf[temporal]; tests/temporal/test_docs_page.py runs it -->"


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_temporal_page_runs_with_the_extra(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_key_file: Path
) -> None:
    text = PAGE.read_text()
    assert OURS in text
    page = tmp_path / "temporal.md"
    page.write_text(text.replace(OURS, ""))  # the blocks this test runs, no longer skipped
    where = tmp_path / "where"
    where.mkdir()
    run_page(page, backend, where, monkeypatch)
