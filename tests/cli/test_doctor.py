"""`awf doctor`, run as a person runs it: the real claude from npm, and wrappers over the real
codex and pi that say an older and a newer version than agentswf was tested with."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agentswf.harnesses.versions import shown, standing
from agentswf.testing.models import find_cli

from ..clis import needs_clis, version_of

pytestmark = needs_clis

AWF = [sys.executable, "-m", "agentswf"]


def doctor(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AWF, "doctor"], check=False, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)


def test_doctor_says_each_clis_path_version_standing_and_login_and_the_tools(tmp_path):
    clis = tmp_path / "bin"
    clis.mkdir()
    (clis / "claude").symlink_to(str(find_cli("claude")))
    for name, says in (("codex", "codex-cli 0.160.0"), ("pi", "1.7.0")):
        (clis / name).write_text(
            f'#!/bin/sh\nif [ "$1" = --version ]; then echo "{says}"; exit 0; fi\nexec {find_cli(name)} "$@"\n'
        )
        (clis / name).chmod(0o755)
    home = tmp_path / "home"
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "auth.json").write_text('{"OPENAI_API_KEY": "sk-not-read"}')
    (home / ".pi" / "agent").mkdir(parents=True)
    (home / ".pi" / "agent" / "auth.json").write_text("{}")  # what pi writes at its first start: no login
    path = os.pathsep.join([str(clis), os.environ.get("PATH", os.defpath)])  # tmux's and bwrap's too
    env = {"PATH": path, "HOME": str(home), "ANTHROPIC_API_KEY": "sk-test"}

    done = doctor(tmp_path, env)

    out = done.stdout
    assert done.returncode == 1, out + done.stderr  # codex 0.160.0 is older than agentswf works with
    claude = shown(version_of("claude") or ())  # the real one's, whichever the tests run
    assert f"  claude: {clis / 'claude'}\n    {claude}, " in out and "    login or key: ANTHROPIC_API_KEY\n  codex" in out
    assert standing("claude", version_of("claude") or ()) != "tested" or f"{claude}, tested (2.1.312–2.1.332)\n" in out
    assert (
        f"  codex: {clis / 'codex'}\n    0.160.0, older than 0.165.0, the oldest agentswf works with: install a newer "
        f"one with `npm install -g @openai/codex@0.171.0`\n    login or key: {home / '.codex' / 'auth.json'}\n"
    ) in out
    assert f"  pi: {clis / 'pi'}\n    1.7.0, newer than the newest tested, 1.6.0\n    login or key: ANTHROPIC_API_KEY\n" in out
    assert "  cursor: not on PATH; install it with `curl https://cursor.com/install -fsS | bash`\n" in out
    assert "tools:\n  bwrap: " in out and "\n  tmux: " in out and "\n  temporal: " in out
    assert "sk-not-read" not in out and "sk-test" not in out  # files and keys named, never read or shown
