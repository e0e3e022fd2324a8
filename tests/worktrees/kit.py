"""A real git repository for the worktree tests, made in the test's tmp dir, with a user's
uncommitted work in it (a modified file, a staged one, an untracked one) and a way to prove
that work is byte-for-byte as it was."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import agentswf
from agentswf import Runtime, Workflow, workflow
from agentswf.sandbox.spec import RunSandboxFile

from ..harnesses.kit import shell_agent

GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
ANSWER = 'printf done | "$WFA" result "$WFA_CALL_ID"'


def git(repo: Path, *args: str, check: bool = True) -> str:
    """git in `repo`, as a person would run it (optional locks off: reading leaves the index be)."""
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
        check=False,
        timeout=60,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout


def make_repo(tmp_path: Path, name: str = "repo") -> Path:
    """A repository with two commits, then uncommitted work: modified, staged, untracked."""
    repo = tmp_path / name
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for key, value in (("user.name", "A Person"), ("user.email", "a@example.com"), ("commit.gpgsign", "false")):
        git(repo, "config", key, value)
    (repo / "README").write_text("hello\n")
    (repo / "src.py").write_text("x = 1\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "first")
    (repo / "src.py").write_text("x = 2\n")
    git(repo, "commit", "-qam", "second")
    (repo / "README").write_text("hello, edited and not saved anywhere\n")  # modified
    (repo / "staged.txt").write_text("staged\n")
    git(repo, "add", "staged.txt")  # staged
    (repo / "notes.txt").write_text("my own notes\n")  # untracked
    return repo


def snapshot(repo: Path) -> dict[str, Any]:
    """The user's side of `repo`: every file of the working tree (but the run's records), the
    index's bytes, HEAD, the branch list and the status."""
    files = {
        str(path.relative_to(repo)): path.read_bytes()
        for path in sorted(repo.rglob("*"))
        if path.is_file() and path.relative_to(repo).parts[0] not in (".git", ".awf")
    }
    index = (repo / ".git" / "index").read_bytes()
    return {
        "files": files,
        "index": index,
        "HEAD": (repo / ".git" / "HEAD").read_bytes(),
        "main": git(repo, "rev-parse", "main"),
        "status": git(repo, "status", "--porcelain=v1", "--untracked-files=all"),
    }


def branches(repo: Path) -> list[str]:
    return git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").split()


def registered(repo: Path) -> list[str]:
    """The worktrees git knows of, but the main one."""
    listed = git(repo, "worktree", "list", "--porcelain").split("\n\n")
    return [block.split("\n")[0].removeprefix("worktree ") for block in listed if block.strip()][1:]


def agent(tmp_path: Path, name: str, body: str) -> str:
    """A shell agent that runs `body` in its cwd, then answers."""
    return shell_agent(tmp_path, name, f"{body}\n{ANSWER}")


async def run_in(repo: Path, fn: Callable[..., Awaitable[Any]], **kwargs: Any) -> agentswf.RunResult:
    """Run `fn` as a workflow in `repo`, its records where they go by default (.awf/runs inside it)."""
    definition = workflow(name="wt", description="A worktree test.")(fn)
    return await agentswf.run(definition, cwd=repo, **kwargs)


REPORT = '"$WFA" result "$WFA_CALL_ID" "$(cat /tmp/report)"'  # a sandboxed agent's answer: what it wrote in its /tmp/report


def sh(body: str, **env: str) -> Runtime:
    """A shell agent running `body` (no file of its own: the sandbox sees only what it is given)."""
    return Runtime(harness="shell", command=("/bin/sh", "-c", f"{body}\n{REPORT}"), env=env)


def user_repo(tmp_path: Path) -> Path:
    """`make_repo`'s (a modified file, a staged one, an untracked one), with a stash as well."""
    repo = make_repo(tmp_path)
    (repo / "src.py").write_text("x = 'stashed'\n")
    git(repo, "stash", "push", "-q", "-m", "mine", "--", "src.py")
    return repo


def everything(repo: Path) -> dict[str, Any]:
    """The user's side of `repo`, byte for byte: `snapshot`, the stash, every ref but the run's
    branches, the config, the hooks."""
    refs = [line for line in git(repo, "for-each-ref", "--format=%(objectname) %(refname)").splitlines() if " refs/heads/awf/" not in line]
    hooks = sorted(path.name for path in (repo / ".git" / "hooks").iterdir())
    stash_log = (repo / ".git" / "logs" / "refs" / "stash").read_bytes()
    return {**snapshot(repo), "stash": git(repo, "stash", "list"), "stash_log": stash_log, "refs": refs,
            "config": (repo / ".git" / "config").read_bytes(), "hooks": hooks}  # fmt: skip


async def run_fixer(repo: Path, how: str, runtime: Runtime, **kwargs: Any) -> agentswf.RunResult:
    """One fixer on worktree `fix` (from the first commit, so it can rebase onto main), in a
    sandbox writing `.` given `how`: one of wf.sandboxes, its own, or the run's."""

    async def fix(wf: Workflow) -> str:
        tree = wf.worktree("fix", base="main~1")
        if how == "opened":
            box = await wf.sandboxes.open("box", cwd=tree, write=["."])
            fixer = await wf.agents.open("fixer", runtime=runtime, cwd=tree, sandbox=box)
        elif how == "private":
            fixer = await wf.agents.open("fixer", runtime=runtime, cwd=tree, sandbox={"write": ["."]})
        else:
            fixer = await wf.agents.open("fixer", runtime=runtime, cwd=tree)
        turn = await fixer.run("Fix it and commit.", timeout=60)
        return turn.value if turn.answered else f"{turn.outcome.kind}: {turn.outcome.reason}"

    sandbox = RunSandboxFile(write=(".",)) if how == "run" else None
    definition = workflow(name="fix", description="A sandboxed fixer on a worktree.")(fix)
    return await agentswf.run(definition, cwd=repo, sandbox=sandbox, **kwargs)


RUN_ID = "20261201-090020-fc66"


def run_manifest(tmp_path: Path, name: str = "w") -> tuple[Path, Any]:
    """A run's worktrees directory under `tmp_path/runs` (`awf worktrees --run-root` reads it),
    with the manifest of worktree `name` written in it, as a run makes one: the directory, and
    the manifest's Worktree."""
    from agentswf.workflow.worktrees import Manifest, Worktree, write_manifest

    directory = tmp_path / "runs" / "wt" / RUN_ID / "worktrees"
    directory.mkdir(parents=True)
    own = Worktree(
        name, directory / name, f"awf/{RUN_ID}/{name}", "0" * 40, "on-change",
        tmp_path, tmp_path / ".git" / "worktrees" / name, tmp_path / ".git", "HEAD", RUN_ID,
    )  # fmt: skip
    write_manifest(directory, Manifest(own, "made"))
    return directory, own

