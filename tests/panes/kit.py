"""What the pane tests share: the real claude TUI, offline against a scripted model, in a pane.

claude's first start shows an onboarding screen that reaches api.anthropic.com; a config
that has done onboarding once (as an operator's has) skips it. The trust and API-key
screens are left for the pane harness to answer, as it does for an operator.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agentswf import Runtime
from agentswf.testing.models import CLI_DIR_VARIABLE, ScriptedModel, claude_env, find_cli

from ..clis import MISSING

needs_claude_and_tmux = pytest.mark.skipif(
    "claude" in MISSING or shutil.which("tmux") is None,
    reason=f"needs the claude CLI (${CLI_DIR_VARIABLE} or PATH; .ci/run installs it) and tmux (apt-get install tmux)",
)



def claude_pane(model: ScriptedModel, home: Path) -> Runtime:
    env = claude_env(model, home)
    Path(env["CLAUDE_CONFIG_DIR"], ".claude.json").write_text(json.dumps({"hasCompletedOnboarding": True}))
    claude = find_cli("claude")
    assert claude is not None
    return Runtime(harness="claude", placement="pane", command=(claude,), env=env)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False
