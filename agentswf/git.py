"""Git, run so that a repository an agent can write makes it run nothing, and what a run's
worktree is (`Worktree`).

Below both `sandbox` (an agent's git directory of its own, agentswf.sandbox.gitbox) and
`workflow` (the run's worktrees, agentswf.workflow.worktrees), which both run git this way.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from .harnesses.regular import read_regular

Keep = Literal["on-change", "always", "never"]

WORKTREES_DIR = "worktrees"  # in a run's record: its manifests; beside the run root: the worktrees
GIT_TIMEOUT_SECONDS = 120.0  # one git command; `worktree add` checks a whole tree out
GIT_MESSAGE_CHARS = 400  # of git's standard error, in an error or a record
MAX_LINK_BYTES = 4096  # of a `.git` file or git's `gitdir` (a path): a larger one, an agent's, is none
LOCAL_GIT_VARIABLES = frozenset(
    # `git rev-parse --local-env-vars` (of git 2.17 to 2.47: GIT_NO_LAZY_FETCH is 2.45's): what makes git
    # use a repository other than the one asked, or not as asked
    "GIT_ALTERNATE_OBJECT_DIRECTORIES GIT_CONFIG GIT_CONFIG_PARAMETERS GIT_CONFIG_COUNT "
    "GIT_OBJECT_DIRECTORY GIT_DIR GIT_WORK_TREE GIT_IMPLICIT_WORK_TREE GIT_GRAFT_FILE "
    "GIT_INDEX_FILE GIT_NO_REPLACE_OBJECTS GIT_REPLACE_REF_BASE GIT_PREFIX "
    "GIT_INTERNAL_SUPER_PREFIX GIT_SHALLOW_FILE GIT_COMMON_DIR GIT_NAMESPACE GIT_NO_LAZY_FETCH".split()
)
NO_COMMANDS = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "submodule.recurse=false")
"""What keeps the run's own git from running a hook, an fsmonitor or a submodule's: an agent can
write the repository's `.git` (its worktree shares it), and what git starts for the run runs
beside the live run under no keeper and with no mark, a person to the operator socket."""
SHARED_DATA = ("objects", "refs", "packed-refs", "shallow", "worktrees", "lfs")  # of a common directory: data, no command


@dataclass(frozen=True)
class Worktree:
    """A worktree made by `wf.worktree` (`wf.worktrees[name]`).

    Attributes:
        name: its name in the run.
        path: its directory, the agent's `cwd` (`worktree_path`: beside the runs' record).
        branch: the branch it is on, `awf/<run id>/<name>`.
        base: the commit it started from (what `base` resolved to).
        keep: what happens to it at the run's end: `"on-change"`, `"always"` or `"never"`.
        repository: the top of the working tree it was made from.
        git_dir: its own git directory (`.git/worktrees/<id>` of the repository).
        common_dir: the repository's git directory, where its objects and branches are. A
            sandboxed agent never writes it: it commits in a git directory of its own, carried
            back at its attempt's end (agentswf.sandbox.gitbox).
        given_base: `base` as it was given.
        run_id: the run that made it.
    """

    name: str
    path: Path
    branch: str
    base: str
    keep: Keep
    repository: Path
    git_dir: Path
    common_dir: Path
    given_base: str
    run_id: str


def worktrees_home(run_root: Path) -> Path:
    """Where the worktrees of the runs recorded under `run_root` are: beside it, not in it."""
    return run_root.parent / WORKTREES_DIR


class GitFailed(Exception):
    """A git command failed or couldn't run; the message is git's (or why it couldn't run)."""


def git_environment() -> dict[str, str]:
    environment = {name: value for name, value in os.environ.items() if name not in LOCAL_GIT_VARIABLES}
    environment.update(LC_ALL="C", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0")
    return environment


def git(
    *args: str | Path,
    cwd: Path | None = None,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    stdin: IO[bytes] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run git (from PATH) with `args`, running no command the repository names (`NO_COMMANDS`),
    with `env` added to its environment and `stdin` (a file) its input; GitFailed if it can't
    run, or (`check`) exits non-zero."""
    executable = shutil.which("git")
    if executable is None:
        raise GitFailed("git is not installed (no git on PATH)")
    environment = git_environment()
    environment.update(env or {})
    try:
        done = subprocess.run(
            [executable, *NO_COMMANDS, *map(str, args)],
            cwd=cwd,
            env=environment,
            stdin=subprocess.DEVNULL if stdin is None else stdin,
            capture_output=True,
            text=True,
            errors="surrogateescape",
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise GitFailed(f"git {args[0]} took over {GIT_TIMEOUT_SECONDS:g}s") from None
    except OSError as error:
        if cwd is not None and not cwd.is_dir():
            raise GitFailed(f"{cwd} is not there") from None
        raise GitFailed(f"git couldn't run: {error.strerror or error}") from None
    if check and done.returncode != 0:
        raise GitFailed(git_message(done))
    return done


@contextmanager
def pinned_git_dir(common: Path) -> Iterator[Path]:
    """A git common directory for the repository whose own is `common`, made for one git command
    and removed after: its objects, refs, shallow list and worktrees' entries are `common`'s
    (symbolic links: data, no command), its config only the repository format `common`'s names,
    and it has no attributes and no hooks. A worktree read, checked out or removed with it is as
    in `common`, but through no filter the repository's config defines (`git worktree remove`
    checks the worktree is clean with a `git status` of its own, which inherits it)."""
    with tempfile.TemporaryDirectory(prefix="awf-git-") as made:
        pinned = Path(made)
        for name in SHARED_DATA:
            (pinned / name).symlink_to(common / name)
        (pinned / "config").write_text(format_config(common))
        yield pinned


def format_config(common: Path) -> str:
    """A config of nothing but the repository format of the repository whose git directory is
    `common` (its object format: sha1 or sha256); GitFailed if it names one git can't. Read by
    git once for each state of its config file (a git command saved on every later one)."""
    try:
        seen = os.stat(common / "config")
        state: tuple[int, ...] = (seen.st_ino, seen.st_size, seen.st_mtime_ns)
    except OSError:
        state = ()
    key = (str(common), state)
    if key not in _formats:
        said = git("config", "--file", common / "config", "--get", "extensions.objectformat", check=False)
        object_format = said.stdout.strip() if said.returncode == 0 else ""
        if not re.fullmatch(r"[a-z0-9]*", object_format):
            raise GitFailed(f"the repository's extensions.objectformat is {object_format!r}")
        if len(_formats) >= MAX_FORMATS_KEPT:
            _formats.clear()
        _formats[key] = object_format
    object_format = _formats[key]
    version = f"\trepositoryformatversion = {1 if object_format else 0}\n"
    extensions = f"[extensions]\n\tobjectformat = {object_format}\n" if object_format else ""
    return f"[core]\n{version}{extensions}"


MAX_FORMATS_KEPT = 1024  # repositories whose object format `format_config` remembers
_formats: dict[tuple[str, tuple[int, ...]], str] = {}


def pinned_git(
    common: Path,
    *args: str | Path,
    cwd: Path,
    check: bool = True,
    worktree: tuple[Path, Path] | None = None,
    stdin: IO[bytes] | None = None,
) -> subprocess.CompletedProcess[str]:
    """git `args` in `common`'s repository, from `cwd` (or on `worktree`, its git directory and
    its path), reading none of its config, attributes or hooks (`pinned_git_dir`)."""
    with pinned_git_dir(common) as pinned:
        place = {"GIT_COMMON_DIR": str(pinned)}
        if worktree is not None:
            place.update(GIT_DIR=str(worktree[0]), GIT_WORK_TREE=str(worktree[1]))
        return git(*args, cwd=cwd, check=check, env=place, stdin=stdin)


def git_message(done: subprocess.CompletedProcess[str]) -> str:
    text = " ".join((done.stderr or done.stdout or f"exit {done.returncode}").split())
    return text if len(text) <= GIT_MESSAGE_CHARS else text[: GIT_MESSAGE_CHARS - 1] + "…"


def commit_of(repository: Path, name: str) -> str | None:
    done = git("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}", cwd=repository, check=False)
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def read_link(path: Path) -> str | None:
    """A `gitdir: X` or plain-path file's target, if it is a regular file of at most MAX_LINK_BYTES
    (not a symlink, a FIFO, nor anything larger) and names a path (an agent's NUL in it names none).
    What is checked is what is read: one descriptor (`read_regular`), so a file swapped in between is neither."""
    data = read_regular(path, MAX_LINK_BYTES + 1, follow=False)
    if data is None or len(data) > MAX_LINK_BYTES:
        return None
    text = data.decode(errors="surrogateescape").strip()
    target = text.removeprefix("gitdir:").strip()
    return target if target and "\0" not in target else None


def same_path(a: str | Path, b: str | Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)
