"""A type checker sees the public API's types: `mypy --strict` over typed_usage.py passes.

typed_usage.py asserts, with `assert_type`, that `agent.run(..., schema=Verdict)` is a
`Turn[Verdict]` (its `value` a `Verdict`, a `str` without a schema) and that the names a
workflow meets are importable and typed; mypy fails it when one becomes `Any`. The
README's workflow is checked beside it, as a user's own code would be.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

USAGE = Path(__file__).with_name("typed_usage.py")
README = Path(__file__).resolve().parents[2] / "README.md"
MYPY_TIMEOUT_SECONDS = 300


def test_a_typed_usage_and_the_readme_workflow_pass_mypy_strict(tmp_path):
    readme_workflow = tmp_path / "review.py"
    readme_workflow.write_text(re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)[0])
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"), str(USAGE), str(readme_workflow)],
        capture_output=True,
        text=True,
        timeout=MYPY_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
