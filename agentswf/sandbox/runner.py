"""An opened sandbox, and the harness wrapper that runs each attempt of its agents inside it.

`Sandbox.confine(key, harness)` gives the harness to open the agent with: every attempt
of it is the same CLI, started by the same keeper (outside: `wfa` from inside still passes
the identity check), but the keeper's command is bubblewrap's (`bwrap.py`), with the agent's
harness home (`homes.py`) and, if anything may be reached, a proxy (`proxy.py`) served on
a socket in the agent's directory for as long as the attempt runs, and the forwarder
(`forwarder.py`) inside in front of the command. Several agents may share one sandbox:
each has its own home, namespaces and proxy socket; they share the spec. A compaction, or the
copy a fork starts from, runs the CLI in the agent's sandbox too, with its home; a fork's copy is
then moved into the fork's own home (`copies.py`).

An agent's home is in its directory, made at its first turn and gone with the run, unless the
sandbox keeps its agents' homes (`homes`): a Temporal worker opens an agent afresh for each
turn, in a directory of a new name, and its CLI's session, in its home, must be there at the
next. A kept home is `homes/<agent key>` (`home_name`), made at the agent's first turn of the
run and found again at the next opening, on the same worker's file system, as an unsandboxed
agent's session is in the worker's user's home. A fork of such an agent (`fork_kept`) places its
copy straight into the fork's kept home, made then: the fork's turns are opened afresh too.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import anyio

from ..errors import DefinitionError, SandboxRefused
from ..git import Worktree, read_link, worktrees_home
from ..harnesses.acp import AcpHarness
from ..harnesses.base import Attempt, AttemptEnding, AttemptResult, Confine, Harness, Operation, OperationResult
from ..harnesses.cli import CliHarness
from ..harnesses.keeper import remove_tree
from ..harnesses.usage import Usage
from ..launcher.place import sockets_root
from . import gitsweep
from .bwrap import SYSTEM_PATHS, TMP_BYTES, AgentPaths, SystemEntry, bwrap_argv, forwarded, proxy_port, too_long
from .copies import CopyRefused, Staged, forkable, place_copy, take_copy
from .gitbox import GitBox, carry_back, identity, open_box
from .gitsweep import module_directories
from .homes import found_home, home_name, model_endpoints, prepare_home, sandbox_env
from .proxy import Allowlist, Endpoint, Log, Proxy, serving
from .spec import ResolvedSpec, SandboxSpec

BWRAP_PACKAGE = "bubblewrap"
PROBE_TIMEOUT_SECONDS = 10.0
HOME_NAME = "home"  # in an agent's directory, unless its home is kept (`Sandbox.homes`)
OPERATION_DIR_PREFIX = "op-"  # in the run's directory: an operation's own, where its agent's isn't made
KEPT_FORKS_NAME = ".forks"  # beside kept homes, the copies a fork takes: no `home_name` starts with a dot but a hash
REPLACED_PREFIX = ".replaced-"  # beside kept homes, a fork's home set aside for a new copy: no `home_name` has it
FORK_DIR_PREFIX = "awf-fork-"  # in the directory of sockets: a kept home's fork's own agent directory (`fork_kept`)
FORKS_NAME = "forks"  # in an agent's directory: the copies of its session its forks take, until each one's home is made
STAGING_NAME_BYTES = 8  # of a copy's directory's random name there
PROXY_SOCKET_NAME = "n.sock"
SHEBANG_BYTES = 256  # of a script, read for the interpreter its first line names
RECORD_DIR = ".awf"  # where runs are recorded by default: no sandbox sees it
FORWARDER = Path(__file__).resolve().with_name("forwarder.py")
PACKAGE_DIR = Path(__file__).resolve().parent.parent  # agentswf: the wfa client and the forwarder
_probed: dict[str, str | None] = {}  # bwrap's path: why it can't sandbox here, None if it can


def find_bwrap() -> str:
    """bubblewrap's path; DefinitionError naming the package where it isn't installed."""
    found = shutil.which("bwrap")
    if found is None:
        raise DefinitionError(
            f"a sandbox needs bubblewrap, and `bwrap` is not on PATH: install the package `{BWRAP_PACKAGE}` "
            f"(Debian and Ubuntu: apt-get install {BWRAP_PACKAGE}; Fedora: dnf install {BWRAP_PACKAGE})"
        )
    return found


async def probe(bwrap: str) -> None:
    """Run one empty sandbox, once per process: where the kernel refuses namespaces, say so at open."""
    if bwrap not in _probed:
        argv = [bwrap, "--unshare-all", "--new-session", "--cap-drop", "ALL", "--proc", "/proc", "--dev", "/dev",
                "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]  # fmt: skip
        for entry in system_view():
            argv += ["--symlink", entry.link, entry.path] if entry.link else ["--ro-bind", entry.path, entry.path]
        argv += ["--", "true"]
        try:
            with anyio.fail_after(PROBE_TIMEOUT_SECONDS):
                done = await anyio.run_process(argv, check=False, stdin=subprocess.DEVNULL)
            problem = None if done.returncode == 0 else done.stderr.decode(errors="replace").strip() or f"status {done.returncode}"
        except (OSError, TimeoutError) as error:
            problem = str(error)
        _probed[bwrap] = problem
    problem = _probed[bwrap]
    if problem is not None:
        raise DefinitionError(
            f"bubblewrap can't make a sandbox here ({problem}): it needs unprivileged user namespaces "
            "(kernel.unprivileged_userns_clone=1), or a setuid bwrap"
        )


def system_view() -> tuple[SystemEntry, ...]:
    """`SYSTEM_PATHS` as this machine has them: directories bound, symlinks kept, the missing left out."""
    found = []
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            found.append(SystemEntry(path, os.readlink(path)))
        elif os.path.isdir(path):
            found.append(SystemEntry(path))
    return tuple(found)


def runtime_paths(harness: Harness, env: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """What runs an agent, read-only inside: the interpreter (for `wfa`), agentswf, the CLI's install
    (an ACP agent's command's), and the interpreter its script names (`#!/usr/bin/env node`, found on
    `env`'s PATH as inside: qwen's and gemini's node)."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent.parent, PACKAGE_DIR}
    executable = harness.executable if isinstance(harness, CliHarness) else harness.command[0] if isinstance(harness, AcpHarness) else None
    if executable is not None:
        paths.add(_install(executable))
        given = Path(os.path.abspath(executable)).parent
        paths.add(next((parent for parent in given.parents if parent.name == "node_modules"), given))
        interpreter = script_interpreter(executable, (env or os.environ).get("PATH", os.defpath))
        if interpreter is not None:
            found = _install(interpreter)
            paths.add(found.parent if found.name == "bin" else found)  # a `bin` of a prefix: the prefix, with its lib
    system = tuple(Path(path) for path in SYSTEM_PATHS)
    return tuple(sorted(path for path in paths if path != Path("/") and path.exists() and not _inside(path, system)))


def _install(executable: str) -> Path:
    """Where `executable` is installed: its `node_modules` (an npm package's), else its directory."""
    real = Path(os.path.realpath(executable))
    return next((parent for parent in real.parents if parent.name == "node_modules"), real.parent)


def script_interpreter(executable: str, path: str) -> str | None:
    """The interpreter a script's first line names (`#!/path/to/it`, or `#!/usr/bin/env name`, looked
    up on `path`), or None for a binary or what can't be read."""
    try:
        with open(executable, "rb") as file:
            first = file.read(SHEBANG_BYTES).split(b"\n", 1)[0]
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode(errors="replace").split()
    if words and os.path.basename(words[0]) == "env":
        words = [word for word in words[1:] if not word.startswith("-")]
        return shutil.which(words[0], path=path) if words else None
    return words[0] if words else None


def check_reach(spec: ResolvedSpec, record: Path | None = None) -> None:
    """Refuse paths that would show the sandbox the run's own directory of sockets (every agent's),
    or that lie in the runs' record `record` (its run root: what `awf continue` takes as true)."""
    sockets = Path(os.path.realpath(sockets_root()))
    for field, paths in (("read", spec.read), ("write", spec.write), ("cwd", (spec.cwd,))):
        for path in paths:
            if path == Path("/") or sockets == path or path in sockets.parents:
                raise DefinitionError(
                    f"sandbox {field} {path} holds {sockets}, where every agent's socket is: "
                    "give the directories the agents need, not one above it"
                )
            if record is not None and (path == record or record in path.parents):
                raise DefinitionError(
                    f"sandbox {field} {path} is in the runs' record at {record}: no sandbox is given a record, "
                    "whose stages and sessions a continued run takes back as they are"
                )


def hidden_records(spec: ResolvedSpec, cwd: Path, record: Path | None) -> list[Path]:
    """What covers the records in the paths a sandbox is given: each one's `.awf`, and the run's own
    record (its run root, whatever its name) and worktrees (beside it) where they lie inside one of
    them. An agent's own worktree among them is shown again (`bwrap_argv`)."""
    given = (spec.cwd, Path(os.path.realpath(cwd)), *spec.read, *spec.write)  # real paths, as the record's is
    hidden = [path / RECORD_DIR for path in given if (path / RECORD_DIR).is_dir()]
    for kept in (record, worktrees_home(record)) if record is not None else ():
        covered = any(kept == path or path in kept.parents for path in hidden)
        if not covered and kept.is_dir() and any(path in kept.parents for path in given):
            hidden.append(kept)
    return hidden


WORKTREE_CONFIG = "config.worktree"  # a git directory's own config, read where extensions.worktreeConfig is on
LINKED_WORKTREES = "worktrees"  # of a git directory: its linked worktrees' git directories, each with a config.worktree and a commondir
GIT_CONTROLS = ("config", "hooks", WORKTREE_CONFIG, LINKED_WORKTREES)
"""Of a git directory, what names commands git runs (core.fsmonitor, filters, hooks): read-only in
a sandbox. Its linked worktrees' entries are held as one directory, whatever their number: each
holds a `config.worktree` and a `commondir` git reads in that worktree, and their index and HEAD
are the other worktrees' (yours), not the agent's."""
MAX_LINK_HOPS = 40  # symbolic links followed to a git control, as the kernel follows (ELOOP)


def git_controls(spec: ResolvedSpec, cwd: Path, submodules: Sequence[Path] = ()) -> list[Path]:
    """The git config and hooks of each repository at the top of a path the sandbox may write (its
    cwd's too), or its `.git` file (a worktree's: the git directory it names), of every directory
    under its `.git/modules` (`module_directories`: a submodule's git directory may have lost its
    HEAD), and of `submodules` (the git directories of its submodules with a checkout, a `.git`
    directory in one too) and under theirs; and the `config.worktree` of each of these, and their
    linked worktrees' entries (`.git/worktrees`, one directory however many there are):
    read-only inside, or the agent would choose what your next `git status` runs. SandboxRefused
    where there are too many to hold, and where one is reached through a symbolic link that lies
    in a path the sandbox may write, or names
    something missing there (`_unholdable`): a mount holds neither the link nor what isn't there.
    Each by its real path (a hooks directory may be a symlink), where the sandbox could write it;
    a git directory's missing hooks directory and `config.worktree` are made (empty), so that
    there is one to hold read-only."""
    found: set[Path] = set()
    git_dirs = list(submodules)
    for top, git in _repositories(spec, cwd):
        if top.name != ".git" and os.path.islink(top / ".git"):  # the agent would put a repository of its own there
            problem = _unholdable(top / ".git", spec.write)
            if problem is not None:
                raise SandboxRefused(_link_refused(top / ".git", problem))
        if git.is_file() and _inside(git, spec.write):  # a worktree's or a submodule's: it names the git directory
            found.add(git)
        if git.is_dir():
            git_dirs.append(git)
    for git in git_dirs:
        directories = [git, *module_directories(git)]
        linked = {directory / LINKED_WORKTREES for directory in directories}
        for directory in directories:
            if not linked.isdisjoint(directory.parents):
                continue  # a linked worktree's entry, in a directory held whole
            if directory == git or _is_git_directory(directory):
                _make_holdable(directory)
            resolved = os.path.realpath(directory) == str(directory)
            for name in GIT_CONTROLS:
                if not resolved or os.path.islink(directory / name):
                    problem = _unholdable(directory / name, spec.write)
                    if problem is not None:
                        raise SandboxRefused(_link_refused(directory / name, problem))
                real = Path(os.path.realpath(directory / name))
                if real.exists() and _inside(real, spec.write):
                    found.add(real)
    return sorted(found)


def _unholdable(path: Path, write: tuple[Path, ...]) -> str | None:
    """Why the git control `path` can't be held read-only for the symbolic links it is reached
    through, None if it can: a link in a path the sandbox may write (a mount holds what a link
    names, not the link: the agent replaces the link with a hooks directory or a config of its
    own), or one naming something missing there (the agent makes it). Each link is followed by
    hand, from the root, so that where each one lies is known."""
    current = Path(os.path.abspath(path))
    for _hop in range(MAX_LINK_HOPS):
        for depth in range(2, len(current.parts) + 1):
            prefix = Path(*current.parts[:depth])  # no link above it: where it lies is its own path
            if os.path.islink(prefix):
                break
        else:
            end = Path(os.path.normpath(current))
            if end != Path(os.path.normpath(path)) and not os.path.lexists(end) and _inside(end, write):
                return f"it is a symbolic link to {end}, which is missing, in a path the sandbox may write: the agent would make it"
            return None
        place = Path(os.path.normpath(prefix))
        if _inside(place, write):
            where = "it" if place == Path(os.path.normpath(path)) else str(place)
            return f"{where} is a symbolic link in a path the sandbox may write: the agent would put its own in its place"
        current = Path(os.path.normpath(prefix.parent)) / os.readlink(prefix) / Path(*current.parts[depth:])
    return f"it is reached through more than {MAX_LINK_HOPS} symbolic links"


def _link_refused(control: Path, problem: str) -> str:
    """The refusal of an attempt with a git control (`.git/hooks`, a config) that a mount can't hold."""
    return (
        f"the sandbox won't start: {control} can't be held read-only ({problem}), and your next git command "
        f"there would run what it plants. Replace the link with what it names (a hooks directory elsewhere: "
        f"core.hooksPath in the repository's config), or don't give the sandbox this repository to write"
    )


def _is_git_directory(directory: Path) -> bool:
    """Whether git would take `directory` for a git directory (as its `is_git_directory` does, but
    for a HEAD an agent may have removed: a config will do): objects and refs, or a `commondir` (a
    linked worktree's). Not a directory of refs with a HEAD (`refs/remotes/origin`) or a branch
    named `config`: a file made there would be a broken ref."""
    named = (directory / "HEAD").is_file() or (directory / "config").is_file()
    has_data = (directory / "objects").is_dir() and (directory / "refs").is_dir()
    return named and (has_data or (directory / "commondir").is_file())


def _make_holdable(git: Path) -> None:
    """The git directory `git`'s hooks directory and `config.worktree`, made empty where missing:
    a mount holds only what is there, and one made in the sandbox would be the agent's. Neither
    is made through a symbolic link (one to nothing: git reads nothing through it)."""
    try:
        (git / "hooks").mkdir(exist_ok=True)
    except OSError:
        pass
    try:
        os.close(os.open(git / WORKTREE_CONFIG, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666))
    except OSError:
        pass  # there already (or a symbolic link)


def _too_many_controls(problem: str, controls: Sequence[Path]) -> str:
    """The refusal of an attempt whose sandbox would hold more git controls than bwrap can take."""
    return (
        f"the sandbox won't start: {problem}. It holds read-only the config, config.worktree and hooks of "
        f"each git directory in a repository it may write ({len(controls)} paths here), each a mount of its own; see "
        "what is under their .git/modules and .git/worktrees (an agent may have made them) and remove what "
        "isn't your submodules' or worktrees'"
    )


def _repositories(spec: ResolvedSpec, cwd: Path) -> list[tuple[Path, Path]]:
    """Each repository at the top of a path the sandbox may write (its cwd's too): its working
    tree and its `.git` (a directory, or a worktree's file), by real path."""
    cwd = Path(os.path.realpath(cwd))
    tops = {*spec.write, *(path for path in (spec.cwd, cwd) if _inside(path, spec.write))}
    found = []
    for top in sorted(tops):
        git = Path(os.path.realpath(top if top.name == ".git" else top / ".git"))  # a repository, or its .git given
        found.append((git.parent if top.name == ".git" else top, git))
    return found


def git_directories(spec: ResolvedSpec, cwd: Path) -> list[tuple[Path, Path]]:
    """Each repository `_repositories` finds whose `.git` is a directory the sandbox may write:
    its working tree and that directory, what `gitsweep` reads and puts back."""
    return [(top, git) for top, git in _repositories(spec, cwd) if git.is_dir() and _inside(git, spec.write)]


def unseen_git(spec: ResolvedSpec, cwd: Path) -> str | None:
    """Why git can't run in `cwd` inside the sandbox, None where it can (or `cwd` is in no
    repository): the git directory its `.git` names (a linked worktree's, made by `git worktree
    add` outside the run) or the repository's common one lies outside what the sandbox shows, so
    every git command there fails `not a git repository` with nothing to say why."""
    cwd = Path(os.path.realpath(cwd))
    top = next((path for path in (cwd, *cwd.parents) if os.path.lexists(path / ".git")), None)
    if top is None:
        return None
    named = str(top / ".git") if (top / ".git").is_dir() else read_link(top / ".git")
    if named is None:
        return None
    git_dir = Path(os.path.realpath(top / named))
    common = read_link(git_dir / "commondir")
    directories = (git_dir, Path(os.path.realpath(git_dir / common)) if common is not None else git_dir)
    shown = (spec.cwd, cwd, *spec.read, *spec.write)
    unseen = [directory for directory in dict.fromkeys(directories) if not _inside(directory, shown)]
    if not unseen:
        return None
    return (
        f"git can't run in {cwd} in this sandbox: its git directory {unseen[0]} is not in what the sandbox "
        f"reads or writes, so git says 'not a git repository'. To have the agent commit, open it on a "
        f"worktree of the run (cwd=wf.worktree(name)): it gets a git directory of its own; to let it read "
        f"history only, add {unseen[-1]} to the sandbox's read"
    )


def _inside(path: Path, paths: tuple[Path, ...]) -> bool:
    return any(given == path or given in path.parents for given in paths)


class Sandbox:
    """An opened sandbox (`wf.sandboxes.open`): pass it as `sandbox=` to `wf.agents.open`; agents may share it.

    Attributes:
        key: its key in the run.
        spec: what it reads, writes and reaches, every path absolute.
    """

    def __init__(
        self, key: str, spec: ResolvedSpec, *, bwrap: str, log: Log, record: Path | None = None, given: SandboxSpec | None = None,
        homes: Path | None = None,
    ) -> None:
        self.key = key
        self.spec = spec
        self.given = given  # the spec as given, its paths relative: the run's sandbox resolves it at each agent's cwd
        self.bwrap = bwrap
        self.log = log
        self.record = record  # the run root, covered wherever a given path holds it
        self.homes = homes  # where its agents' homes are kept from one opening to the next (in `record`); None: in each one's directory
        self.agents: list[str] = []
        self.own = False  # an agent's own, from a spec it was given (`sandbox={...}`): its fork's is its own too
        self.copies: dict[str, Staged] = {}  # forks' copies of its agents' sessions, by the copy's session, until taken

    def confine(self, agent: str, harness: Harness, worktree: Worktree | None = None) -> Harness:
        """`harness`, its every attempt run in this sandbox (on `worktree`, a worktree of its run, with a git of its own)."""
        self.agents.append(agent)
        return SandboxedHarness(self, agent, harness, worktree)

    def __repr__(self) -> str:
        return f"<Sandbox {self.key} agents={len(self.agents)}>"


class SandboxedHarness(Harness):
    """A harness whose attempts run in a sandbox; a harness that spawns nothing (a script) runs as it is."""

    name = "sandboxed"

    def __init__(self, sandbox: Sandbox, agent: str, inner: Harness, worktree: Worktree | None = None) -> None:
        self.sandbox = sandbox
        self.agent = agent
        self.inner = inner
        self.worktree = worktree  # a worktree of the run the agent works in: its git is a directory of its own (gitbox)
        self.identity: dict[str, str] | None = None  # what its git commits with there, read at its first attempt
        self.endpoints: frozenset[Endpoint] | None = None  # read at the first attempt, with the home made
        self.inherited: Staged | None = None  # a fork's: the copy of its parent's session its home is made with
        self.kept = sandbox.homes / home_name(agent) if sandbox.homes is not None else None  # its home, if kept

    @property
    def spawns(self) -> bool:  # type: ignore[override]
        return self.inner.spawns

    @property
    def can_await(self) -> bool:  # type: ignore[override]
        return self.inner.can_await

    @property
    def supports_waiting(self) -> bool:  # type: ignore[override]
        return self.inner.supports_waiting

    def settings(self) -> tuple[str | None, str | None]:
        return self.inner.settings()

    def cli_executable(self) -> tuple[str, str] | None:
        return self.inner.cli_executable()

    def with_settings(self, model: str | None, effort: str | None) -> Harness:
        switched = SandboxedHarness(self.sandbox, self.agent, self.inner.with_settings(model, effort), self.worktree)
        switched.endpoints, switched.inherited = self.endpoints, self.inherited
        return switched

    def seed(self, session: str, totals: Usage | None) -> None:
        self.inner.seed(session, totals)

    def totals(self, session: str) -> Usage | None:
        return self.inner.totals(session)

    async def compact(self, operation: Operation) -> OperationResult:
        """The compaction's CLI run in the agent's sandbox, with its home (where its session is) and its proxy."""
        return await self._operate(operation)

    async def fork(self, operation: Operation) -> OperationResult:
        """The CLI's fork run in the agent's sandbox, with its home (where its session is): the copy it
        makes there is then moved out (`copies.take_copy`), kept by the sandbox for the fork's home
        (`inherited`), made at the fork's first attempt. The agent's home is left as it was."""
        result = await self._operate(operation)
        if not self.inner.spawns or result.ending.kind != "exited" or result.session is None:
            return result
        assert operation.launcher is not None  # it ran in its directory
        agent_dir = operation.launcher.parent
        forks, home = self._forks(agent_dir), self._home(agent_dir)
        name = self.inner.name

        def take(session: str) -> Staged:
            forks.mkdir(mode=0o700, exist_ok=True)
            return take_copy(name, session, home, forks / secrets.token_hex(STAGING_NAME_BYTES))

        try:
            staged = await anyio.to_thread.run_sync(take, result.session)
        except (CopyRefused, OSError) as error:
            return OperationResult(AttemptEnding("failed", reason=f"the copy of the session could not be moved out of the sandbox's home: {error}"))
        self.sandbox.copies[result.session] = staged
        return result

    async def fork_kept(self, operation: Operation, fork: str, fork_cwd: Path) -> OperationResult:
        """The fork of an agent whose home is kept (`Sandbox.homes`: a Temporal worker's), opened afresh
        for it: the CLI's fork run as `fork` runs it, in an agent directory of the operation's own (in the
        directory of sockets, which no sandbox is given), and the copy placed at once in the fork's kept
        home (`homes/<fork key>`), made now, so the fork's first turn, opened afresh on a worker, resumes
        it; the result's session as the fork's home names it. A fork's home already there (an earlier
        attempt's fork of the key: a continued run keeps its run id; or this fork's, retried) is set
        aside, renamed, not written or read: its agent may have written it, and the copy is placed only
        in a home made for it."""
        if self.kept is None or self.sandbox.homes is None:
            raise SandboxRefused(f"agent {self.agent}: a fork's copy is placed in a kept home, and this sandbox keeps none")
        if not self.inner.spawns:
            return await self.fork(operation)
        home = self.sandbox.homes / home_name(fork)
        agent_dir = Path(await anyio.to_thread.run_sync(lambda: tempfile.mkdtemp(prefix=FORK_DIR_PREFIX, dir=sockets_root())))
        try:
            result = await self.fork(replace(operation, launcher=agent_dir / "launcher"))
            staged = self.sandbox.copies.pop(result.session, None) if result.session is not None else None
            if staged is None:
                return result
            assert result.session is not None  # the copy is kept by its session

            def place(session: str) -> str:
                try:
                    if found_home(home):  # an earlier attempt's fork of the key (a continued run keeps its id)
                        os.rename(home, home.with_name(REPLACED_PREFIX + secrets.token_hex(STAGING_NAME_BYTES)))
                    if not prepare_home(home, self.inner.cli_home(), operation.env):
                        raise CopyRefused(f"agent {fork}'s home was made meanwhile")
                    place_copy(staged, home, Path(os.path.realpath(fork_cwd)))
                finally:
                    shutil.rmtree(staged.directory, ignore_errors=True)  # placed, it is gone already
                return staged.session(session, home)

            try:
                session = await anyio.to_thread.run_sync(place, result.session)
            except (CopyRefused, OSError) as error:
                return OperationResult(AttemptEnding("failed", reason=f"the copy of the session could not be placed in the fork's home: {error}"))
            return replace(result, session=session)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(remove_tree, str(agent_dir))

    def _home(self, agent_dir: Path) -> Path:
        """The agent's home: kept (`Sandbox.homes`), else in its directory."""
        return self.kept if self.kept is not None else agent_dir / HOME_NAME

    def _forks(self, agent_dir: Path) -> Path:
        """Where the copies its forks take wait: beside the homes they go to (a rename, not a copy)."""
        return self.sandbox.homes / KEPT_FORKS_NAME if self.sandbox.homes is not None else agent_dir / FORKS_NAME

    def _unready(self, operation: Operation) -> str | None:
        """Why a compaction or a fork's copy can't run, None if it can: the agent has had a turn in its
        sandbox, in this run (its home is made); a fork's copy, in this opening too (it waits in its directory)."""
        agent_dir = operation.launcher.parent if operation.launcher is not None else None
        if agent_dir is None or not found_home(self._home(agent_dir)):
            return "the agent has had no turn in its sandbox in this run: its session isn't there"
        if operation.kind == "fork" and not agent_dir.is_dir():
            return "the agent has had no turn in its sandbox since it was opened: a fork's copy waits in its directory"
        return None

    async def _operate(self, operation: Operation) -> OperationResult:
        """A compaction or a fork's copy: the CLI run in the agent's sandbox, with its home and its proxy."""
        run = self.inner.fork if operation.kind == "fork" else self.inner.compact
        if not self.inner.spawns:
            return await run(operation)
        if operation.kind == "fork" and not forkable(self.inner.name):
            raise NotImplementedError(f"{self.inner.name} can't fork in a sandbox (where its CLI keeps a session isn't known here)")
        unready = self._unready(operation)
        if unready is not None:
            return OperationResult(AttemptEnding("failed", reason=unready))
        assert operation.launcher is not None  # _unready says so
        async with (
            self._operation_dir(operation.launcher.parent) as agent_dir,
            self._swept(operation.cwd) as submodules,
            self._within(agent_dir, operation.env, operation.cwd, submodules) as confine,
        ):
            session = self._session(operation.session, agent_dir)
            return await run(replace(operation, confine=confine, session=session))

    @asynccontextmanager
    async def _operation_dir(self, agent_dir: Path) -> AsyncIterator[Path]:
        """Where an operation's proxy socket is: the agent's directory, or, where it isn't made (an
        agent with a kept home, opened afresh for the operation: a compaction on Temporal), one of
        the operation's own in the run's directory beside it, removed after."""
        if agent_dir.is_dir():
            yield agent_dir
            return
        own = Path(await anyio.to_thread.run_sync(lambda: tempfile.mkdtemp(prefix=OPERATION_DIR_PREFIX, dir=agent_dir.parent)))
        try:
            yield own
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(remove_tree, str(own))

    def _session(self, session: str | None, agent_dir: Path) -> str | None:
        """The session as this agent's home names it: a fork's first (pi's file) is named in its parent's."""
        if session is None or self.inherited is None:
            return session
        return self.inherited.session(session, self._home(agent_dir))

    async def run(self, attempt: Attempt) -> AttemptResult:
        if not self.inner.spawns:
            return await self.inner.run(attempt)
        async with (
            self._swept(attempt.cwd, boxed=self.worktree is not None) as submodules,
            self._boxed(attempt.launcher.parent, attempt.cwd) as box,
            self._within(attempt.launcher.parent, attempt.env, attempt.cwd, submodules, box) as confine,
        ):
            session = self._session(attempt.session, attempt.launcher.parent)
            return await self.inner.run(replace(attempt, confine=confine, session=session))

    @asynccontextmanager
    async def _boxed(self, agent_dir: Path, cwd: Path) -> AsyncIterator[GitBox | None]:
        """The attempt's own git directory on the agent's worktree (`gitbox`), and what it did
        there carried back into the repository once its every process is gone, logged in the
        run's record. SandboxRefused: not begun."""
        worktree = self.worktree
        if worktree is None:
            yield None
            return
        writable = _inside(Path(os.path.realpath(cwd)), self.sandbox.spec.write)
        if self.identity is None:  # read once: the name and email the repository's git commits with
            self.identity = await anyio.to_thread.run_sync(identity, worktree)
        named = self.identity
        box = await anyio.to_thread.run_sync(lambda: open_box(worktree, agent_dir, named, writable=writable))
        try:
            yield box
        finally:
            with anyio.CancelScope(shield=True):  # begun, it is carried back: else its commits are lost
                for line in await anyio.to_thread.run_sync(carry_back, box):
                    self.sandbox.log(
                        f"sandbox {self.sandbox.key}: agent {self.agent}: {line}",
                        sandbox=self.sandbox.key, agent=self.agent, carried=line,
                    )  # fmt: skip

    @asynccontextmanager
    async def _swept(self, cwd: Path, *, boxed: bool = False) -> AsyncIterator[tuple[Path, ...]]:
        """What the attempt left in a repository it may write that your git would obey (`boxed`:
        and in its worktree, whose index what it did is carried back into), undone once its every
        process is gone and no other attempt is in that repository (`gitsweep.Sweeps`), and logged
        in the run's record (by the agent whose attempt ended last); meanwhile, the git directories
        of the repositories' submodules, to hold. SandboxRefused: not begun."""
        found = await anyio.to_thread.run_sync(git_directories, self.sandbox.spec, cwd)
        repositories = [(git, top) for top, git in found]
        if boxed and self.worktree is not None:
            repositories.append((self.worktree.git_dir, Path(os.path.realpath(self.worktree.path))))
        with anyio.CancelScope(shield=True):  # begun, it is ended: else the repository is never swept again
            states = await anyio.to_thread.run_sync(gitsweep.SWEEPS.begin, repositories)
        try:
            yield tuple(git for state in states for git in state.submodules)
        finally:
            with anyio.CancelScope(shield=True):
                for line in await anyio.to_thread.run_sync(gitsweep.SWEEPS.end, repositories):
                    self.sandbox.log(
                        f"sandbox {self.sandbox.key}: agent {self.agent}: {line}",
                        sandbox=self.sandbox.key, agent=self.agent, undone=line,
                    )  # fmt: skip

    @asynccontextmanager
    async def _within(
        self, agent_dir: Path, env: Mapping[str, str], cwd: Path, submodules: Sequence[Path], box: GitBox | None = None
    ) -> AsyncIterator[Confine]:
        """What confines a command of the agent's CLI (`submodules`' git controls held too, `box` its
        git on its worktree), with the proxy to its model served meanwhile; its home made at the first
        (found again, if kept from an earlier opening)."""
        home = self._home(agent_dir)
        if self.endpoints is None:
            made = await anyio.to_thread.run_sync(prepare_home, home, self.inner.cli_home(), env)
            if made and self.inherited is not None:  # a fork's: its home starts with the copy of its parent's session
                await anyio.to_thread.run_sync(place_copy, self.inherited, home, Path(os.path.realpath(cwd)))
            self.endpoints = model_endpoints(self.inner.cli_home(), env)
            unseen = None if self.worktree is not None else unseen_git(self.sandbox.spec, cwd)
            if unseen is not None:  # once an agent: its git fails with nothing to say why
                self.sandbox.log(f"sandbox {self.sandbox.key}: agent {self.agent}: {unseen}", sandbox=self.sandbox.key, agent=self.agent)
        allow = Allowlist(self.endpoints, self.sandbox.spec.network)
        confine = self._confine(agent_dir, home, allow, submodules, box)
        if not allow:
            yield confine
            return
        proxy = Proxy(allow, self.sandbox.log, sandbox=self.sandbox.key, agent=self.agent)
        async with serving(agent_dir / PROXY_SOCKET_NAME, proxy):
            yield confine

    def _confine(
        self, agent_dir: Path, home: Path, allow: Allowlist, submodules: Sequence[Path], box: GitBox | None
    ) -> Confine:
        tunnels = sorted(str(endpoint) for endpoint in allow.endpoints if endpoint.loopback)
        system = system_view()
        spec = self.sandbox.spec

        def confine(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> tuple[list[str], dict[str, str]]:
            command = list(argv)
            if allow:
                command = forwarded(
                    command, python=sys.executable, forwarder=FORWARDER, proxy_socket=agent_dir / PROXY_SOCKET_NAME,
                    tunnels=tunnels,
                )  # fmt: skip
            runtime = runtime_paths(self.inner, env)  # its interpreter, as the agent's PATH finds it
            records = hidden_records(spec, cwd, self.sandbox.record)  # now: a record made since is covered too
            controls = git_controls(spec, cwd, submodules)
            inside = bwrap_argv(
                spec, AgentPaths(cwd, agent_dir), home, command, system=system, runtime=runtime, hidden=records,
                controls=controls, gitbox=box.paths() if box is not None else None, bwrap=self.sandbox.bwrap,
            )  # fmt: skip
            problem = too_long(inside)
            if problem is not None:
                raise SandboxRefused(_too_many_controls(problem, controls))
            return inside, sandbox_env(env, home, proxy_port(tunnels) if allow else None)

        return confine
