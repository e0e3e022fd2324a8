"""`awf doctor`, run as a person runs it: the real claude from npm, and wrappers over the real
codex and pi that say an older and a newer version than agentswf was tested with."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.needs("qwen", "copilot")
def test_doctor_lists_the_acp_runtimes_their_native_binary_version_standing_and_login(tmp_path):
    """An ACP runtime is listed as a CLI is: qwen (a node script) as found, copilot's native binary
    in place of its npm loader, each version against the table; gemini's key named, never shown."""
    clis = tmp_path / "bin"
    clis.mkdir()
    for name in ("qwen", "copilot"):
        (clis / name).symlink_to(str(find_cli(name)))
    path = os.pathsep.join([str(clis), os.environ.get("PATH", os.defpath)])
    env = {"PATH": path, "HOME": str(tmp_path / "home"), "GEMINI_API_KEY": "sk-gem"}
    # copilot's first run in a home unpacks its 235 MB payload into ~/.cache: done here, outside
    # doctor's 10 s for `--version`, which a loaded CI disk once outlasted (a person's is unpacked once).
    subprocess.run([str(clis / "copilot"), "--version"], env=env, capture_output=True, timeout=120, check=True)

    out = doctor(tmp_path, env).stdout

    qwen, copilot = (shown(version_of(name) or ()) for name in ("qwen", "copilot"))
    assert f"  qwen: {clis / 'qwen'}\n    {qwen}, " in out
    assert "\n  copilot: " in out and f"copilot-linux-x64/copilot\n    {copilot}, " in out, out
    assert standing("qwen", version_of("qwen") or ()) != "tested" or f"{qwen}, tested (0.24.4–0.24.4)\n" in out
    assert "    no login or key found: Configure qwen's model and credentials as for qwen alone" in out
    gemini = "  gemini: not on PATH; install it with `npm install -g @google/gemini-cli@0.61.0`\n"
    assert gemini in out or "    login or key: GEMINI_API_KEY\n" in out
    assert "sk-gem" not in out
