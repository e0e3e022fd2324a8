"""pi's TUI in a pane, as measured against pi 1.6.0 and 0.73.1 (docs/guide/panes.md).

pi shows no startup screen and asks no permission; its footer (the context gauge, `…%/…`
or `?/…`) is drawn once it takes input, and "Working..." while a turn runs. Without a key
for its provider it answers a prompt with "Use /login …": the turn fails for good. pi
picks its session id: it is read afterwards from the session file
(`$PI_CODING_AGENT_DIR/sessions/--<cwd>--/<ts>_<id>.jsonl`) that holds the turn's call id.
Bracketed pastes are taken whole, so prompts are pasted.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .cli import CliHarness
from .pane_spec import TuiSpec, home


def pi_launch(cli: CliHarness, session: str | None) -> tuple[list[str], str | None]:
    argv = [cli.executable, *(["--session", session] if session else [])]
    if cli.model:
        argv += ["--model", cli.model]
    if cli.effort:
        argv += ["--thinking", cli.effort]
    return argv + list(cli.args), session


def pi_sessions(env: Mapping[str, str]) -> tuple[Path, str]:
    return Path(env.get("PI_CODING_AGENT_DIR") or home(env) / ".pi" / "agent") / "sessions", "*/*.jsonl"


PI_TUI = TuiSpec(
    startup=(),
    ready=("%/", "?/"),
    busy=("Working...",),
    blocked=(),
    login=("Use /login to log into a provider", "to re-authenticate."),
    typed=False,
    confirms_delivery=False,
    launch=pi_launch,
    sessions=pi_sessions,
)
