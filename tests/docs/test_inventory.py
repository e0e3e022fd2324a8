"""security.md's inventory names, for each input an agent can write, the test that proves its
guard: every row names at least one test, and every test it names exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "guide" / "security.md"
NAMED = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")


def rows() -> list[str]:
    text = PAGE.read_text()
    section = text.split("## The inventory", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and not line.startswith(("| Input", "| ---"))]


def test_every_row_names_a_test_that_exists():
    found = rows()
    assert len(found) >= 15, found
    for row in found:
        named = NAMED.findall(row.rsplit(" | ", 1)[1])
        assert named, f"no test named for: {row[:80]}"
        for path, name in named:
            source = (ROOT / path).read_text()
            assert re.search(rf"^(async )?def {name}\(", source, re.MULTILINE), f"{path}::{name} doesn't exist"
