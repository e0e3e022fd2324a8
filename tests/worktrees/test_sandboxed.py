"""A sandboxed agent on a worktree of its own (issue 31): `cwd=wf.worktree(name)` with a sandbox
that writes `.` (one of `wf.sandboxes`, an agent's own, or the run's, `awf run --sandbox`) runs
in its worktree, runs git there (status, diff, add, commit, log, rebase onto a branch of the
repository) in a git directory of its own, and its commits reach its branch at the turn's end;
the user's HEAD, index, working tree, status, stash, branches, config and hooks are byte for
byte as they were. Real git, real bubblewrap, real shell agents."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import agentswf
from agentswf import Workflow, workflow
from agentswf.engine.record.layout import read_lines

from ..sandbox.kit import needs_bwrap
from .kit import branches, everything, git, make_repo, run_fixer, sh, user_repo

pytestmark = needs_bwrap
READY_SECONDS = 30.0

FIXER = """\
exec >/tmp/report 2>&1
git status --porcelain | wc -l | tr -d ' '
echo more >> README && echo fixed > fix.py
git add README fix.py && git diff --cached --name-only | tr '\\n' ' ' && echo
git commit -qm 'A fix.' && git log --format=%s | tr '\\n' ' ' && echo
git rebase -q main && git log --format=%s | tr '\\n' ' ' && echo
git status --porcelain | wc -l | tr -d ' '
"""


@pytest.mark.parametrize("how", ["opened", "private", "run"])
async def test_a_sandboxed_agent_on_its_worktree_commits_and_rebases_and_the_users_repository_is_as_it_was(
    tmp_path: Path, how: str
) -> None:
    repo = user_repo(tmp_path)
    before = everything(repo)
    result = await run_fixer(repo, how, sh(FIXER))
    assert result.outcome == "completed", result.reason
    status_before, staged, committed, rebased, status_after = result.value.splitlines()
    assert (status_before, staged, status_after) == ("0", "README fix.py ", "0")  # its worktree, its own index
    assert committed == "A fix. first "  # on its branch, from the first commit
    assert rebased == "A fix. second first "  # onto the repository's main
    [end] = result.worktrees
    assert (end.state, end.reason) == ("kept", "2 commits on its branch"), end.reason
    assert git(repo, "log", "--format=%s", end.branch).split("\n")[:3] == ["A fix.", "second", "first"]
    assert git(repo, "show", f"{end.branch}:fix.py") == "fixed\n"
    assert git(end.path, "status", "--porcelain") == ""  # the worktree's index is its branch's: nothing uncommitted
    assert everything(repo) == before  # HEAD, index, files, status, stash, refs, config, hooks: untouched
    assert sorted(branches(repo)) == sorted(["main", end.branch])
    assert end.path.parent.parent == repo / ".awf" / "worktrees"  # beside the record, not in it
    logged = [line["fields"] for line in read_lines(result.run_dir / "log.jsonl")]
    carried = [fields["carried"] for fields in logged if "carried" in fields]
    assert carried == [f"worktree fix: 2 commit(s) carried back onto {end.branch} ({git(repo, 'rev-parse', end.branch)[:12]})"]


async def test_what_it_committed_and_packed_in_its_git_directory_is_carried_back(tmp_path: Path) -> None:
    """`git gc` in the agent's git directory packs its objects: they are carried back by the
    names its pack's index lists."""
    repo = user_repo(tmp_path)
    body = "exec >/tmp/report 2>&1\necho fixed > fix.py && git add fix.py && git commit -qm 'A fix.' && git gc -q && ls $(git rev-parse --git-dir)/objects/pack | grep -c pack$"
    result = await run_fixer(repo, "opened", sh(body))
    assert result.value == "1", result.value
    [end] = result.worktrees
    assert git(repo, "show", f"{end.branch}:fix.py") == "fixed\n"
    assert git(end.path, "status", "--porcelain") == ""


async def test_what_it_staged_and_did_not_commit_is_its_worktrees_at_the_end(tmp_path: Path) -> None:
    """The index is carried back too (made by git from a tree of the agent's index): the worktree
    is kept for its uncommitted changes, which are staged there as the agent left them."""
    repo = user_repo(tmp_path)
    before = everything(repo)
    body = "exec >/tmp/report 2>&1\necho new > new.txt && git add new.txt && echo more >> README && git status --porcelain | tr '\\n' ' '"
    result = await run_fixer(repo, "opened", sh(body))
    assert result.value == " M README A  new.txt ", result.value
    [end] = result.worktrees
    assert (end.state, end.reason) == ("kept", "uncommitted changes")
    assert git(end.path, "status", "--porcelain") == " M README\nA  new.txt\n"
    assert git(end.path, "diff", "--cached", "--name-only") == "new.txt\n"
    assert everything(repo) == before


async def test_a_reader_on_its_worktree_runs_git_and_commits_nothing(tmp_path: Path) -> None:
    """A reader sandbox (the run's cwd, which holds the hidden `.awf`) with the agent's cwd its
    worktree: it sees its worktree and its git, reads the log, and can't commit."""
    repo = user_repo(tmp_path)
    before = everything(repo)
    body = (
        "exec >/tmp/report 2>&1\ngit log --format=%s | tr '\\n' ' '; echo; ls -A .. | wc -l | tr -d ' '\n"
        "{ echo x > fix.py; } 2>/dev/null || echo read-only; git commit -q --allow-empty -m sneaky 2>/dev/null || echo refused"
    )

    async def read(wf: Workflow) -> str:
        tree = wf.worktree("look")
        box = await wf.sandboxes.open("reader")
        reader = await wf.agents.open("reader", runtime=sh(body), cwd=tree, sandbox=box)
        turn = await reader.run("Look.", timeout=60)
        return turn.value if turn.answered else turn.outcome.reason

    definition = workflow(name="look", description="A reader on a worktree.")(read)
    result = await agentswf.run(definition, cwd=repo)
    assert result.value == "second first \n1\nread-only\nrefused", result.value  # no other worktree beside its own
    [end] = result.worktrees
    assert (end.state, end.reason) == ("removed", "nothing changed")
    assert everything(repo) == before


async def test_the_users_identity_commits_inside_and_a_runtimes_env_wins(tmp_path: Path) -> None:
    """The sandbox's home is fresh: the name and email the repository's git commits with (here
    the repository's own config) are the agent's; a runtime's GIT_AUTHOR_* win over them."""
    repo = user_repo(tmp_path)
    body = "exec >/tmp/report 2>&1\ngit commit -q --allow-empty -m mine && git log -1 --format='%an <%ae>'"
    result = await run_fixer(repo, "opened", sh(body))
    assert result.value == "A Person <a@example.com>", result.value
    named = sh(body, GIT_AUTHOR_NAME="Bot", GIT_AUTHOR_EMAIL="bot@example.com")
    result = await run_fixer(repo, "opened", named, env={**os.environ, "HOME": str(tmp_path)})
    assert result.value == "Bot <bot@example.com>", result.value


def with_many_worktrees_and_a_submodule(tmp_path: Path, worktrees: int) -> Path:
    """`user_repo`, with a submodule checked out in it and `worktrees` linked worktrees' entries
    in `.git/worktrees` (as `git worktree add` leaves them, but for their checkouts)."""
    library = make_repo(tmp_path, "library")
    git(library, "stash", "-u", "-q")
    repo = user_repo(tmp_path)
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "lib")
    git(repo, "commit", "-qm", "a submodule")
    head = git(repo, "rev-parse", "HEAD").strip()
    for number in range(worktrees):
        entry = repo / ".git" / "worktrees" / f"old-{number}"
        entry.mkdir(parents=True)
        (entry / "HEAD").write_text(f"{head}\n")
        (entry / "commondir").write_text("../..\n")
        (entry / "gitdir").write_text(f"{tmp_path / 'gone' / str(number)}/.git\n")
    return repo


async def test_two_fixers_each_in_a_sandbox_on_its_worktree_commit_and_the_repository_is_as_it_was(tmp_path: Path) -> None:
    """Issue 31, done: two fixers, each on its own worktree and in a sandbox writing only it, commit
    on their own branches of a repository with a submodule, 300 linked worktrees and the user's
    uncommitted work and stash, which is byte for byte as it was but for the two branches."""
    repo = with_many_worktrees_and_a_submodule(tmp_path, 300)
    before = everything(repo), sorted(path.name for path in (repo / ".git" / "worktrees").iterdir())

    async def two(wf: Workflow) -> list[str]:
        async def fix(key: str) -> str:
            body = f"exec >/tmp/report 2>&1\necho {key} > {key}.txt && git add {key}.txt && git commit -qm 'Fix {key}.' && git log -1 --format=%s"
            fixer = await wf.agents.open(key, runtime=sh(body), cwd=wf.worktree(key), sandbox={"write": ["."]})
            turn = await fixer.run("Fix it.", timeout=120)
            return turn.value if turn.answered else turn.outcome.reason

        return await wf.parallel(["one", "two"], fix)

    definition = workflow(name="two", description="Two sandboxed fixers.")(two)
    result = await agentswf.run(definition, cwd=repo)
    assert result.value == ["Fix one.", "Fix two."], result.reason
    ends = {end.name: end for end in result.worktrees}
    for key in ("one", "two"):
        assert (ends[key].state, ends[key].reason) == ("kept", "1 commit on its branch")
        assert git(repo, "show", f"{ends[key].branch}:{key}.txt") == f"{key}\n"
    after = everything(repo), sorted(path.name for path in (repo / ".git" / "worktrees").iterdir() if path.name not in ("one", "two"))
    assert after == before
    assert sorted(branches(repo)) == sorted(["main", ends["one"].branch, ends["two"].branch])


KILLED = """\
from agentswf import Runtime, workflow

@workflow(name="killed", description="A sandboxed fixer, killed mid-turn.")
async def killed(wf):
    body = "git commit -q --allow-empty -m lost && touch started && sleep 1000"
    fixer = await wf.agents.open("fixer", runtime=Runtime(harness="shell", command=("/bin/sh", "-c", body)),
                                 cwd=wf.worktree("fix"), sandbox={"write": ["."]})
    await fixer.run("Fix it.", timeout="1h")
"""


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_run_killed_mid_turn_leaves_the_users_repository_as_it_was(tmp_path: Path, backend: str) -> None:
    """`kill -9` of `awf run` while its sandboxed agent is in its turn: the agent is killed with it,
    nothing it did in git is carried back (its commit is lost), its worktree is listed, and the
    user's repository is byte for byte as it was."""
    repo = user_repo(tmp_path)
    before = everything(repo)
    flows = tmp_path / "killed.py"
    flows.write_text(KILLED)
    run = subprocess.Popen([sys.executable, "-m", "agentswf", "run", str(flows), "--backend", backend], cwd=repo,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + READY_SECONDS
        while not list((repo / ".awf" / "worktrees").glob("*/fix/started")):
            assert time.monotonic() < deadline and run.poll() is None, "the agent never started"
            time.sleep(0.05)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    [started] = list((repo / ".awf" / "worktrees").glob("*/fix/started"))
    branch = f"awf/{started.parent.parent.name}/fix"
    assert git(repo, "rev-parse", branch) == git(repo, "rev-parse", "main")  # its commit never reached the branch
    done = subprocess.run([sys.executable, "-m", "agentswf", "worktrees"], cwd=repo, capture_output=True, text=True, timeout=60)
    assert "fix  changed: uncommitted changes" in done.stdout, done.stdout + done.stderr
    assert everything(repo) == before


async def test_an_agent_in_a_linked_worktree_the_run_did_not_make_is_told_why_git_fails(tmp_path: Path) -> None:
    """Issue 31, item 3: a sandbox writing a worktree the user made (`git worktree add`) shows
    the agent neither the worktree's git directory nor the repository's, so its git says `not a
    git repository`; the run's record says why, once, and what to do instead."""
    repo = make_repo(tmp_path)
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "mine", str(linked))
    body = "exec >/tmp/report 2>&1\ngit status --porcelain >/dev/null 2>&1 && echo ran || echo failed"

    async def fix(wf: Workflow) -> str:
        agent = await wf.agents.open("fixer", runtime=sh(body), cwd=linked, sandbox={"write": ["."]})
        first, second = await agent.run("Fix.", timeout=60), await agent.run("Again.", timeout=60)
        return f"{first.value} {second.value}"

    definition = workflow(name="linked", description="An agent in the user's linked worktree.")(fix)
    result = await agentswf.run(definition, cwd=repo)
    assert result.value == "failed failed", result.value
    logged = [line["message"] for line in read_lines(result.run_dir / "log.jsonl") if "git can't run" in line["message"]]
    assert len(logged) == 1, logged  # once an agent
    assert f"its git directory {repo / '.git' / 'worktrees' / 'linked'} is not in what the sandbox" in logged[0]
    assert "cwd=wf.worktree(name)" in logged[0]
