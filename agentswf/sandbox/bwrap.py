"""The bubblewrap command line of one sandboxed attempt: a pure function of what it may see.

The sandbox starts from an empty root and is given, in this order (a later mount covers an
earlier one): the system read-only (`/usr`, `/etc`, `/bin`, `/lib*`…, symlinks kept as
symlinks), its own `/proc`, `/dev` and an empty `/tmp` (in memory, bounded); read-only, the
sandbox's cwd, the agent's cwd and `read`; writable, `write`; read-only, what runs the agent
(the interpreter `wfa` runs on, agentswf, the CLI's install: a project's `.venv` in `write`
stays read-only, or the agent would change the `awf` that runs next outside it), but for a
`write` entry inside it; then the agent's own directory
read-only (its launcher and its sockets, at the same path as outside, so the prompt's
launcher path holds) with its harness home in it writable. A run's record (`.awf`) in a
directory it is given is covered by an empty one; a git repository's config (`config.worktree` too) and hooks in a
directory it may write stay read-only (they name commands your next `git status` runs), and the
directories above them, above what runs the agent and above a covered record in it can't be
moved aside and made again. Nothing else of the machine is there: not
`$HOME`, not another agent's directory, not the run's record.

Every namespace is its own (`--unshare-all`: no network but its own loopback, its own pid
namespace so no other process of the machine can be seen or signalled), no capability is
kept, it is a session of its own (no typing into the run's terminal), and it dies with its
parent: the attempt's keeper, which stays outside, so that the identity check walking a
`wfa` process's parents (in the run's pid namespace, where `SO_PEERCRED` reports them)
still meets it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .spec import ResolvedSpec

SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
"""The system every sandbox reads: what a shell and its tools need, and nothing of anyone's."""

FORWARDER_PROXY_PORT = 3128  # inside the sandbox's own loopback: HTTPS_PROXY points here
TMP_BYTES = 1024 * 1024 * 1024  # the sandbox's own /tmp, in memory: at most this much
HIDDEN_BYTES = 64 * 1024  # an empty directory covering a run's record
BWRAP_MAX_ARGS = 9000  # bubblewrap's own limit (MAX_ARGS in bubblewrap.c): past it, it starts nothing
MAX_ARGV_BYTES = 1024 * 1024  # of the argv: half of Linux's ARG_MAX (2 MiB with an 8 MiB stack), the rest the environment's


@dataclass(frozen=True, slots=True)
class SystemEntry:
    """One of `SYSTEM_PATHS` as it is on this machine: a directory, or a symlink to `link`."""

    path: str
    link: str | None = None


@dataclass(frozen=True, slots=True)
class GitBoxPaths:
    """An agent on a worktree of its run gets a git directory of its own (`gitbox`): where it is
    (`directory`), writable if the agent may commit; the `.git` file naming it (`link`), bound
    read-only over the worktree's own (`dot_git`); the worktree's top (`tree`), read-only where
    the sandbox isn't given it; and the repository's objects and their alternates (`objects`),
    read-only where the sandbox isn't given them."""

    directory: Path
    link: Path
    dot_git: Path
    tree: Path
    objects: tuple[Path, ...]
    writable: bool


@dataclass(frozen=True, slots=True)
class AgentPaths:
    """Where one agent works: its cwd, and its directory (launcher, sockets, harness home)."""

    cwd: Path
    agent_dir: Path


def _depth_order(paths: Sequence[Path]) -> list[Path]:
    """Unique, parents before children, so a child's mount is not covered by its parent's."""
    return sorted(set(paths), key=lambda path: (len(path.parts), str(path)))


def anchors(held: Sequence[Path], write: Sequence[Path]) -> list[Path]:
    """Every directory between a path the sandbox may write and what is held in it (a git control
    or what runs the agent read-only, a run's record covered): each is bound onto itself, so it is a mount point, which
    can't be renamed or removed. Else the agent moves `.git` (or the repository) aside, mounts
    and all, and makes a new one with a config of its own at the same path; or moves the run's
    directory aside with its record, and the run goes on recording in one the agent made."""
    found = {parent for path in held for parent in path.parents if any(given in parent.parents for given in write)}
    return _depth_order(list(found))


def _under(path: Path, paths: Sequence[Path]) -> bool:
    return any(given == path or given in path.parents for given in paths)


def bwrap_argv(
    spec: ResolvedSpec,
    agent: AgentPaths,
    home: Path,
    command: Sequence[str],
    *,
    system: Sequence[SystemEntry],
    runtime: Sequence[Path] = (),
    hidden: Sequence[Path] = (),
    controls: Sequence[Path] = (),
    gitbox: GitBoxPaths | None = None,
    bwrap: str = "bwrap",
) -> list[str]:
    """The argv that runs `command` in the sandbox `spec` as agent `agent`, its home `home`;
    `hidden` (a run's record in a directory it is given, the run's worktrees) is covered by an
    empty directory, but for the agent's own cwd (its worktree) in it; `controls` (what says
    which commands run outside: a repository's git config and hooks) stay read-only in a
    directory it may write, every directory above them in it pinned (`anchors`); `gitbox` is
    the agent's own git directory on its worktree."""
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    for entry in system:
        if entry.link is not None:
            argv += ["--symlink", entry.link, entry.path]
        else:
            argv += ["--ro-bind", entry.path, entry.path]
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
    box_reads = (gitbox.tree, *gitbox.objects) if gitbox is not None else ()  # the worktree's top, the repository's objects
    for path in _depth_order([p for p in (spec.cwd, agent.cwd, *spec.read, *box_reads) if p not in spec.write]):
        argv += ["--ro-bind", str(path), str(path)]
    for path in _depth_order(spec.write):
        argv += ["--bind", str(path), str(path)]
    for path in anchors([*controls, *hidden, *runtime], spec.write):  # before what runs the agent: read-only in them still
        argv += ["--bind", str(path), str(path)]
    for path in _depth_order(runtime):  # read-only even in a path it may write (a project's .venv)
        argv += ["--ro-bind", str(path), str(path)]
    for path in _depth_order([p for p in spec.write if any(r == p or r in p.parents for r in runtime)]):
        argv += ["--bind", str(path), str(path)]  # but what `write` names in it, by name
    for path in _depth_order(controls):
        argv += ["--ro-bind", str(path), str(path)]
    for path in _depth_order(hidden):
        argv += ["--size", str(HIDDEN_BYTES), "--tmpfs", str(path)]
    top = gitbox.tree if gitbox is not None and gitbox.tree in agent.cwd.parents else agent.cwd
    if _under(top, hidden):  # its own worktree, among the run's that no sandbox sees: shown again, as it was
        argv += ["--bind" if _under(top, spec.write) else "--ro-bind", str(top), str(top)]
        if top != agent.cwd and _under(agent.cwd, spec.write) and not _under(top, spec.write):
            argv += ["--bind", str(agent.cwd), str(agent.cwd)]
        for path in _depth_order([p for p in (*runtime, *controls) if top in p.parents]):
            argv += ["--ro-bind", str(path), str(path)]
        for path in _depth_order([p for p in hidden if top in p.parents]):
            argv += ["--size", str(HIDDEN_BYTES), "--tmpfs", str(path)]
    argv += ["--ro-bind", str(agent.agent_dir), str(agent.agent_dir), "--bind", str(home), str(home)]
    if gitbox is not None:
        argv += ["--bind" if gitbox.writable else "--ro-bind", str(gitbox.directory), str(gitbox.directory)]
        argv += ["--ro-bind", str(gitbox.link), str(gitbox.dot_git)]
    argv += ["--chdir", str(agent.cwd), "--", *command]
    return argv


def too_long(argv: Sequence[str]) -> str | None:
    """Why bwrap would not start with `argv` (more arguments than it takes, more bytes than exec
    takes: each path it holds is a mount, and an agent can make many, with long names), None if it would."""
    size = sum(len(os.fsencode(arg)) + 1 for arg in argv)
    if len(argv) > BWRAP_MAX_ARGS:
        return f"its bubblewrap command would be {len(argv)} arguments, more than bubblewrap takes ({BWRAP_MAX_ARGS})"
    if size > MAX_ARGV_BYTES:
        return f"its bubblewrap command would be {size:,} bytes, more than the sandbox starts ({MAX_ARGV_BYTES:,})"
    return None


def proxy_port(tunnels: Sequence[str]) -> int:
    """The loopback port inside the sandbox where HTTPS_PROXY points: none of the tunnels' ports."""
    port = FORWARDER_PROXY_PORT
    while any(tunnel.endswith(f":{port}") for tunnel in tunnels):
        port += 1
    return port


def forwarded(
    command: Sequence[str], *, python: str, forwarder: Path, proxy_socket: Path, tunnels: Sequence[str]
) -> list[str]:
    """`command` started by the forwarder, once the proxy port and each tunnel listen."""
    port = proxy_port(tunnels)
    return [python, "-S", "-I", str(forwarder), str(proxy_socket), str(port), *tunnels, "--", *command]
