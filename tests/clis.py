"""The real agent CLIs for the end-to-end tests: where to find them (`.ci/run` installs them
under `.ci/node`), the mark of a test that needs them all (tests/conftest.py makes it `e2e` and
skips it where one is missing), and the taught command the scripted model reads out of a prompt."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from agentswf.testing.models import CLI_DIR_VARIABLE

CLIS = ("claude", "codex", "pi")
CI_CLI_DIR = Path(__file__).resolve().parents[1] / ".ci" / "node" / "node_modules" / ".bin"
if not os.environ.get(CLI_DIR_VARIABLE) and CI_CLI_DIR.is_dir():
    os.environ[CLI_DIR_VARIABLE] = str(CI_CLI_DIR)

needs_clis = pytest.mark.needs(*CLIS)

TAUGHT = re.compile(r"(/\S+/wfa) result (\w+)")  # the launcher and call id a turn's prompt teaches
