"""An agent's environment doesn't carry the run's repository-locating git variables (GIT_DIR,
GIT_WORK_TREE, GIT_INDEX_FILE…, `git rev-parse --local-env-vars`): with them, the agent's git
would act on the repository they name (the user's, as in a git hook), not on its cwd's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentswf import Runtime

from ..worktrees.kit import agent, branches, git, make_repo, run_in, snapshot

pytestmark = pytest.mark.anyio

REPO_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR")


def hook_env(repo: Path) -> dict[str, str]:
    """The run's environment as in a git hook of the user's repository."""
    git_dir = repo / ".git"
    return {**os.environ, "GIT_DIR": str(git_dir), "GIT_WORK_TREE": str(repo), "GIT_INDEX_FILE": str(git_dir / "index"),
            "GIT_OBJECT_DIRECTORY": str(git_dir / "objects"), "GIT_COMMON_DIR": str(git_dir)}


async def test_an_agent_in_a_worktree_commits_there_not_in_the_repository_the_runs_variables_name(tmp_path):
    repo = make_repo(tmp_path)
    before = snapshot(repo)
    body = 'env > "$OUT/env" && echo mine > mine && git add mine && git commit -qm "the agent\'s"'

    async def work(wf):
        opened = await wf.agents.open("a", runtime=agent(tmp_path, "a", body), cwd=wf.worktree("w"))
        return (await opened.run("Work.")).outcome.kind

    result = await run_in(repo, work, env=hook_env(repo))
    assert result.value == "answered", result.reason
    [end] = result.worktrees
    assert end.state == "kept"
    assert snapshot(repo) == before  # the user's tree, index, HEAD and main as they were
    [branch] = [name for name in branches(repo) if name != "main"]
    assert git(repo, "log", "-1", "--format=%s", branch).strip() == "the agent's"
    seen = (tmp_path / "env").read_text().splitlines()
    assert not [line for line in seen if line.split("=", 1)[0] in REPO_VARIABLES]


async def test_any_cwd_is_spared_them_and_a_runtimes_own_env_still_sets_them(tmp_path):
    repo = make_repo(tmp_path)
    own = tmp_path / "own.git"

    async def work(wf):
        plain = await wf.agents.open("plain", runtime=agent(tmp_path, "plain", 'env > "$OUT/plain.env"'), cwd=str(tmp_path))
        chosen = Runtime(harness="shell", command=(agent(tmp_path, "chosen", 'env > "$OUT/chosen.env"').removeprefix("shell:"),),
                         env={"GIT_DIR": str(own)})
        given = await wf.agents.open("chosen", runtime=chosen, cwd=str(tmp_path))
        return [(await a.run("Work.")).outcome.kind for a in (plain, given)]

    result = await run_in(repo, work, env=hook_env(repo))
    assert result.value == ["answered", "answered"], result.reason
    plain = (tmp_path / "plain.env").read_text().splitlines()
    assert not [line for line in plain if line.split("=", 1)[0] in REPO_VARIABLES]
    assert f"GIT_DIR={own}" in (tmp_path / "chosen.env").read_text().splitlines()
