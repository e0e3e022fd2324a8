"""`awf attach [RUN] [AGENT]`: a person's terminal on an agent's pane, to watch it (or, with
`--write`, to type into it); `--close` stops a kept pane, `--close-all` every kept pane.

An agent in a pane (`placement="pane"`) runs in a tmux server of its own, whose socket is
in the run's sockets directory under a name made from the agent's key; the run's record
(`run.json`) says where that directory is. After the run, a kept pane (`keep_pane`) is
found the same way among the kept ones (harnesses/pane_keep.py). Attaching read-only
(`tmux attach -r`) is the default: keys a person presses are not passed to the agent.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
from pathlib import Path

from ..engine.record.layout import DEFAULT_RUN_ROOT, find_run, read_json
from ..harnesses.pane import pane_socket
from ..harnesses.pane_keep import KeptPane, close_kept, kept_directory, kept_panes, kept_socket
from ..harnesses.pane_kept_check import kept_pane_server, live_pane_server
from ..harnesses.tmux import TMUX_INSTALL, WINDOW
from .failures import AttachFailure
from .shown import shown

SCREEN_TIMEOUT_SECONDS = 10.0  # for tmux to print a pane's screen
MAX_SCREEN_CHARS = 64 * 1024  # of it printed


def attach_argv(tmux: str, socket: Path, *, write: bool) -> list[str]:
    """The tmux client command that attaches to the agent's window (read-only unless `write`)."""
    return [tmux, "-S", str(socket), "attach-session", "-t", WINDOW, *([] if write else ["-r"])]


def no_terminal(tmux: str, socket: Path) -> str:
    """Why attaching needs a terminal; the pane's screen, once, is printed on standard output. Read
    here, just after its server was checked, rather than by a command given for later: by then the
    socket may be another's, and a tmux client runs what its server tells it to."""
    done = subprocess.run(
        [tmux, "-S", str(socket), "capture-pane", "-p", "-t", WINDOW], capture_output=True, check=False,
        timeout=SCREEN_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    screen = done.stdout.decode(errors="replace")[-MAX_SCREEN_CHARS:].rstrip("\n")
    print("\n".join(f"| {shown(line)}" for line in screen.splitlines()))  # the agent's text, as data
    return "attach needs a terminal (its standard input isn't one): run it in a terminal; the pane's screen is above"


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


def _run_sockets(run_root: Path, run: str | None) -> tuple[Path, Path]:
    """The run's record and its sockets directory."""
    record = find_run(run_root, run)
    if record is None:
        raise AttachFailure(f"no run {run!r} under {run_root}" if run else f"no run under {run_root}")
    control = read_json(record / "run.json").get("control")
    if not isinstance(control, str):
        raise AttachFailure(f"the run {record.name} has no sockets on record")
    return record, Path(control).parent


def find_pane(run_root: Path, run: str | None, agent: str | None) -> Path:
    """The socket of `agent`'s pane in `run`, live or kept (default: the latest run, and its one agent in a pane)."""
    record, sockets = _run_sockets(run_root, run)
    name = record.name
    if agent is not None:
        for socket in (pane_socket(sockets, agent), kept_socket(sockets, agent)):
            if socket.exists():
                return socket
        raise AttachFailure(f"agent {agent} has no pane running in run {name}")
    panes = {key: pane_socket(sockets, key) for key in _agents(record)}
    live = {key: socket for key, socket in panes.items() if socket.exists()}
    live |= {pane.agent: Path(pane.socket) for pane in kept_panes() if Path(pane.run_sockets) == sockets}
    if len(live) == 1:
        return next(iter(live.values()))
    if not live:
        raise AttachFailure(f"no agent of run {name} has a pane running")
    raise AttachFailure(f"run {name} has agents in panes: {', '.join(sorted(live))}; name one")


def find_kept(run_root: Path, run: str | None, agent: str | None) -> list[KeptPane]:
    """The kept panes of `run` (default: the latest), or of its agent `agent`."""
    record, sockets = _run_sockets(run_root, run)
    kept = [pane for pane in kept_panes() if Path(pane.run_sockets) == sockets and agent in (None, pane.agent)]
    if not kept:
        raise AttachFailure(f"{'agent ' + agent + ' of run' if agent else 'run'} {record.name} has no kept pane")
    return kept


def kept_lines(run_root: Path) -> list[str]:
    """What `awf ls` says of the kept panes: whose they are, how to attach to them, how to close them."""
    runs = {}
    for record in run_root.glob("*/*/run.json"):
        try:
            control = read_json(record).get("control")
        except (OSError, ValueError):
            continue
        if isinstance(control, str) and record.parent.name.isprintable():  # a name an agent gave: never an escape
            runs[str(Path(control).parent)] = record.parent.name
    lines = []
    for pane in kept_panes():
        run, agent, socket = runs.get(pane.run_sockets), shlex.quote(pane.agent), shlex.quote(pane.socket)
        if run is None:
            where = f"tmux -S {socket} attach -r"
            lines.append(f"{agent} ({pane.harness}, a run not under {run_root}): {where}; close: tmux -S {socket} kill-server")
        else:  # quoted: a command a person copies runs only what it says
            run = shlex.quote(run)
            lines.append(f"{run} {agent} ({pane.harness}): awf attach {run} {agent}; close: awf attach --close {run} {agent}")
    return ["", "Kept panes (the agent released: it can't answer the run):", *lines] if lines else []


def print_kept(run_root: Path) -> None:
    """`awf ls`'s last part: the kept panes, if there are any."""
    for line in kept_lines(run_root):
        print(line)


def add_parsers(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = commands.add_parser(
        "attach", help="watch an agent's pane (read-only; --write to type into it)", usage="awf attach [RUN] [AGENT]"
    )
    parser.add_argument("run", nargs="?", help="a run id or directory (default: the latest)")
    parser.add_argument("agent", nargs="?", help="the agent's key (default: the run's one agent in a pane)")
    parser.add_argument("--write", action="store_true", help="type into the agent's pane too")
    parser.add_argument("--close", action="store_true", help="stop the run's kept panes (or the agent's) instead")
    parser.add_argument("--close-all", action="store_true", help="stop every kept pane, of every run")
    parser.add_argument("--run-root", help=f"where records are (default {DEFAULT_RUN_ROOT})")
    parser.set_defaults(handler=command_attach)


def command_attach(options: argparse.Namespace) -> int:
    """Replace this process with a tmux client attached to the pane; returns only to fail."""
    tmux = shutil.which("tmux")
    if tmux is None:
        raise AttachFailure(f"awf attach needs tmux: install it with `{TMUX_INSTALL}`")
    root = Path(options.run_root) if options.run_root else DEFAULT_RUN_ROOT
    root = root if root.is_absolute() else Path.cwd() / root
    if options.close_all or options.close:
        closing = kept_panes() if options.close_all else find_kept(root, options.run, options.agent)
        for pane in closing:
            close_kept(pane)
            print(f"awf: closed the kept pane of {pane.agent}")
        return 0
    socket = find_pane(root, options.run, options.agent)
    refused = kept_pane_server(str(socket)) if socket.is_relative_to(kept_directory()) else live_pane_server(str(socket))
    if refused is not None:  # a tmux client obeys its server: one an agent runs would run its program here
        raise AttachFailure(f"not attaching: {refused} (an agent may have replaced its pane's socket)")
    if not os.isatty(0):  # tmux would say "open terminal failed" and exit 1
        raise AttachFailure(no_terminal(tmux, socket))
    argv = attach_argv(tmux, socket, write=options.write)
    os.execv(tmux, argv)
    return 0  # not reached: execv returns only by raising
