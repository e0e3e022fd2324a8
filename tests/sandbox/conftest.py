"""The sandbox tests' shared fixture."""

from __future__ import annotations

import pytest


@pytest.fixture
def place(tmp_path):
    """A workspace, a readable sibling, and a secret in the user's home, outside them both."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "readme").write_text("in the workspace\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide").write_text("a guide\n")
    (tmp_path / "home" / ".ssh").mkdir(parents=True)
    (tmp_path / "home" / ".ssh" / "id_rsa").write_text("SECRET-KEY\n")
    return tmp_path
