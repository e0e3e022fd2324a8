"""A sandboxed agent's own git directory on a worktree of its run (`cwd=wf.worktree(name)`).

The agent runs every git command of its work in its worktree (status, diff, add, commit, log,
rebase onto a branch of the repository) without the sandbox ever giving it the repository's git
directory, where your index, stash, branches, hooks and config are. For each attempt the run
makes it a git directory of its own, in the agent's directory (removed with the run, `kill -9`
included):

    <agent dir>/git/        written inside where the sandbox may write the agent's cwd, else read-only
      HEAD                  ref: refs/heads/awf/<run id>/<name>
      config                the repository's format, and the name and email its git commits with
      index                 the worktree's index, copied
      packed-refs           the repository's refs as they were when the attempt began
      objects/              where its objects go; info/alternates names the repository's, read-only inside
    <agent dir>/git.link    `gitdir: <agent dir>/git`, bound read-only over the worktree's `.git`

At the attempt's end, every process of it gone, the run carries back what the agent did, with
its own git on that directory and none of the agent's choosing: it first puts back the
directory's HEAD, config and alternates and removes what would make git read elsewhere
(`commondir`, grafts, a shallow list; replace refs are not read), and anything in its objects
that is neither a regular file nor a directory (a symbolic link to a repository of yours). Then:

1. The commit the agent's branch names, and a tree of its index (`write-tree`), are packed with
   the objects they reach that the repository lacks (`pack-objects --local`, stopping at what
   the repository's refs named when the attempt began).
2. The pack goes into the repository through `index-pack --strict`: every object is checked (a
   malformed tree, a path named `.git`), and so is every object they name.
3. The worktree's branch is moved to that commit, only from where it was when the attempt
   began (`update-ref` with the old value); a branch moved meanwhile is left, and said so.
4. The worktree's index is made from the tree (`read-tree`), so every byte of it is git's; a
   submodule added to it is then taken out again (`gitsweep`).

Nothing else reaches the repository: other branches, tags, a stash and a rebase stopped half-way
stay behind (their objects may be carried too, unreferenced).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import SandboxRefused
from ..workflow.worktrees import (
    GIT_TIMEOUT_SECONDS,
    NO_COMMANDS,
    GitFailed,
    Worktree,
    commit_of,
    format_config,
    git,
    git_environment,
    git_message,
    pinned_git,
    read_link,
    same_path,
)
from .bwrap import GitBoxPaths
from .homes import IDENTITY, identity_config

BOX_NAME = "git"  # in the agent's directory: its git directory
LINK_NAME = "git.link"  # in the agent's directory: the `.git` file naming it
PACK_NAME = "carried.pack"  # in the agent's directory: what is carried back, for a moment
PACK_HEADER_BYTES = 12  # a pack's "PACK", its version and its number of objects
MAX_ALTERNATES_BYTES = 64 * 1024  # of the repository's objects/info/alternates: the stores it borrows objects from
OBJECT_NAME = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
ON_THE_BOX = {"GIT_NO_REPLACE_OBJECTS": "1"}  # refs/replace in the agent's directory would choose what an object reads as
ELSEWHERE = ("commondir", "config.worktree", "info", "shallow", "objects/info")  # what makes git read another place


@dataclass(frozen=True)
class GitBox:
    """One attempt's git directory for an agent on a worktree of its run.

    Attributes:
        worktree: the worktree the agent works in.
        directory: its git directory.
        link: the `.git` file naming it, bound over the worktree's inside the sandbox.
        tip: the commit of the worktree's branch when the attempt began.
        known: every commit the repository's refs named then (what is never carried back).
        writable: whether the agent may write it (and what it did is carried back).
    """

    worktree: Worktree
    directory: Path
    link: Path
    tip: str
    known: tuple[str, ...]
    writable: bool

    def paths(self) -> GitBoxPaths:
        tree = Path(os.path.realpath(self.worktree.path))
        stores = object_stores(Path(os.path.realpath(self.worktree.common_dir)))
        return GitBoxPaths(self.directory, self.link, tree / ".git", tree, stores, self.writable)


def object_stores(common: Path) -> tuple[Path, ...]:
    """The repository's objects directory, and each store its `info/alternates` borrows from:
    what the agent's git reads objects from."""
    objects = common / "objects"
    stores = [objects]
    try:
        with open(objects / "info" / "alternates", "rb") as listed:
            lines = listed.read(MAX_ALTERNATES_BYTES).decode(errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:
        if line and not line.startswith("#"):
            store = Path(os.path.realpath(objects / line))  # relative to the objects directory, unless absolute
            if store.is_dir() and store not in stores:
                stores.append(store)
    return tuple(stores)


def config_text(common: Path, identity: Mapping[str, str]) -> str:
    """The agent's git directory's config: the repository's format, not bare, and `identity`."""
    return format_config(common) + "[core]\n\tbare = false\n\tlogallrefupdates = true\n" + identity_config(identity)


def identity(worktree: Worktree) -> dict[str, str]:
    """The name and email the repository's git would commit with in `worktree` (its config, yours)."""
    found = {}
    for key in IDENTITY:
        said = git(f"--git-dir={worktree.git_dir}", "config", "--get", key, check=False)
        value = said.stdout.removesuffix("\n")
        if said.returncode == 0 and value and "\0" not in value:
            found[key] = value
    return found


def open_box(worktree: Worktree, agent_dir: Path, *, writable: bool) -> GitBox:
    """The attempt's git directory for an agent on `worktree`, made in `agent_dir`; SandboxRefused
    where the worktree is no longer the one the run made (its `.git` file names another git
    directory, its branch is gone): nothing would be bound over a `.git` that isn't its file."""
    named = read_link(worktree.path / ".git")
    if worktree.path.is_symlink() or named is None or not same_path(named, worktree.git_dir):
        raise SandboxRefused(
            f"worktree {worktree.name}: {worktree.path / '.git'} is not the .git file the run made (naming "
            f"{worktree.git_dir}); the sandbox won't start an agent's git there"
        )
    tip = commit_of(worktree.repository, f"refs/heads/{worktree.branch}")
    if tip is None:
        raise SandboxRefused(f"worktree {worktree.name}: its branch {worktree.branch} is gone from {worktree.repository}")
    refs = git("for-each-ref", "--format=%(objectname) %(refname)", cwd=worktree.repository).stdout
    directory = agent_dir / BOX_NAME
    remove(directory)
    for sub in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
        (directory / sub).mkdir(parents=True, mode=0o700)
    common = Path(os.path.realpath(worktree.common_dir))
    (directory / "HEAD").write_text(f"ref: refs/heads/{worktree.branch}\n")
    (directory / "packed-refs").write_text(refs)
    (directory / "objects" / "info" / "alternates").write_text(f"{common / 'objects'}\n")
    (directory / "config").write_text(config_text(common, identity(worktree)))
    if (worktree.git_dir / "index").is_file():
        shutil.copyfile(worktree.git_dir / "index", directory / "index")
    link = agent_dir / LINK_NAME
    remove(link)
    link.write_text(f"gitdir: {directory}\n")
    known = {line.split(" ", 1)[0] for line in refs.splitlines()} | {tip}
    return GitBox(worktree, directory, link, tip, tuple(sorted(known)), writable)


def carry_back(box: GitBox) -> list[str]:
    """What the agent committed on its branch, and its index, carried into the repository (once
    every process of its attempt is gone), and its git directory removed: a line for the run's
    record for each thing done or not done."""
    pack = box.directory.parent / PACK_NAME
    try:
        return _carry(box, pack) if box.writable else []
    except (GitFailed, OSError) as error:
        return [f"worktree {box.worktree.name}: what the agent did in git was not carried back ({error})"]
    finally:
        for path in (box.directory, box.link, pack):
            remove(path)


def _carry(box: GitBox, pack: Path) -> list[str]:
    worktree = box.worktree
    name, branch, repository = worktree.name, worktree.branch, worktree.repository
    common = Path(os.path.realpath(worktree.common_dir))
    disarm(box.directory, common, branch)
    on_box = {"GIT_DIR": str(box.directory), **ON_THE_BOX}
    said = git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}", cwd=box.directory, check=False, env=on_box)
    tip = said.stdout.strip() if said.returncode == 0 and OBJECT_NAME.fullmatch(said.stdout.strip()) else None
    tree, why = None, "its index is not a file"
    index = box.directory / "index"
    if stat.S_ISREG(os.lstat(index).st_mode if os.path.lexists(index) else 0):
        written = git("write-tree", cwd=box.directory, check=False, env={**on_box, "GIT_INDEX_FILE": str(index)})
        tree = written.stdout.strip() if written.returncode == 0 and OBJECT_NAME.fullmatch(written.stdout.strip()) else None
        why = f"git write-tree: {git_message(written)}"
    lines = []
    wants = [sha for sha in (tip if tip != box.tip else None, tree) if sha is not None]
    if wants and _pack(box.directory, wants, box.known, pack):
        with open(pack, "rb") as objects:
            pinned_git(
                common, "index-pack", "--stdin", "--strict", cwd=repository, worktree=(worktree.git_dir, worktree.path),
                stdin=objects,
            )  # fmt: skip
    if tip is None:
        lines.append(f"worktree {name}: {branch} names no commit in the agent's git directory; the branch is left where it was")
    elif tip != box.tip:
        moved = git("update-ref", "-m", "agentswf: carried back from a sandbox", f"refs/heads/{branch}", tip, box.tip,
                    cwd=repository, check=False)  # fmt: skip
        if moved.returncode != 0:
            lines.append(f"worktree {name}: {branch} moved meanwhile, so the agent's {tip} was not put on it ({git_message(moved)})")
        else:
            counted = git("rev-list", "--count", f"{box.tip}..{tip}", cwd=repository, check=False).stdout.strip()
            lines.append(f"worktree {name}: {counted or 'its'} commit(s) carried back onto {branch} ({tip[:12]})")
    if tree is None:
        lines.append(f"worktree {name}: the agent's index was not carried back ({why}); the worktree's is as it was")
    else:
        place = (worktree.git_dir, worktree.path)
        pinned_git(common, "read-tree", tree, cwd=worktree.path, worktree=place)
        pinned_git(common, "update-index", "-q", "--refresh", cwd=worktree.path, worktree=place, check=False)
    return lines


def _pack(directory: Path, wants: list[str], known: tuple[str, ...], pack: Path) -> bool:
    """`wants` and what they reach in the agent's git directory but not in the repository, packed
    into `pack`; whether it holds any object. GitFailed if git can't (an object missing)."""
    executable = shutil.which("git")
    if executable is None:
        raise GitFailed("git is not installed (no git on PATH)")
    revisions = "".join(f"{sha}\n" for sha in wants) + "".join(f"^{sha}\n" for sha in known)
    environment = {**git_environment(), "GIT_DIR": str(directory), **ON_THE_BOX}
    with open(pack, "wb") as out:
        try:
            done = subprocess.run(
                [executable, *NO_COMMANDS, "pack-objects", "--revs", "--local", "--stdout", "-q"],
                input=revisions.encode(), stdout=out, stderr=subprocess.PIPE, env=environment, cwd=directory,
                timeout=GIT_TIMEOUT_SECONDS, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise GitFailed(f"git pack-objects took over {GIT_TIMEOUT_SECONDS:g}s") from None
    if done.returncode != 0:
        raise GitFailed(f"git pack-objects: {' '.join(done.stderr.decode(errors='replace').split())[:400]}")
    with open(pack, "rb") as written:
        header = written.read(PACK_HEADER_BYTES)
    return len(header) == PACK_HEADER_BYTES and int.from_bytes(header[8:12], "big") > 0


def disarm(directory: Path, common: Path, branch: str) -> None:
    """The agent's git directory made the run's to read: its HEAD and config the run's, nothing that
    makes git read elsewhere (`ELSEWHERE`), its alternates the repository's objects only, and in its
    objects nothing but regular files and directories. OSError if its objects aren't a directory."""
    for name in ELSEWHERE:
        remove(directory / name)
    for name, text in (("HEAD", f"ref: refs/heads/{branch}\n"), ("config", config_text(common, {}))):
        remove(directory / name)
        (directory / name).write_text(text)
    objects = directory / "objects"
    if not stat.S_ISDIR(os.lstat(objects).st_mode):
        raise OSError(f"{objects} is not a directory")
    for root, directories, files in os.walk(objects):  # never through a symbolic link
        for entry in (*directories, *files):
            path = Path(root, entry)
            mode = os.lstat(path).st_mode
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                os.unlink(path)
    (objects / "info").mkdir()
    (objects / "info" / "alternates").write_text(f"{common / 'objects'}\n")


def remove(path: Path) -> None:
    """Whatever is at `path` removed, never through a symbolic link; nothing there is fine."""
    if os.path.islink(path) or os.path.isfile(path) or (os.path.lexists(path) and not os.path.isdir(path)):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)
