"""codex's TUI in a pane, as measured against codex 0.171.0 (docs/guide/panes.md).

It runs with `--no-daemon`: without it, codex starts a shared app-server daemon of its own
that outlives the pane (measured: it was re-parented to init when the pane's server
stopped). Its own sandbox and approvals are off, as headless: the run decides where an
agent may reach. Before it takes input it may ask to trust a git folder and offer a newer
model ("Use existing model" is taken: the runtime names the model) or an update (skipped,
never taken); these come up over its prompt after it is drawn, so the prompt must last a
while before it counts as ready. A login menu ends the turn `failed`. codex picks its thread id: it is read
afterwards from the rollout (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<id>.jsonl`)
that holds the turn's call id. Bracketed pastes are taken whole, so prompts are pasted.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .cli import CliHarness
from .pane_spec import StartupScreen, TuiSpec, home

CODEX_SETTLE_SECONDS = 3.0  # it draws its prompt, then (1.2 s later, measured) its trust or model screen over it


def codex_launch(cli: CliHarness, session: str | None) -> tuple[list[str], str | None]:
    argv = [cli.executable, *(["resume", session] if session else []), "--no-daemon"]
    argv += ["--dangerously-bypass-approvals-and-sandbox"]
    if cli.model:
        argv += ["--model", cli.model]
    if cli.effort:
        argv += ["-c", f'model_reasoning_effort="{cli.effort}"']
    return argv + list(cli.args), session


def codex_sessions(env: Mapping[str, str]) -> tuple[Path, str]:
    return Path(env.get("CODEX_HOME") or home(env) / ".codex") / "sessions", "*/*/*/rollout-*.jsonl"


CODEX_TUI = TuiSpec(
    startup=(
        StartupScreen("Trust this folder?", "Trust and continue"),
        StartupScreen("Use existing model", "Use existing model"),
        StartupScreen("Update available!", "Skip"),
    ),
    ready=("? for shortcuts",),
    busy=("esc to interrupt",),
    blocked=("Would you like to run the following command?", "Would you like to make the following edits?"),
    login=("Choose how you want to use Codex", "Sign in with ChatGPT to use Codex"),
    typed=False,
    confirms_delivery=False,
    launch=codex_launch,
    cursor="›",
    settle=CODEX_SETTLE_SECONDS,
    sessions=codex_sessions,
)
