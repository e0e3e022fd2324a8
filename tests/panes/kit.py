"""What the pane tests share: the real claude, codex and pi TUIs, offline against a scripted model, in a pane.

claude's first start shows an onboarding screen that reaches api.anthropic.com; a config
that has done onboarding once (as an operator's has) skips it. The trust and API-key
screens are left for the pane harness to answer, as it does for an operator.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentswf import Runtime
from agentswf.testing.models import ScriptedModel, claude_env, codex_env, find_cli, pi_env

needs_claude_and_tmux = pytest.mark.needs("claude", "tmux")


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


needs_tmux = pytest.mark.needs("tmux")


def needs(cli: str) -> pytest.MarkDecorator:
    return pytest.mark.needs(cli)


def pane_runtime(cli: str, server: ScriptedModel, home: Path, **options: Any) -> Runtime:
    """codex's or pi's TUI in a pane, offline against `server`; `env` in `options` is laid over its own."""
    found = find_cli(cli)
    assert found is not None
    extra = options.pop("env", {})
    if cli == "codex":
        env = {**codex_env(server, home), **extra}
        return Runtime(harness="codex", placement="pane", command=(found,), env=env, **options)
    env = {**pi_env(server, home), **extra}
    return Runtime(harness="pi", placement="pane", command=(found,), env=env, **{"model": "fake/fake-model", **options})


def processes_with(home: Path) -> list[int]:
    """The processes whose environment names `home` as HOME: an agent's, whatever it started."""
    wanted = f"HOME={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            variables = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if wanted in variables and alive(int(entry.name)):
            found.append(int(entry.name))
    return found
