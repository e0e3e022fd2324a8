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

1. The objects the agent wrote (its commits', and a tree of its index: `write-tree`) are
   packed by their names in its objects directory (`pack-objects --local`: none the repository
   has), so that this costs what the agent wrote, not the repository's refs or history.
2. The pack goes into the repository through `index-pack --strict`: every object is checked (a
   malformed tree, a path named `.git`), and that every object they name is there or in it.
3. The worktree's branch is moved to the commit the agent's branch names, only from where it was
   when the attempt began (`update-ref` with the old value); a branch moved meanwhile is left,
   and said so.
4. The worktree's index is made from the tree (`read-tree`), so every byte of it is git's; a
   submodule added to it is then taken out again (`gitsweep`).

Nothing else reaches the repository: other branches, tags, a stash and a rebase stopped half-way
stay behind (their objects are carried too, unreferenced: `git gc` prunes them in time).
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
from ..git import (
    GIT_MESSAGE_CHARS,
    GIT_TIMEOUT_SECONDS,
    NO_COMMANDS,
    GitFailed,
    Worktree,
    commit_of,
    format_config,
    git,
    git_environment,
    git_message,
    pinned_git_dir,
    read_link,
    same_path,
)
from .bwrap import GitBoxPaths
from .homes import IDENTITY, identity_config

BOX_NAME = "git"  # in the agent's directory: its git directory
LINK_NAME = "git.link"  # in the agent's directory: the `.git` file naming it
PACK_NAME = "carried.pack"  # in the agent's directory: what is carried back, for a moment
PACK_HEADER_BYTES = 12  # a pack's "PACK", its version and its number of objects
IDX_V2_HEADER = b"\xfftOc\x00\x00\x00\x02"  # a version 2 pack index's magic and version
IDX_FANOUT_END = 8 + 256 * 4  # its header, then how many names start with each byte (cumulative)
IDX_TRAILER_PER_OBJECT = 8  # after the names: a CRC32 and an offset of 4 bytes each per object
MAX_INDEX_BYTES = 1 << 30  # of one pack index read: some 35 million objects' names
MAX_ALTERNATES_BYTES = 64 * 1024  # of the repository's objects/info/alternates: the stores it borrows objects from
HASH_BYTES = (32, 20)  # sha256's, sha1's: in this order, as a sha256 index never reads as a sha1 one
OBJECT_NAME = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
LOOSE_DIRECTORY = re.compile(r"[0-9a-f]{2}")  # `objects/<xx>`: loose objects, each named by the rest of its name
LOOSE_REST = re.compile(r"[0-9a-f]{38}|[0-9a-f]{62}")
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
        writable: whether the agent may write it (and what it did is carried back).
    """

    worktree: Worktree
    directory: Path
    link: Path
    tip: str
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


def open_box(worktree: Worktree, agent_dir: Path, identity: Mapping[str, str], *, writable: bool) -> GitBox:
    """The attempt's git directory for an agent on `worktree`, made in `agent_dir`, committing as
    `identity`; SandboxRefused where the worktree is no longer the one the run made (its `.git`
    file names another git directory, its branch is gone): nothing would be bound over a `.git`
    that isn't its file. The repository's refs are copied as they are (its `packed-refs` file
    and its loose refs), in time that grows with the loose ones only."""
    named = read_link(worktree.path / ".git")
    if worktree.path.is_symlink() or named is None or not same_path(named, worktree.git_dir):
        raise SandboxRefused(
            f"worktree {worktree.name}: {worktree.path / '.git'} is not the .git file the run made (naming "
            f"{worktree.git_dir}); the sandbox won't start an agent's git there"
        )
    tip = commit_of(worktree.repository, f"refs/heads/{worktree.branch}")
    if tip is None:
        raise SandboxRefused(f"worktree {worktree.name}: its branch {worktree.branch} is gone from {worktree.repository}")
    directory = agent_dir / BOX_NAME
    remove(directory)
    common = Path(os.path.realpath(worktree.common_dir))
    shutil.copytree(common / "refs", directory / "refs", symlinks=True)
    for sub in ("objects/info", "objects/pack", "refs/heads", "refs/tags"):
        (directory / sub).mkdir(parents=True, mode=0o700, exist_ok=True)
    if (common / "packed-refs").is_file():
        shutil.copyfile(common / "packed-refs", directory / "packed-refs")
    (directory / "HEAD").write_text(f"ref: refs/heads/{worktree.branch}\n")
    (directory / "objects" / "info" / "alternates").write_text(f"{common / 'objects'}\n")
    (directory / "config").write_text(config_text(common, identity))
    if (worktree.git_dir / "index").is_file():
        shutil.copyfile(worktree.git_dir / "index", directory / "index")
    link = agent_dir / LINK_NAME
    remove(link)
    link.write_text(f"gitdir: {directory}\n")
    return GitBox(worktree, directory, link, tip, writable)


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
    tree, why = None, ""  # a tree of its index to carry back, or why it isn't carried back ("": nothing to)
    index = box.directory / "index"
    if not stat.S_ISREG(os.lstat(index).st_mode if os.path.lexists(index) else 0):
        why = "its index is not a file"
    elif not _same_bytes(index, worktree.git_dir / "index"):  # the same bytes: git never wrote it, nothing to carry
        written = git("write-tree", cwd=box.directory, check=False, env={**on_box, "GIT_INDEX_FILE": str(index)})
        tree = written.stdout.strip() if written.returncode == 0 and OBJECT_NAME.fullmatch(written.stdout.strip()) else None
        why = "" if tree is not None else f"git write-tree: {git_message(written)}"
    lines = []
    with pinned_git_dir(common) as pinned:  # the repository's objects and refs, none of its config
        on_worktree = {"GIT_COMMON_DIR": str(pinned), "GIT_DIR": str(worktree.git_dir), "GIT_WORK_TREE": str(worktree.path)}
        if _pack(box.directory, written_objects(box.directory / "objects"), pack):
            with open(pack, "rb") as objects:
                git("index-pack", "--stdin", "--strict", cwd=repository, env=on_worktree, stdin=objects)
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
        if why:
            lines.append(f"worktree {name}: the agent's index was not carried back ({why}); the worktree's is as it was")
        if tree is not None:
            git("read-tree", tree, cwd=worktree.path, env=on_worktree)
            git("update-index", "-q", "--refresh", cwd=worktree.path, env=on_worktree, check=False)
    return lines


def _same_bytes(mine: Path, theirs: Path) -> bool:
    """Whether the regular files `mine` and `theirs` hold the same bytes (a symbolic link: no)."""
    try:
        if not (stat.S_ISREG(os.lstat(mine).st_mode) and stat.S_ISREG(os.lstat(theirs).st_mode)):
            return False
        if os.path.getsize(mine) != os.path.getsize(theirs):
            return False
        return mine.read_bytes() == theirs.read_bytes()
    except OSError:
        return False


def written_objects(objects: Path) -> list[str]:
    """The names of the objects in the objects directory `objects`: loose (`xx/yyyy…`), and in
    its packs, as their indexes list them (`pack_names`). Never through a symbolic link (`disarm`
    removed them)."""
    names = []
    with os.scandir(objects) as entries:
        for entry in entries:
            if LOOSE_DIRECTORY.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False):
                with os.scandir(entry.path) as loose:
                    names += [entry.name + rest.name for rest in loose if LOOSE_REST.fullmatch(rest.name)]
    packs = objects / "pack"
    for index in sorted(packs.glob("*.idx")) if packs.is_dir() else ():
        with open(index, "rb") as listed:
            names += pack_names(listed.read(MAX_INDEX_BYTES))
    return names


def pack_names(data: bytes) -> list[str]:
    """The object names a version 2 pack index lists (after its fan-out table: the names, then a
    CRC32 and an offset each, large offsets, and the pack's and its own hash); none from one that
    isn't one. Pure."""
    if len(data) < IDX_FANOUT_END or data[:8] != IDX_V2_HEADER:
        return []
    count = int.from_bytes(data[IDX_FANOUT_END - 4 : IDX_FANOUT_END], "big")
    rest = len(data) - IDX_FANOUT_END
    for size in HASH_BYTES:
        large = rest - count * (size + IDX_TRAILER_PER_OBJECT) - 2 * size  # 8 bytes per offset past 2 GiB
        if 0 <= large <= 8 * count and large % 8 == 0:
            return [data[IDX_FANOUT_END + i * size : IDX_FANOUT_END + (i + 1) * size].hex() for i in range(count)]
    return []


def _pack(directory: Path, names: list[str], pack: Path) -> bool:
    """The objects `names` of the agent's git directory that the repository lacks, packed into
    `pack`; whether it holds any. GitFailed if git can't (one isn't there, or isn't an object)."""
    if not names:
        return False
    executable = shutil.which("git")
    if executable is None:
        raise GitFailed("git is not installed (no git on PATH)")
    environment = {**git_environment(), "GIT_DIR": str(directory), **ON_THE_BOX}
    with open(pack, "wb") as out:
        try:
            done = subprocess.run(
                [executable, *NO_COMMANDS, "pack-objects", "--local", "--stdout", "-q"],
                input="".join(f"{name}\n" for name in names).encode(), stdout=out, stderr=subprocess.PIPE,
                env=environment, cwd=directory, timeout=GIT_TIMEOUT_SECONDS, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise GitFailed(f"git pack-objects took over {GIT_TIMEOUT_SECONDS:g}s") from None
    if done.returncode != 0:
        raise GitFailed(f"git pack-objects: {' '.join(done.stderr.decode(errors='replace').split())[:GIT_MESSAGE_CHARS]}")
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
