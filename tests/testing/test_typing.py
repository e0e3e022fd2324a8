"""A type checker sees the public API's types: `mypy --strict` over typed_usage.py passes.

typed_usage.py asserts, with `assert_type`, that `agent.run(..., schema=Verdict)` is a
`Turn[Verdict]` (its `value` a `Verdict`, a `str` without a schema) and that the names a
workflow meets are importable and typed; mypy fails it when one becomes `Any`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

USAGE = Path(__file__).with_name("typed_usage.py")
MYPY_TIMEOUT_SECONDS = 300


def test_a_typed_usage_passes_mypy_strict(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), str(USAGE)],
        capture_output=True,
        text=True,
        timeout=MYPY_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
