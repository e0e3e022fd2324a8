"""`awf attach [RUN] [AGENT]`: a person's terminal on an agent's pane, to watch it (or, with
`--write`, to type into it).

An agent in a pane (`placement="pane"`) runs in a tmux server of its own, whose socket is
in the run's sockets directory under a name made from the agent's key; the run's record
(`run.json`) says where that directory is. Attaching read-only (`tmux attach -r`) is the
default: keys a person presses are not passed to the agent.
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

from ..engine.records import DEFAULT_RUN_ROOT, find_run, read_json
from ..harnesses.pane import pane_socket
from ..harnesses.tmux import TMUX_INSTALL, WINDOW


class AttachFailure(Exception):
    """Why there is nothing to attach to; `awf` prints it and exits 2."""


def attach_argv(tmux: str, socket: Path, *, write: bool) -> list[str]:
    """The tmux client command that attaches to the agent's window (read-only unless `write`)."""
    return [tmux, "-S", str(socket), "attach-session", "-t", WINDOW, *([] if write else ["-r"])]


def _agents(record: Path) -> list[str]:
    """The agents the run gave turns to, from its calls' records."""
    keys = set()
    for call in record.glob("calls/*/call.json"):
        try:
            agent = read_json(call).get("agent")
        except (OSError, ValueError):
            continue
        if isinstance(agent, str):
            keys.add(agent)
    return sorted(keys)


def find_pane(run_root: Path, run: str | None, agent: str | None) -> Path:
    """The socket of `agent`'s pane in `run` (default: the latest run, and its one agent in a pane)."""
    record = find_run(run_root, run)
    if record is None:
        raise AttachFailure(f"no run {run!r} under {run_root}" if run else f"no run under {run_root}")
    control = read_json(record / "run.json").get("control")
    if not isinstance(control, str):
        raise AttachFailure(f"the run {record.name} has no sockets on record")
    sockets = Path(control).parent
    if agent is not None:
        socket = pane_socket(sockets, agent)
        if not socket.exists():
            raise AttachFailure(f"agent {agent} has no pane running in run {record.name}")
        return socket
    panes = {key: pane_socket(sockets, key) for key in _agents(record)}
    live = [key for key, socket in panes.items() if socket.exists()]
    if len(live) == 1:
        return panes[live[0]]
    if not live:
        raise AttachFailure(f"no agent of run {record.name} has a pane running")
    raise AttachFailure(f"run {record.name} has agents in panes: {', '.join(live)}; name one")


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = commands.add_parser(
        "attach", help="watch an agent's pane (read-only; --write to type into it)", usage="awf attach [RUN] [AGENT]"
    )
    parser.add_argument("run", nargs="?", help="a run id or directory (default: the latest)")
    parser.add_argument("agent", nargs="?", help="the agent's key (default: the run's one agent in a pane)")
    parser.add_argument("--write", action="store_true", help="type into the agent's pane too")
    parser.add_argument("--run-root", help=f"where records are (default {DEFAULT_RUN_ROOT})")
    parser.set_defaults(handler=command_attach)


def command_attach(options: argparse.Namespace) -> int:
    """Replace this process with a tmux client attached to the pane; returns only to fail."""
    tmux = shutil.which("tmux")
    if tmux is None:
        raise AttachFailure(f"awf attach needs tmux: install it with `{TMUX_INSTALL}`")
    root = Path(options.run_root) if options.run_root else DEFAULT_RUN_ROOT
    socket = find_pane(root if root.is_absolute() else Path.cwd() / root, options.run, options.agent)
    argv = attach_argv(tmux, socket, write=options.write)
    os.execv(tmux, argv)
    return 0  # not reached: execv returns only by raising
