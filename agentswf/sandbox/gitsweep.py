"""What a sandboxed agent left in a repository it may write that your next `git status` would
obey, undone as the last of the attempts in it ends.

A repository's `.git/config` and `.git/hooks` are held read-only in the sandbox (`runner.git_controls`),
and so are every `config` and `hooks` under its `.git/modules` (`module_directories`: every
directory there that is or could be a git directory, whether or not it has a `HEAD`: an agent can
remove one, and those between them; not their refs and logs) and those of a
submodule's `.git` directory in its checkout; and the `config.worktree` (read where
`extensions.worktreeConfig` is on) of each of those git directories, made empty first where
missing, and their linked worktrees' directory (`worktrees`), whole, one mount however many
worktrees it holds. But git reads commands from other places the agent can write, and a mount
can't hold a file that isn't there yet:

- a `commondir` file (`.git/commondir`, a linked worktree's `.git/worktrees/<name>/commondir`
  where there was no `worktrees` to hold, one in any directory under `.git/modules`, or in a
  submodule's `.git` directory) names the directory git takes config and hooks from: one the
  agent made, with a `core.fsmonitor` of its own, runs it in your next `git status`;
- a submodule (a gitlink in the index, a submodule's index too) whose checkout holds a
  repository: `git status` runs a `git status` in it, with that repository's config, and in its
  submodules. The agent can make one (`git init sub`, `git add sub`), make a repository in the
  checkout of one that wasn't checked out, or point a checked-out one's `.git` file at a
  directory of its own.

So before the first attempt in a repository the run reads its `commondir` files, the submodules
of its index, their checkouts' `.git`, and theirs, every submodule's the same (`read_state`);
after the last, with every process of the attempts gone (each sandbox's pid namespace ends with
its attempt), each of those files made or changed is put back as it was (a directory made there
moved aside, to a name no one could take in advance), and a submodule added is taken out of its
index (`update-index --force-remove`: its directory and its commits stay where they are, shown
as untracked), each logged in the run's record (`repairs`, a pure decision). A repository with
more than MAX_SUBMODULES submodules, or a `.git/modules` of more than MAX_MODULE_GIT_DIRECTORIES
git directories (or MAX_MODULE_DIRECTORIES directories walked to find them), is refused
(`SandboxRefused`: the attempt fails, saying so), never held in part.

Attempts that overlap in one repository (agents sharing a sandbox, or two sandboxes writing the
same repository) share one state, read before the first began (`Sweeps`): while any of them
runs nothing is put back, and what the last to end puts back is what the first found, never
what another attempt left. While an attempt runs, your git in that repository is exposed:
run it where a sandbox writes only between turns, or after the run.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SandboxRefused
from ..git import GitFailed, pinned_git

GITLINK_MODE = "160000"  # an index entry's mode for a submodule
MAX_MODULE_GIT_DIRECTORIES = 512  # git directories under one git directory's `modules/`, each one's config and hooks held
MAX_MODULE_DIRECTORIES = 16384  # directories walked there to find them: names' parts, never a git directory's data
MAX_SUBMODULES = 256  # repositories: a repository's submodules with a checkout, theirs included, read and swept
MAX_POINTER_BYTES = 8192  # of a `commondir` or `.git` file (a path, `gitdir: ` before it): no git writes a larger one
NOT_A_FILE = b"\0"  # a pointer's bytes where something else is there (a FIFO, a directory, unreadable)
OVERSIZED = b"\0" * (MAX_POINTER_BYTES + 1)  # a pointer larger than MAX_POINTER_BYTES: no file read is these bytes
ASIDE_TOKEN_BYTES = 16  # of randomness in the name a directory is moved aside to
ASIDE_TRIES = 8  # names drawn before giving up (one is taken only if planted, and then not twice)
LOOSE_OBJECTS = re.compile(r"[0-9a-f]{2}")  # `objects/<this>`: loose objects, files only, up to 256 in a git directory

Repository = tuple[Path, Path]  # its git directory and its working tree


@dataclass(frozen=True, slots=True)
class GitState:
    """What of a repository a sandboxed agent may write decides which config your git reads:
    the bytes of each file that names a git directory (`commondir` files, submodules' `.git`;
    None: not there), and the submodules in the index of each repository, the first the
    repository itself, then each of its submodules with a checkout (theirs too)."""

    pointers: Mapping[Path, bytes | None]
    gitlinks: Mapping[Repository, frozenset[str]]
    held: frozenset[Path] = frozenset()  # linked worktrees' directories there as it was read: read-only inside, never read

    @property
    def submodules(self) -> list[Path]:
        """The git directory of each submodule with a checkout: its config and hooks are held too."""
        return [git for git, _tree in list(self.gitlinks)[1:]]


@dataclass(frozen=True, slots=True)
class Repairs:
    """What to undo: each pointer to put back (its bytes before, None: removed), each
    submodule to take out of a repository's index."""

    pointers: Mapping[Path, bytes | None]
    gitlinks: Mapping[Repository, tuple[str, ...]]


def repairs(before: GitState, after: GitState) -> Repairs:
    """What of `after` differs from `before` and could make git read the agent's config; a
    pointer that wasn't a regular file before (a submodule's `.git` directory) can't be put back,
    and one over MAX_POINTER_BYTES (planted: before the run, or by an attempt of a run killed
    before its sweep) is removed."""
    changed = {}
    for path in sorted(set(before.pointers) | set(after.pointers)):
        was = before.pointers.get(path)
        target = None if was == OVERSIZED else was
        if was != NOT_A_FILE and after.pointers.get(path) != target:
            changed[path] = target
    added = {repository: tuple(sorted(links - before.gitlinks.get(repository, frozenset())))
             for repository, links in after.gitlinks.items()}  # fmt: skip
    return Repairs(changed, {repository: links for repository, links in added.items() if links})


def _is_loose_objects(directory: Path) -> bool:
    """A git directory's `objects/xx` (files only, named by their hash, up to 256): not walked, nor
    counted; no git makes a directory there (a submodule you named `lib/objects/ab` would not be held)."""
    return directory.parent.name == "objects" and LOOSE_OBJECTS.fullmatch(directory.name) is not None


def _looks_like_git_directory(directory: Path) -> bool:
    """Whether git could take `directory` for a git directory: it has a `HEAD` or a `config` (an
    agent can remove the one, not the other: it is held). Its data (objects, refs and their
    logs, by the thousand in a submodule with many branches) is not walked; its `modules/` is."""
    return (directory / "HEAD").is_file() or (directory / "config").is_file()


def _subdirectories(directory: Path) -> list[Path]:
    """The directories in `directory` (not through a symbolic link), but loose objects'."""
    try:
        with os.scandir(directory) as entries:
            return [Path(entry.path) for entry in entries if entry.is_dir(follow_symlinks=False)
                    and not _is_loose_objects(Path(entry.path))]  # fmt: skip
    except OSError:
        return []


def _walk_modules(git: Path) -> tuple[list[Path], str | None]:
    """Every directory under `git`'s `modules/` that is, or could be, a git directory, and those
    between them (the parts of a submodule's name, a `modules/` of a submodule's own), not through
    a symbolic link; and why the walk stopped short, if it did: past MAX_MODULE_GIT_DIRECTORIES git
    directories, or MAX_MODULE_DIRECTORIES directories in all."""
    found: list[Path] = []
    gits = 0
    stack = _subdirectories(git / "modules")
    while stack:
        directory = stack.pop()
        if len(found) == MAX_MODULE_DIRECTORIES:
            return sorted(found), _too_many_modules(git, f"{MAX_MODULE_DIRECTORIES} directories that are no git directory's data")
        found.append(directory)
        if not _looks_like_git_directory(directory):
            stack += _subdirectories(directory)
            continue
        gits += 1
        if gits > MAX_MODULE_GIT_DIRECTORIES:
            return sorted(found), _too_many_modules(git, f"{MAX_MODULE_GIT_DIRECTORIES} git directories (submodules', theirs included)")
        nested = directory / "modules"
        if nested.is_dir() and not nested.is_symlink():
            stack.append(nested)
    return sorted(found), None


def _too_many_modules(git: Path, counted: str) -> str:
    return (
        f"{git / 'modules'} holds more than {counted}: the sandbox holds the config and hooks of each read-only, "
        "a mount each, and won't start an attempt with some not held. Give the sandbox a worktree of the "
        "repository to write instead (cwd=wf.worktree(name), write=['.']), which holds none of them"
    )


def module_directories(git: Path) -> list[Path]:
    """The directories under the git directory `git`'s `modules/` that are or could be git
    directories (a submodule's is `modules/<name>`, a name may have slashes, its own submodules'
    in its `modules/`), with or without a `HEAD`, and those between them (`_walk_modules`);
    SandboxRefused past MAX_MODULE_GIT_DIRECTORIES of them, or MAX_MODULE_DIRECTORIES in all."""
    found, problem = _walk_modules(git)
    if problem is not None:
        raise SandboxRefused(problem)
    return found


def linked_worktrees(git: Path) -> list[Path]:
    """The git directory of each linked worktree of the git directory `git` (`worktrees/<name>`,
    not through a symbolic link): its `commondir` and `config.worktree` are read as its own."""
    try:
        with os.scandir(git / "worktrees") as entries:
            return sorted(Path(entry.path) for entry in entries if entry.is_dir(follow_symlinks=False))
    except OSError:
        return []  # no linked worktrees


def _held_worktrees(git_dir: Path, modules: Sequence[Path]) -> set[Path]:
    """The linked worktrees' directories (`worktrees`) of the repository and of the directories
    under its `modules/`, where there is one: the sandbox holds each read-only, whole
    (`runner.git_controls`), so nothing in them changes while an attempt runs."""
    found = set()
    for directory in (git_dir, *modules):
        linked = directory / "worktrees"
        if linked.is_dir() and not linked.is_symlink():
            found.add(linked)
    return found


def _commondir_paths(git_dir: Path, modules: Sequence[Path], held: frozenset[Path] = frozenset()) -> list[Path]:
    """Every `commondir` git could read for the repository: its own, its linked worktrees', and
    those of the directories under its `modules/` (each may be a submodule's git directory) and of
    their linked worktrees; but none in `held` (read-only in the sandbox, whole: a linked
    worktree's, of which there may be thousands, costs nothing)."""
    directories = []
    for directory in (git_dir, *modules):
        directories.append(directory)
        if directory / "worktrees" not in held:
            directories += linked_worktrees(directory)
    return [directory / "commondir" for directory in directories]


def _read_pointer(path: Path) -> bytes | None:
    """The bytes of the file at `path` (None: nothing there), never more than MAX_POINTER_BYTES
    of them (OVERSIZED: more); NOT_A_FILE for anything but a regular file (a FIFO would block)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        return NOT_A_FILE if os.path.lexists(path) else None  # a symbolic link to nothing
    except OSError:
        return NOT_A_FILE
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return NOT_A_FILE
        data = b""
        while len(data) <= MAX_POINTER_BYTES and (chunk := os.read(descriptor, MAX_POINTER_BYTES + 1 - len(data))):
            data += chunk
    except OSError:
        return NOT_A_FILE
    finally:
        os.close(descriptor)
    return OVERSIZED if len(data) > MAX_POINTER_BYTES else data


def _move_aside(path: Path) -> Path:
    """`path` (a directory) renamed to a name beside it that no one could take in advance: made
    first (`mkdir` fails on whatever is there, a symbolic link too, and follows none), then
    replaced by the rename, which replaces nothing but an empty directory."""
    for _ in range(ASIDE_TRIES):
        aside = path.with_name(f"{path.name}.{secrets.token_hex(ASIDE_TOKEN_BYTES)}.moved")
        try:
            os.mkdir(aside, 0o700)
        except FileExistsError:
            continue
        try:
            os.rename(path, aside)
        except OSError:
            os.rmdir(aside)
            raise
        return aside
    raise OSError(errno.EEXIST, f"{ASIDE_TRIES} names to move it aside to were taken")


def _put_back(path: Path, was: bytes | None) -> str:
    """`path` as it was: what is there now moved aside (a directory) or removed, never written
    through (a symlink the agent put there), then `was` written anew, if it was there; what was done."""
    done = "put back as it was"
    if os.path.isdir(path) and not os.path.islink(path):
        aside = _move_aside(path)
        done = f"moved aside to {aside.name}" if was is None else f"put back as it was, the directory moved to {aside.name}"
    elif os.path.lexists(path):
        os.unlink(path)
    if was is not None:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(descriptor, "wb") as file:
            file.write(was)
    return done


def _index_git(git_dir: Path, top: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git `args` on the repository's index, reading none of its config (`agentswf.git.pinned_git`):
    its common directory may be the agent's until put back."""
    return pinned_git(_common_of(git_dir), *args, cwd=top, check=False, worktree=(git_dir, top))


def _common_of(git_dir: Path) -> Path:
    """Where the objects and refs of `git_dir` are: itself, or the directory its `commondir` names
    (a linked worktree's). Only data is taken from there (`pinned_git`), never a command."""
    pointer = _read_pointer(git_dir / "commondir")
    if pointer is None or pointer in (NOT_A_FILE, OVERSIZED) or b"\0" in pointer:
        return git_dir
    common = Path(os.path.realpath(git_dir / os.fsdecode(pointer.strip())))
    return common if (common / "objects").is_dir() else git_dir


def _gitlinks(git_dir: Path, top: Path) -> frozenset[str]:
    try:
        listed = _index_git(git_dir, top, "ls-files", "--stage", "-z")
    except GitFailed:
        return frozenset()
    if listed.returncode != 0:
        return frozenset()
    entries = listed.stdout.split("\0")
    return frozenset(entry.split("\t", 1)[1] for entry in entries if entry.startswith(f"{GITLINK_MODE} ") and "\t" in entry)


def _checkout_links(top: Path, gitlinks: frozenset[str]) -> list[Path]:
    """Each submodule's `.git` in its checkout, where no symbolic link leads out of `top`
    (putting one back must not write where the agent points)."""
    return [top / link / ".git" for link in sorted(gitlinks) if os.path.realpath(top / link) == str(top / link)]


def _submodule_git_dir(link: Path, pointer: bytes | None) -> Path | None:
    """The git directory of the submodule whose checkout's `.git` is `link`, its bytes `pointer`:
    that directory itself, or the one its `gitdir: <path>` names (from the checkout); None if none."""
    if pointer == NOT_A_FILE:
        return Path(os.path.realpath(link)) if os.path.isdir(link) else None
    if pointer is None or pointer == OVERSIZED or not pointer.startswith(b"gitdir:"):
        return None
    named = os.fsdecode(pointer.removeprefix(b"gitdir:").strip())
    found = Path(os.path.realpath(link.parent / named)) if named and "\0" not in named else None
    return found if found is not None and found.is_dir() else None


def read_state(git_dir: Path, top: Path) -> GitState:
    """The repository at `top`, its git directory `git_dir`, and each of its submodules with a
    checkout, theirs too, as `repairs` compares them; SandboxRefused if there are more than
    MAX_SUBMODULES, or one's `modules/` more than it holds (`module_directories`)."""
    pointers: dict[Path, bytes | None] = {}
    gitlinks: dict[Repository, frozenset[str]] = {}
    held: set[Path] = set()
    queue: list[Repository] = [(git_dir, top)]
    while queue:
        git, tree = queue.pop(0)
        if any(git == seen for seen, _ in gitlinks):
            continue
        if len(gitlinks) > MAX_SUBMODULES:
            raise SandboxRefused(
                f"{top} has more than {MAX_SUBMODULES} submodules with a checkout: the sandbox reads and puts back "
                "what in each could run a command in your git status, and won't start an attempt without"
            )
        gitlinks[git, tree] = links = _gitlinks(git, tree)
        modules = module_directories(git)
        held |= _held_worktrees(git, modules)
        for path in _commondir_paths(git, modules, frozenset(held)):
            pointers[path] = _read_pointer(path)
        for link in _checkout_links(tree, links):
            pointers[link] = _read_pointer(link)
            inner = _submodule_git_dir(link, pointers[link])
            if inner is not None:
                queue.append((inner, link.parent))
    return GitState(pointers, gitlinks, frozenset(held))


def sweep(before: GitState) -> list[str]:
    """Undo what `repairs` finds since `before` (the pointers first: the indexes are read after);
    a line for the run's record for each thing undone, or not."""
    done = []
    paths = set(before.pointers)
    for git, _tree in before.gitlinks:
        modules, problem = _walk_modules(git)
        paths.update(_commondir_paths(git, modules, before.held))
        if problem is not None:
            done.append(f"{problem}; the commondir files past them were not checked: don't run git there")
    now = GitState({path: _read_pointer(path) for path in paths}, before.gitlinks)
    for path, was in repairs(before, now).pointers.items():
        try:
            if os.path.realpath(path.parent) != str(path.parent):
                raise OSError(0, "a symbolic link leads elsewhere now")
            what = _put_back(path, was)
        except OSError as error:
            done.append(f"{path} was changed in the sandbox and could not be put back ({error.strerror}): don't run git there")
            continue
        how = f"over {MAX_POINTER_BYTES} bytes, no git's," if before.pointers.get(path) == OVERSIZED else (
            "made" if was is None else "changed")  # fmt: skip
        done.append(f"{path} was {how} in the sandbox: {what}")
    after = GitState(before.pointers, {repository: _gitlinks(*repository) for repository in before.gitlinks}, before.held)
    for (git, tree), links in repairs(before, after).gitlinks.items():
        for link in links:
            done.append(_take_out(git, tree, link))
    return done


def _take_out(git: Path, tree: Path, link: str) -> str:
    """The submodule `link` taken out of the index of the repository (`git`, `tree`); what was done."""
    try:
        removed = _index_git(git, tree, "update-index", "--force-remove", "--", link)
        reason = None if removed.returncode == 0 else removed.stderr.strip()
    except GitFailed as error:
        reason = str(error)
    if reason is None:
        return f"submodule {link!r} was added to {tree}'s index in the sandbox: taken out of the index, left on disk"
    return f"submodule {link!r} was added to {tree}'s index in the sandbox and is still there ({reason}): don't run git there"


@dataclass(slots=True)
class _Held:
    before: GitState
    attempts: int = 0


@dataclass(slots=True)
class Sweeps:
    """The repositories the sandboxed attempts of this process are in, each with its state
    before the first of them began: an attempt that begins while another runs there takes that
    state, never what the other left (`begin`), and the last to end sweeps (`end`). A lock
    orders them: none reads a state while another puts one back."""

    _held: dict[Repository, _Held] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def begin(self, repositories: Sequence[Repository]) -> list[GitState]:
        """One more attempt in each of `repositories`; the state each had before the first.
        If one is refused (`read_state`), the attempt is in none of them."""
        with self._lock:
            new = {repository: read_state(*repository) for repository in repositories if repository not in self._held}
            for repository, state in new.items():
                self._held[repository] = _Held(state)
            for repository in repositories:
                self._held[repository].attempts += 1
            return [self._held[repository].before for repository in repositories]

    def end(self, repositories: Sequence[Repository]) -> list[str]:
        """One attempt fewer in each of `repositories`; each one that none is in now swept: the lines of what was undone."""
        done: list[str] = []
        with self._lock:
            for repository in repositories:
                held = self._held[repository]
                held.attempts -= 1
                if held.attempts == 0:
                    del self._held[repository]
                    try:
                        done += sweep(held.before)
                    except (OSError, GitFailed) as error:
                        done.append(f"{repository[1]} could not be swept ({error}): don't run git there")
        return done


SWEEPS = Sweeps()  # the process's: the attempts of every run in it
