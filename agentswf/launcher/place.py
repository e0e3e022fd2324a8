"""Where an agent's socket and launcher live, and the launcher script itself.

Each run gets `$TMPDIR/awf-XXXX` (`/tmp` when TMPDIR is unset or too long for a socket
path; mode 0300: its owner can enter it but nobody can list it, so an agent can't find
a sibling's socket), and each agent a 0700 directory in it, of an unguessable name, holding
the socket (bound only while the agent is in a turn) and `wfa`, a launcher of mode 0500 (no overwriting it by mistake; the same user can still `chmod` it: see docs/guide/security.md) that runs the
client on this interpreter with `-S -I`. Both are written at the agent's first turn, not
when it is opened, so opening an agent touches no disk. Short names keep the socket path under the
104-byte limit of `sun_path`, and short enough that cheap models copy it right.

The run's directory holds an `owner` file (the run's pid and its start time), so that a
directory whose run died without removing it (`kill -9`, and its watchdog killed too) is
swept by the next run or `awf` command: what carries its mark is killed, and it is removed.
The directory's name is the run's mark (`keeper.MARK_VARIABLE`).
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
from collections.abc import Container
from pathlib import Path

from ..harnesses.keeper import kill_marked, remove_tree
from . import client

RUN_DIR_MODE = 0o300
AGENT_DIR_MODE = 0o700
LAUNCHER_MODE = 0o500
SOCKET_NAME = "s.sock"
LAUNCHER_NAME = "wfa"
OWNER_NAME = "owner"
RUN_DIR_PREFIX = "awf-"
DEFAULT_SOCKETS_ROOT = "/tmp"
MAX_SOCKET_PATH_BYTES = 103  # sun_path is 104 bytes on macOS (108 on Linux), its NUL included
AGENT_DIR_TOKEN_BYTES = 8
"""Random bytes in an agent directory's name ("a" and twice as many hex digits): unguessable,
and never two alike in a run (at 4, one run of 10,000 agents in about 90 had two, and the
second agent's first turn failed)."""
LONGEST_TAIL_BYTES = len(f"/awf-XXXXXXXX/a{'X' * 2 * AGENT_DIR_TOKEN_BYTES}/s.sock")  # what a run adds to its root


def sockets_root() -> str:
    """$TMPDIR, if it is an absolute directory short enough for the sockets; else /tmp."""
    tmpdir = os.environ.get("TMPDIR", "").rstrip("/")
    fits = len(os.fsencode(tmpdir)) + LONGEST_TAIL_BYTES <= MAX_SOCKET_PATH_BYTES
    if tmpdir.startswith("/") and fits and os.path.isdir(tmpdir):
        return tmpdir
    return DEFAULT_SOCKETS_ROOT


def launcher_script(socket_path: Path, *, python: str = sys.executable) -> str:
    """The launcher: the `wfa` client on this interpreter, isolated, with the agent's socket."""
    return client.launcher_script(os.path.abspath(python), str(socket_path))


def _started_at(pid: int) -> str:
    """When `pid` started (clock ticks since boot, /proc), to tell it from a later process
    given the same pid; "" where it can't be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""


def _alive(owner: str) -> bool:
    pid_text, _, started = owner.partition(" ")
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not started or _started_at(pid) in (started, "")


def sweep_dead_runs(root: str | None = None) -> list[Path]:
    """Kill what carries the mark of each run in `root` whose run is gone, and remove its
    directory; the directories removed. A directory without an owner is left alone."""
    swept: list[Path] = []
    try:
        entries = list(os.scandir(root or sockets_root()))
    except OSError:
        return swept
    for entry in entries:
        if not entry.name.startswith(RUN_DIR_PREFIX):
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.getuid() or not entry.is_dir(follow_symlinks=False):
                continue
            with open(os.path.join(entry.path, OWNER_NAME)) as file:
                owner = file.read().strip()
            if _alive(owner):
                continue
        except (OSError, ValueError):
            continue
        kill_marked(entry.name)
        remove_tree(entry.path)
        swept.append(Path(entry.path))
    return swept


def make_run_dir() -> Path:
    """The run's directory, owned by this process; dead runs' directories are swept first."""
    root = sockets_root()
    sweep_dead_runs(root)
    path = Path(tempfile.mkdtemp(prefix=RUN_DIR_PREFIX, dir=root))
    owner = path / OWNER_NAME
    owner.write_text(f"{os.getpid()} {_started_at(os.getpid())}\n")
    owner.chmod(0o600)
    path.chmod(RUN_DIR_MODE)
    return path


def agent_paths(run_dir: Path, taken: Container[str] = frozenset()) -> tuple[Path, Path]:
    """Where a new agent's socket and launcher will be, in a directory of an unguessable
    name in `run_dir` that none of `taken` (the names given the run's agents so far) has:
    a second agent given a name would fail its first turn on its `mkdir`. Nothing is written
    yet (`make_agent_dir` does, at its first turn)."""
    name = f"a{secrets.token_hex(AGENT_DIR_TOKEN_BYTES)}"
    while name in taken:
        name = f"a{secrets.token_hex(AGENT_DIR_TOKEN_BYTES)}"
    agent_dir = run_dir / name
    return agent_dir / SOCKET_NAME, agent_dir / LAUNCHER_NAME


def make_agent_dir(socket_path: Path, launcher: Path) -> None:
    """The agent's directory (0700) and its launcher (0500), as `agent_paths` named them."""
    agent_dir = socket_path.parent
    os.mkdir(agent_dir, AGENT_DIR_MODE)
    os.chmod(agent_dir, AGENT_DIR_MODE)  # whatever the umask
    script = memoryview(launcher_script(socket_path).encode())
    # on the descriptor, with no file object: a third of this function's time at every agent's first turn
    fd = os.open(launcher, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, LAUNCHER_MODE)
    try:
        while script:
            script = script[os.write(fd, script) :]
        os.fchmod(fd, LAUNCHER_MODE)  # whatever the umask
    finally:
        os.close(fd)


def remove_run_dir(run_dir: Path) -> None:
    """Remove the run's sockets and launchers; safe to call twice."""
    remove_tree(str(run_dir))
