"""A git worktree per agent (`cwd=wf.worktree(name)`): made on a branch of its own beside the
run's record, removed at the run's end when nothing changed, kept when something did, and never
removed while it holds uncommitted changes.

In the run's record (0700, like the rest of it), what the run knows of its worktrees:

    <run dir>/worktrees/
      .live              locked (flock) by the run while it lives: a run killed with -9 lets go
      <name>.json        the worktree's manifest: repository, branch, base, and how it ended

and the worktrees themselves beside the runs' record (`worktree_path`), not in it, so that a
sandbox can be given one to write while no sandbox is given any record:

    <run root>/../worktrees/<run id>/<name>/   on branch awf/<run id>/<name>, locked in git while the run lives

The user's own working tree and index are never touched. Git runs as `git -C <repository>` to
add, lock, unlock and remove worktrees and to read and delete the run's branches, and with an
explicit `--git-dir`/`--work-tree` to read a worktree, never by discovery from a path an agent
could have changed (a worktree whose `.git` an agent deleted would otherwise be read as the
user's repository). The variables that point git at a repository (`GIT_DIR`,
`GIT_INDEX_FILE`, ...) are dropped from its environment. Nothing here runs `checkout`,
`reset`, `stash`, `-B` or `--force`: `git worktree remove` checks again that a worktree is
clean, and a branch is deleted only by `update-ref -d` with its expected commit, the base.

A worktree's files go through git's filters (`filter.<driver>.smudge`, `.clean`, `.process`: commands
its config names for the paths its attributes name), and an agent can write both in the
repository's git directory, so the run's git that checks a worktree out, reads its status or
removes it runs with `pinned_git_dir`: a git common directory of the run's own, whose objects
and refs are the repository's but whose config, attributes and hooks are none. A driver's name
can't be listed in advance to be turned off (an agent can add one at any time), but a config
that isn't read defines none. The user's global and system config and attributes are read as
ever (git-lfs's filter is there, as a rule): the agent's worktree shares the repository, not them.

What happens to a worktree at the end is `decide`, a pure function of what `inspect` saw;
`carry_out` does it. `awf worktrees` (agentswf.cli.worktrees) uses the same three for the
worktrees of a run that was killed.
"""

from __future__ import annotations

import fcntl
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, get_args

import msgspec

from ..engine.record.layout import make_private_dirs, write_private, write_whole
from ..errors import DefinitionError
from ..git import LOCAL_GIT_VARIABLES as LOCAL_GIT_VARIABLES  # what agents.py drops from an agent's git
from ..git import (
    MAX_LINK_BYTES,
    WORKTREES_DIR,
    GitFailed,
    Keep,
    Worktree,
    commit_of,
    git,
    git_message,
    pinned_git,
    read_link,
    same_path,
    worktrees_home,
)
from ..harnesses.regular import read_regular

Ending = Literal["removed", "kept", "branch-kept"]
Place = Literal["here", "deleted", "moved", "replaced", "gone"]
"""Where a worktree is: at its path (`here`); its directory deleted, git's entry left
(`deleted`); moved by `git worktree move` (`moved`); something else at its path (`replaced`);
neither directory nor git's entry (`gone`)."""

LIVE_LOCK_NAME = ".live"
BRANCH_PREFIX = "awf"
MAX_NAME_CHARS = 64
MIN_GIT_VERSION = (2, 17)  # `git worktree remove`
OWNER_FILE = "agentswf"  # in a worktree's entry in git (`.git/worktrees/<id>/`): the run and name that made it
SUBMODULES_KEEP = (
    "nothing changed, but its submodules are checked out, and git won't remove a worktree with submodules: "
    "`git submodule deinit --all` in it, then `awf worktrees --clean`, or remove it yourself"
)
MAX_MANIFEST_BYTES = 1 << 20  # of a worktree's manifest (some paths and a reason: a few KiB): a larger one, an agent's, is none
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class WorktreeEnd:
    """What became of a worktree at its run's end (`RunResult.worktrees`).

    `state` is `"removed"` (nothing changed: the worktree and its branch are gone),
    `"kept"` (both are there, `reason` says why) or `"branch-kept"` (the directory is gone,
    its commits stay on `branch`).
    """

    name: str
    path: Path
    branch: str
    base: str
    state: Ending
    reason: str
    commits: int = 0
    dirty: bool = False

    @property
    def kept(self) -> bool:
        return self.state != "removed"


@dataclass(frozen=True)
class Seen:
    """What `inspect` found of a worktree. `head` and `tip` are commits (None: none, or unread)."""

    place: Place
    dirty: bool | None = None  # None: its status couldn't be read
    head: str | None = None
    tip: str | None = None  # its branch's commit; None when the branch is gone
    commits: int = 0  # on its branch since the base
    elsewhere: Path | None = None  # where it was moved to
    problem: str | None = None  # what git said when it couldn't be read
    submodules: bool = False  # some are checked out in it: `git worktree remove` won't remove it


@dataclass(frozen=True)
class Plan:
    """What to do with a worktree: remove it (its directory and git's entry) and delete its branch."""

    remove: bool
    delete_branch: bool
    state: Ending
    reason: str


class Manifest(msgspec.Struct, frozen=True):
    """`<name>.json`: the worktree, and its end once the run (or `awf worktrees --clean`) dealt with it."""

    worktree: Worktree
    state: Literal["making", "made", "failed", "ended"]
    ended: WorktreeEnd | None = None


def run_worktrees(run_dir: Path) -> Path:
    """Where the worktrees of the run recorded in `run_dir` (`<run root>/<workflow>/<run id>`) are."""
    return worktrees_home(run_dir.parent.parent) / run_dir.name


def worktree_path(run_dir: Path, name: str) -> Path:
    """The worktree `name` of the run recorded in `run_dir`."""
    return run_worktrees(run_dir) / name


def drop_if_empty(directory: Path) -> None:
    """A run's directory of worktrees removed once none is left in it (an empty one says nothing)."""
    try:
        os.rmdir(directory)
    except OSError:
        pass  # a worktree is kept there, or it is gone already


def check_name(name: object) -> str:
    """`name` if it can name a worktree (a directory and the last part of a branch); else DefinitionError."""
    if (
        not isinstance(name, str)
        or len(name) > MAX_NAME_CHARS
        or not _NAME.fullmatch(name)
        or ".." in name
        or name.endswith((".", ".lock"))
    ):
        raise DefinitionError(
            f"{name!r} is not a worktree's name: letters, digits, '.', '_' and '-', starting with a letter "
            f"or digit, no '..', not ending in '.' or '.lock', at most {MAX_NAME_CHARS} characters"
        )
    return name


def decide(keep: Keep, seen: Seen, base: str, *, cleaning: bool = False) -> Plan:
    """What to do with a worktree at its run's end (`cleaning`: for `awf worktrees --clean`,
    where keep="always" no longer holds an unchanged one). Pure.

    Never removes one with uncommitted changes, one whose status couldn't be read, one moved or
    replaced, or one whose HEAD holds commits its branch doesn't; never deletes a branch that
    moved from the base.
    """
    work = f"{seen.commits} commit{'s' if seen.commits != 1 else ''} on its branch" if seen.commits else ""
    if seen.place == "moved":
        return Plan(False, False, "kept", f"it was moved to {seen.elsewhere}; left as it is")
    if seen.place == "replaced":
        return Plan(False, False, "kept", "something else is at its path (its .git is not the worktree's); left as it is")
    if seen.place == "here":
        if seen.dirty is None:
            return Plan(False, False, "kept", f"its status couldn't be read ({seen.problem}); left as it is")
        if seen.dirty:
            return Plan(False, False, "kept", "uncommitted changes" + (f", {work}" if work else ""))
    committed = seen.tip not in (None, base) or (seen.head is not None and seen.head != base)
    if committed:
        head_on_branch = seen.head is not None and seen.head in (base, seen.tip)
        if seen.place == "deleted" or (keep == "never" and seen.place == "here" and not seen.submodules):
            if not head_on_branch:
                return Plan(False, False, "kept", f"its HEAD ({seen.head or 'unread'}) holds commits its branch doesn't")
            why = "its directory was deleted" if seen.place == "deleted" else "keep='never'"
            return Plan(True, False, "branch-kept", f"{why}; {work or 'its commits stay on its branch'}")
        if seen.place == "gone":
            return Plan(False, False, "branch-kept", f"its directory is gone; {work or 'its branch is kept'}")
        return Plan(False, False, "kept", work or "new commits")
    if keep == "always" and not cleaning and seen.place == "here":
        return Plan(False, False, "kept", "keep='always'")
    if seen.place == "here" and seen.head is None:
        return Plan(False, False, "kept", f"its HEAD couldn't be read ({seen.problem}); left as it is")
    if seen.place == "here" and seen.submodules:
        return Plan(False, False, "kept", SUBMODULES_KEEP)
    reason = {"here": "nothing changed", "deleted": "its directory was deleted; nothing was committed"}
    return Plan(seen.place in ("here", "deleted"), seen.tip == base, "removed", reason.get(seen.place, "nothing was left"))


# Git -------------------------------------------------------------------------------------


def check_git() -> None:
    """DefinitionError unless a git new enough for worktrees is on PATH."""
    try:
        said = git("--version").stdout.strip()
    except GitFailed as error:
        raise DefinitionError(f"wf.worktree needs git: {error}") from None
    found = re.match(r"git version (\d+)\.(\d+)", said)
    if found is None:
        raise DefinitionError(f"wf.worktree needs git {'.'.join(map(str, MIN_GIT_VERSION))} or newer; git said {said!r}")
    if (int(found.group(1)), int(found.group(2))) < MIN_GIT_VERSION:
        raise DefinitionError(f"wf.worktree needs git {'.'.join(map(str, MIN_GIT_VERSION))} or newer, not {said!r}")


def owner_mark(worktree: Worktree) -> bytes:
    """What the run writes in its worktree's entry in git (OWNER_FILE): git names an entry after
    the worktree's directory alone, and gives a later run's worktree of the same name the entry a
    removed one had; this says whose it is."""
    return f"{worktree.run_id}/{worktree.name}\n".encode()


def is_owned(worktree: Worktree) -> bool:
    """Whether git's entry at `worktree.git_dir` is this worktree's: its mark says so (or it has
    none, as a worktree of an earlier version has none)."""
    mark = read_regular(worktree.git_dir / OWNER_FILE, MAX_LINK_BYTES + 1, follow=False)
    return mark == owner_mark(worktree) or (mark is None and not os.path.lexists(worktree.git_dir / OWNER_FILE))


def inspect(worktree: Worktree) -> Seen:
    """Where the worktree is and what changed in it, read without discovery from its path. Git's
    entry for it is its own only if it is marked so (`is_owned`): a later run's of the same name,
    at the same place in git, is not it."""
    registered = read_link(worktree.git_dir / "gitdir") if is_owned(worktree) else None  # where its .git file is
    tip = commit_of(worktree.repository, f"refs/heads/{worktree.branch}")
    commits = 0
    if tip is not None and tip != worktree.base:
        counted = git("rev-list", "--count", f"{worktree.base}..{tip}", cwd=worktree.repository, check=False)
        commits = int(counted.stdout.strip()) if counted.returncode == 0 and counted.stdout.strip().isdigit() else 0
    head = None
    if registered is not None:
        said = git(f"--git-dir={worktree.git_dir}", "rev-parse", "--verify", "--quiet", "HEAD", check=False)
        head = (said.stdout.strip() or None) if said.returncode == 0 else None
    here = os.path.lexists(worktree.path)
    if registered is not None and not same_path(registered, worktree.path / ".git"):
        moved = Path(registered).parent
        if not here and moved.exists():
            return Seen("moved", head=head, tip=tip, commits=commits, elsewhere=moved)
        return Seen("replaced" if here else "deleted", head=head, tip=tip, commits=commits)
    if not here:
        return Seen("deleted" if registered is not None else "gone", head=head, tip=tip, commits=commits)
    link = read_link(worktree.path / ".git")
    if worktree.path.is_symlink() or registered is None or link is None or not same_path(link, worktree.git_dir):
        return Seen("replaced", head=head, tip=tip, commits=commits)
    status = pinned_git(
        worktree.common_dir,
        "status",
        "--porcelain=v1",
        "-z",
        "--untracked-files=all",
        "--ignore-submodules=none",
        cwd=worktree.path,
        check=False,
        worktree=(worktree.git_dir, worktree.path),
    )
    if status.returncode != 0:
        return Seen("here", None, head, tip, commits, problem=git_message(status))
    populated = _has_submodules(worktree)
    return Seen("here", bool(status.stdout), head, tip, commits, problem=None if head else "no HEAD", submodules=populated)


def _has_submodules(worktree: Worktree) -> bool:
    """Whether submodules are checked out in the worktree, as `git worktree remove` finds them
    (and then won't remove it): a `modules` in its git directory, or a submodule of its index
    whose directory holds a `.git`."""
    if (worktree.git_dir / "modules").is_dir():
        return True
    listed = pinned_git(
        worktree.common_dir, "ls-files", "--stage", "-z", cwd=worktree.path, check=False, worktree=(worktree.git_dir, worktree.path)
    )  # fmt: skip
    links = [entry.split("\t", 1)[1] for entry in listed.stdout.split("\0") if entry.startswith("160000 ") and "\t" in entry]
    return any(os.path.lexists(worktree.path / link / ".git") for link in links)


def carry_out(worktree: Worktree, seen: Seen, plan: Plan) -> WorktreeEnd:
    """Do `plan`. Unlocks the worktree in git (its run is over) whether it goes or stays."""
    end = WorktreeEnd(
        worktree.name, worktree.path, worktree.branch, worktree.base, plan.state, plan.reason,
        seen.commits, bool(seen.dirty),
    )  # fmt: skip
    if seen.place in ("here", "deleted"):
        git("worktree", "unlock", worktree.path, cwd=worktree.repository, check=False)  # not locked: fine
    if plan.remove:
        removed = pinned_git(worktree.common_dir, "worktree", "remove", worktree.path, cwd=worktree.repository, check=False)
        if removed.returncode != 0:
            return replace(end, state="kept", reason=f"git would not remove it: {git_message(removed)}")
    if plan.delete_branch:
        deleted = git("update-ref", "-d", f"refs/heads/{worktree.branch}", worktree.base, cwd=worktree.repository, check=False)
        if deleted.returncode != 0:
            return replace(end, state="branch-kept", reason=f"its branch was kept: {git_message(deleted)}")
    return end


def end_of(worktree: Worktree, *, cleaning: bool = False) -> WorktreeEnd:
    """Inspect, decide, carry out; any failure keeps everything and says why."""
    try:
        seen = inspect(worktree)
        return carry_out(worktree, seen, decide(worktree.keep, seen, worktree.base, cleaning=cleaning))
    except (GitFailed, OSError) as error:
        reason = f"it couldn't be checked ({error}); left as it is"
        return WorktreeEnd(worktree.name, worktree.path, worktree.branch, worktree.base, "kept", reason)


# The record -----------------------------------------------------------------------------


def _encode_path(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    raise NotImplementedError(type(value))


def _decode_path(kind: type, value: Any) -> Any:
    if kind is Path and isinstance(value, str):
        if "\0" in value:  # no path: a ValueError from every function given it
            raise ValueError("a path with a NUL in it")
        return Path(value)
    raise NotImplementedError(kind)


def write_manifest(directory: Path, manifest: Manifest) -> None:
    write_whole(directory / f"{manifest.worktree.name}.json", msgspec.json.encode(manifest, enc_hook=_encode_path))


def read_manifest(path: Path) -> Manifest | None:
    """The manifest at `path`, or None when it can't be read or doesn't describe the worktree its
    place names (`load_manifest` says why)."""
    loaded = load_manifest(path)
    return loaded if isinstance(loaded, Manifest) else None


def load_manifest(path: Path) -> Manifest | str:
    """The manifest at `path`, or why it is not read: a record an agent wrote over never points
    `--clean` at another path or branch. Read through one descriptor (`read_regular`), never
    through a symbolic link, only a regular file (a FIFO an agent put among them would block its
    reader for good, a link to `/dev/zero` never end) and at most MAX_MANIFEST_BYTES."""
    data = read_regular(path, MAX_MANIFEST_BYTES + 1, follow=False)
    if data is None:
        return "not a regular file (a FIFO, a symbolic link, a device) or unreadable"
    if len(data) > MAX_MANIFEST_BYTES:
        return f"over {MAX_MANIFEST_BYTES} bytes (MAX_MANIFEST_BYTES), which no run writes"
    try:
        manifest = msgspec.json.decode(data, type=Manifest, dec_hook=_decode_path)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        return f"not a manifest ({error})"
    worktree, run_dir = manifest.worktree, path.parent.parent
    expected = (path.stem, run_dir.name, f"{BRANCH_PREFIX}/{run_dir.name}/{path.stem}")
    places = (worktree_path(run_dir, path.stem), path.with_suffix(""))  # beside the record; in it, where earlier versions made them
    if (worktree.name, worktree.run_id, worktree.branch) != expected or not any(same_path(worktree.path, place) for place in places):
        return "it names another worktree, run, branch or path than its own place"
    try:
        check_name(worktree.name)
    except DefinitionError:  # a file an agent named, not one `wf.worktree` made
        return "its name is not a worktree's"
    return manifest


def run_is_live(directory: Path) -> bool:
    """Whether the run whose worktrees are in `directory` still holds its lock (it lives)."""
    try:
        fd = os.open(directory / LIVE_LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def hold_lock(directory: Path) -> int | None:
    """The run's lock on `directory` (an fd to close to let go), or None if another holds it."""
    make_private_dirs(directory)
    fd = os.open(directory / LIVE_LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


# A run's worktrees ----------------------------------------------------------------------


class RunWorktrees:
    """The worktrees of one run: `make` (wf.worktree) while it runs, `finish` at its end.

    Both are plain functions, safe from the loop's thread and from a sync tool handler's.
    """

    def __init__(self, *, run_id: str, run_dir: Path, cwd: Path) -> None:
        self._run_id = run_id
        self._run_dir = run_dir
        self._directory = run_dir / WORKTREES_DIR
        self._cwd = cwd
        self._made: dict[str, Worktree] = {}
        self.reused: set[str] = set()  # the names of those an earlier attempt of the run kept, gone on in
        self._tried: list[Worktree] = []  # every one git was asked to add, made or not
        self._lock = threading.Lock()
        self._live: int | None = None
        self._ended = False
        self.made: Mapping[str, Worktree] = MappingProxyType(self._made)

    def make(self, name: str, *, base: str = "HEAD", keep: Keep = "on-change") -> Worktree:
        check_name(name)
        if keep not in get_args(Keep):
            raise DefinitionError(f"worktree {name}: keep is one of {', '.join(get_args(Keep))}, not {keep!r}")
        if not isinstance(base, str) or not base.strip() or base.startswith("-"):
            raise DefinitionError(f"worktree {name}: base must name a commit (a branch, a tag, a sha), not {base!r}")
        with self._lock:
            if self._ended:
                raise DefinitionError(f"worktree {name}: the run has ended")
            existing = self._made.get(name)
            if existing is not None:
                if (existing.given_base, existing.keep) != (base, keep):
                    raise DefinitionError(f"worktree {name} was made with base={existing.given_base!r}, keep={existing.keep!r}")
                return existing
            if any(tried.name == name for tried in self._tried):
                raise DefinitionError(f"worktree {name} failed to be made earlier in this run; use another name")
            try:
                return self._add(name, base, keep)
            except GitFailed as error:  # git couldn't run, or took too long
                raise DefinitionError(f"worktree {name}: {error}") from None

    def _add(self, name: str, base: str, keep: Keep) -> Worktree:
        if not self._tried:
            check_git()
        repository, common = self._repository()
        sha = commit_of(repository, base)
        if sha is None:
            if commit_of(repository, "HEAD") is None:
                raise DefinitionError(f"worktree {name}: the repository {repository} has no commits yet; commit first")
            raise DefinitionError(f"worktree {name}: base {base!r} is not a commit of the repository {repository}")
        branch = f"{BRANCH_PREFIX}/{self._run_id}/{name}"
        if git("check-ref-format", f"refs/heads/{branch}", check=False).returncode != 0:
            raise DefinitionError(f"worktree {name}: {branch} can't be a branch's name")
        path = worktree_path(self._run_dir, name)
        earlier = self._kept_earlier(name, base, branch, path)
        if earlier is None and git(
            "show-ref", "--verify", "--quiet", f"refs/heads/{branch}", cwd=repository, check=False
        ).returncode == 0:
            raise DefinitionError(f"worktree {name}: the branch {branch} exists already; it is left as it is")
        if self._live is None:
            self._live = hold_lock(self._directory)
            if self._live is None:
                raise DefinitionError(f"worktree {name}: another process holds {self._directory / LIVE_LOCK_NAME}")
        if earlier is not None:  # a continued run: the agent goes on in the worktree an earlier attempt kept
            worktree = replace(earlier, keep=keep)
            self._tried.append(worktree)
            reason = f"agentswf run {self._run_id}: worktree {name} (awf worktrees lists it)"
            git("worktree", "lock", "--reason", reason, path, cwd=worktree.repository, check=False)
            write_manifest(self._directory, Manifest(worktree, "made"))
            self._made[name] = worktree
            self.reused.add(name)
            return worktree
        worktree = Worktree(name, path, branch, sha, keep, repository, common / "worktrees" / name, common, base, self._run_id)
        write_manifest(self._directory, Manifest(worktree, "making"))
        make_private_dirs(path.parent)
        ignore = worktrees_home(self._run_dir.parent.parent) / ".gitignore"
        if not ignore.exists():
            write_private(ignore, b"*\n")  # as the run root's: the worktrees stay out of the repository's status
        self._tried.append(worktree)
        # Checked out by the run's own git, through no filter the repository's config defines
        added = git("worktree", "add", "--quiet", "--no-checkout", "-b", branch, path, sha, cwd=repository, check=False)
        git_dir = read_link(path / ".git")
        if git_dir is not None:  # git names its entry after the directory, with a number if that is taken
            worktree = replace(worktree, git_dir=Path(git_dir) if Path(git_dir).is_absolute() else path / git_dir)
            self._tried[-1] = worktree
            if added.returncode == 0:
                write_private(worktree.git_dir / OWNER_FILE, owner_mark(worktree))  # whose entry this is (`is_owned`)
        if added.returncode == 0:
            added = pinned_git(
                common, "read-tree", "--reset", "-u", sha, cwd=path, check=False, worktree=(worktree.git_dir, path)
            )
        if added.returncode != 0:
            write_manifest(self._directory, Manifest(worktree, "failed"))
            raise DefinitionError(f"worktree {name}: git worktree add failed: {git_message(added)}")
        reason = f"agentswf run {self._run_id}: worktree {name} (awf worktrees lists it)"
        git("worktree", "lock", "--reason", reason, path, cwd=repository, check=False)  # a live run's: no prune, no remove
        write_manifest(self._directory, Manifest(worktree, "made"))
        self._made[name] = worktree
        return worktree

    def _kept_earlier(self, name: str, base: str, branch: str, path: Path) -> Worktree | None:
        """The worktree an earlier attempt of this run kept under `name`, still where it was left
        and given the same base; None when there is none (a new run, or it was removed)."""
        manifest = read_manifest(self._directory / f"{name}.json")
        if manifest is None or manifest.ended is None or manifest.ended.state != "kept":
            return None
        earlier = manifest.worktree
        places = (path, self._directory / name)  # beside the record; in it, where earlier versions made it
        if (earlier.run_id, earlier.branch, earlier.given_base) != (self._run_id, branch, base) or not any(
            same_path(earlier.path, place) for place in places
        ):
            raise DefinitionError(
                f"worktree {name}: an earlier attempt of this run kept it with base={earlier.given_base!r}; "
                "give the same base to go on in it"
            )
        seen = inspect(earlier)
        if seen.place != "here":
            raise DefinitionError(f"worktree {name}: the one an earlier attempt kept is {seen.place}; it is left as it is")
        return earlier

    def _repository(self) -> tuple[Path, Path]:
        """The top of the working tree of the run's directory, and its repository's git directory."""
        try:
            said = git("rev-parse", "--show-toplevel", "--git-common-dir", cwd=self._cwd).stdout.splitlines()
        except GitFailed as error:
            raise DefinitionError(
                f"wf.worktree needs the run's directory {self._cwd} to be in a git working tree: {error}"
            ) from None
        if len(said) != 2:  # a newline in a path
            raise DefinitionError(f"wf.worktree can't read where the repository of {self._cwd} is: {said!r}")
        top, common = said  # the common directory relative to where git ran, unless absolute
        return Path(top), (self._cwd / common).resolve()

    def containing(self, path: Path) -> Worktree | None:
        """The worktree this run made that `path` (a real path: an agent's cwd) is in, or None."""
        with self._lock:
            for worktree in self._made.values():
                top = Path(os.path.realpath(worktree.path))
                if top == path or top in path.parents:
                    return worktree
        return None

    def finish(self) -> list[WorktreeEnd]:
        """Deal with every worktree the run tried to make (its agents are stopped), and let go of the run's lock."""
        with self._lock:
            self._ended = True
            ends = []
            for worktree in self._tried:
                end = end_of(worktree)
                try:
                    write_manifest(self._directory, Manifest(worktree, "ended", end))
                except OSError:
                    pass  # the worktree's fate is in git and in the run's log; the manifest is a convenience
                if worktree.name in self._made or end.kept:  # a failed one that left nothing: its error said it
                    ends.append(end)
            if self._tried:
                drop_if_empty(run_worktrees(self._run_dir))
            if self._live is not None:
                os.close(self._live)
                self._live = None
            return ends
