"""Attacks from a sandboxed agent that may write a git repository (review 3): `.git/config` and
`.git/hooks` are held read-only, but what git reads instead of them must be held too, or your
next `git status` in the repository runs the agent's command outside the sandbox."""

from __future__ import annotations

import secrets
import shutil
import subprocess
from pathlib import Path

import pytest

import agentswf
from agentswf import workflow

from ..sandbox.kit import ANSWER, agent, needs_bwrap

pytestmark = [
    pytest.mark.anyio,
    needs_bwrap,
    pytest.mark.skipif(shutil.which("git") is None, reason="git isn't installed"),
]

GIT = "git -c user.name=a -c user.email=a@b"

# Each makes a config of its own whose core.fsmonitor is `touch $OWNED`, then gets git to read it.
RENAME_GIT_AWAY = """\
    mv .git .git-was 2>/dev/null && say "moved .git" || say ".git stays"
    if [ ! -e .git ]; then
        cp -r .git-was .git && rm -f .git/config && cp .git-was/config .git/config
        git config core.fsmonitor "touch $OWNED; false" && say "CONFIG SET"
    fi
"""
RENAME_ITS_PARENT = """\
    cd .. && mv repo repo-was 2>/dev/null && say "moved the repository" || say "the repository stays"
    if [ ! -e repo ]; then
        cp -r repo-was repo && rm -f repo/.git/config && cp repo-was/.git/config repo/.git/config
        git -C repo config core.fsmonitor "touch $OWNED; false" && say "CONFIG SET"
    fi
"""
POINT_COMMONDIR_AWAY = """\
    cp -r .git "$PWD/.stash" && git config -f .stash/config core.fsmonitor "touch $OWNED; false"
    echo "$PWD/.stash" >.git/commondir 2>/dev/null && say "COMMONDIR SET" || say "commondir: read-only"
"""
A_SUBMODULE_OF_ITS_OWN = f"""\
    git init -q sub && {GIT} -C sub commit -q --allow-empty -m sub && git -C sub config core.fsmonitor "touch $OWNED; false"
    {GIT} add sub >/dev/null 2>&1 && say "SUBMODULE ADDED" || say "no submodule"
"""


async def _attack(tmp_path: Path, body: str, *, cwd: str, write: str) -> tuple[agentswf.RunResult, Path]:
    repo = tmp_path / "ws" / "repo"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*GIT.split(), "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "start"], check=True)
    result, owned = await _sandboxed(tmp_path, repo, body, cwd=cwd, write=write)
    subprocess.run(["git", "-C", str(repo), "status"], capture_output=True, timeout=30, check=False)  # yours, outside
    return result, owned


async def _sandboxed(
    tmp_path: Path, repo: Path, body: str, *, cwd: str = "ws/repo", write: str = "."
) -> tuple[agentswf.RunResult, Path]:
    """A completed run of one sandboxed agent in `repo` running `body`; and the file it makes if it gets out."""
    owned = tmp_path / "OWNED"
    token = secrets.token_hex(4)

    async def fn(wf):
        box = await wf.sandboxes.open("box", cwd=cwd, write=[write])
        a = await wf.agents.open("a", runtime=agent(repo, "a", body + ANSWER, token, OWNED=str(owned)), sandbox=box)
        return (await a.run("Work.", timeout=20)).value

    definition = workflow(name="sbx", description="A sandboxed writer.")(fn)
    result = await agentswf.run(definition, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    return result, owned


async def test_a_writer_cant_move_the_repositorys_git_directory_away_and_make_its_own(tmp_path: Path) -> None:
    result, owned = await _attack(tmp_path, RENAME_GIT_AWAY, cwd="ws/repo", write=".")
    assert result.value.split("\n") == [".git stays"] and not owned.exists(), result.value


async def test_a_writer_cant_move_the_repository_away_from_inside_a_path_it_writes(tmp_path: Path) -> None:
    result, owned = await _attack(tmp_path, RENAME_ITS_PARENT, cwd="ws/repo", write="..")
    assert result.value.split("\n") == ["the repository stays"] and not owned.exists(), result.value


async def test_a_writer_cant_point_git_at_a_common_directory_of_its_own(tmp_path: Path) -> None:
    result, owned = await _attack(tmp_path, POINT_COMMONDIR_AWAY, cwd="ws/repo", write=".")
    assert not owned.exists(), result.value


async def test_a_writer_cant_add_a_submodule_whose_config_your_git_status_runs(tmp_path: Path) -> None:
    result, owned = await _attack(tmp_path, A_SUBMODULE_OF_ITS_OWN, cwd="ws/repo", write=".")
    assert not owned.exists(), result.value


# A worktree of yours (or a submodule's checkout) given to write: its `.git` is a file naming its
# git directory, and the agent names one of its own making there.
POINT_GITFILE_AWAY = """\
    git init -q "$PWD/.mine" && git -C .mine config core.fsmonitor "touch $OWNED; false"
    echo "gitdir: $PWD/.mine/.git" >.git 2>/dev/null && say "GITFILE SET" || say ".git: read-only"
"""


async def test_a_writer_in_a_worktree_cant_point_its_git_file_at_a_repository_of_its_own(tmp_path: Path) -> None:
    main = tmp_path / "main"
    subprocess.run(["git", "init", "-q", str(main)], check=True)
    subprocess.run([*GIT.split(), "-C", str(main), "commit", "-q", "--allow-empty", "-m", "start"], check=True)
    (tmp_path / "ws").mkdir()
    tree = tmp_path / "ws" / "repo"
    subprocess.run(["git", "-C", str(main), "worktree", "add", "-q", str(tree)], check=True)
    result, owned = await _sandboxed(tmp_path, tree, POINT_GITFILE_AWAY)
    subprocess.run(["git", "-C", str(tree), "status"], capture_output=True, timeout=30, check=False)
    assert result.value == ".git: read-only" and not owned.exists(), result.value


def test_every_directory_between_a_written_path_and_a_git_control_is_pinned() -> None:
    from agentswf.sandbox.bwrap import anchors

    ws = Path("/w/ws")
    controls = [ws / "a" / "repo" / ".git" / "config", ws / "a" / "repo" / ".git" / "hooks", Path("/elsewhere/.git/config")]
    assert anchors(controls, [ws]) == [ws / "a", ws / "a" / "repo", ws / "a" / "repo" / ".git"]
    assert anchors([ws / ".git" / "config"], [ws]) == [ws / ".git"]  # the written path is a mount already


async def test_a_writer_cant_move_the_runs_directory_and_its_record_away(tmp_path: Path) -> None:
    """The run works in ws/sub (its record in ws/sub/.awf, covered inside), the sandbox writes ws:
    moved aside with its record, ws/sub could be made again by the agent, and the run would go on
    recording where the agent reads and writes."""
    sub = tmp_path / "ws" / "sub"
    sub.mkdir(parents=True)
    body = """\
        mv sub sub-was 2>/dev/null && say "MOVED" || say "stays"
    """

    async def fn(wf):
        box = await wf.sandboxes.open("box", cwd="..", write=["."])
        a = await wf.agents.open("a", runtime=agent(tmp_path / "ws", "a", body + ANSWER, secrets.token_hex(4)), sandbox=box)
        return (await a.run("Work.", timeout=20)).value

    result = await agentswf.run(workflow(name="sbx", description="A writer.")(fn), cwd=sub)
    assert result.value == "stays" and sub.is_dir(), result


def test_a_writer_cant_move_what_runs_the_agent_away_from_inside_a_path_it_writes(tmp_path: Path) -> None:
    """A project's tools/.venv (the `awf` you run next) stays read-only in `write: ["."]`; moved
    aside with its parent, the agent would make a .venv of its own at its path."""
    from agentswf.sandbox.bwrap import AgentPaths, bwrap_argv
    from agentswf.sandbox.runner import system_view
    from agentswf.sandbox.spec import ResolvedSpec

    project = tmp_path / "project"
    venv = project / "tools" / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "awf").write_text("#!/bin/sh\necho the real awf\n")
    agent_dir = tmp_path / "agent"
    (agent_dir / "home").mkdir(parents=True)
    spec = ResolvedSpec(project, (), (project,), ())
    command = ["/bin/sh", "-c", "mv tools tools-was 2>/dev/null && echo MOVED || echo stays"]
    argv = bwrap_argv(spec, AgentPaths(project, agent_dir), agent_dir / "home", command, system=system_view(), runtime=(venv,))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.stdout.strip() == "stays" and (venv / "bin" / "awf").exists(), done.stdout + done.stderr


# A submodule of yours, checked out: its git directory is in `.git/modules/`, which the agent may
# write, and your `git status` runs a status in the submodule with that directory's config.
A_SUBMODULES_CONFIG = """\
    git -C sub config core.fsmonitor "touch $OWNED; false" 2>/dev/null && say "CONFIG SET" || say "sub's config: read-only"
    hooks="$(git -C sub rev-parse --absolute-git-dir)/hooks"
    echo "touch $OWNED" >"$hooks/post-checkout" 2>/dev/null && say "HOOK SET" || say "sub's hooks: read-only"
"""


async def test_a_writer_cant_set_the_config_of_a_submodule_your_git_status_runs(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    subprocess.run(["git", "init", "-q", str(lib)], check=True)
    subprocess.run([*GIT.split(), "-C", str(lib), "commit", "-q", "--allow-empty", "-m", "lib"], check=True)
    repo = tmp_path / "ws" / "repo"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    add = [*GIT.split(), "-c", "protocol.file.allow=always", "-C", str(repo), "submodule", "add", "-q", str(lib), "sub"]
    subprocess.run(add, check=True, capture_output=True)
    subprocess.run([*GIT.split(), "-C", str(repo), "commit", "-q", "-m", "with a submodule"], check=True)
    assert (repo / ".git" / "modules" / "sub" / "config").is_file()
    result, owned = await _sandboxed(tmp_path, repo, A_SUBMODULES_CONFIG)
    (repo / "sub" / "x").write_text("changed, so that status looks inside\n")
    subprocess.run(["git", "-C", str(repo), "status"], capture_output=True, timeout=30, check=False)
    assert result.value.split("\n") == ["sub's config: read-only", "sub's hooks: read-only"] and not owned.exists(), result.value


def test_every_directory_under_a_repositorys_modules_is_found_to_hold(tmp_path: Path) -> None:
    """Whether or not it has a HEAD (an agent can remove one), and those between them: but not a
    git directory's data (its objects, refs and logs)."""
    from agentswf.sandbox.gitsweep import module_directories

    git = tmp_path / ".git"
    for module in ("modules/a", "modules/b/c", "modules/a/modules/d"):
        (git / module / "objects" / "ab").mkdir(parents=True)
        (git / module / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "modules" / "b" / "stray").mkdir()  # no HEAD: a part of a name, or a git directory that lost it
    found = sorted(path.relative_to(git).as_posix() for path in module_directories(git))
    assert found == ["modules/a", "modules/a/modules", "modules/a/modules/d", "modules/b", "modules/b/c", "modules/b/stray"]
