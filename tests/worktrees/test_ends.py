"""At the run's end: a worktree with commits is kept, one with uncommitted changes is kept
(never removed), one in which nothing changed is removed with its branch; the user's own
working tree and index are byte-for-byte as they were. Real git, real shell agents."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentswf import Workflow
from agentswf.engine.record.layout import read_lines

from .kit import agent, branches, git, make_repo, registered, run_in, snapshot

pytestmark = pytest.mark.anyio

COMMITS = 'echo new > new.txt && git add new.txt && git commit -qm "the agent\'s commit"'
LEAVES_WORK = "echo wip > wip.txt && echo more >> README"
NOTHING = 'pwd > "$OUT/pwd"'


async def test_commits_are_kept_uncommitted_work_is_kept_nothing_is_removed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    before = snapshot(repo)
    runtimes = {"committer": COMMITS, "worker": LEAVES_WORK, "idle": NOTHING}
    paths: dict[str, Path] = {}

    async def three(wf: Workflow) -> list[str]:
        async def one(key: str) -> str:
            paths[key] = wf.worktree(key)
            opened = await wf.agents.open(key, runtime=agent(tmp_path, key, runtimes[key]), cwd=paths[key])
            return (await opened.run("Work.")).outcome.kind

        return await wf.parallel(list(runtimes), one)

    result = await run_in(repo, three)
    assert result.value == ["answered"] * 3, result.reason
    assert snapshot(repo) == before  # the user's tree, index, HEAD and status: untouched
    ends = {end.name: end for end in result.worktrees}
    prefix = f"awf/{result.run_id}"

    committer = ends["committer"]
    assert (committer.state, committer.reason, committer.commits) == ("kept", "1 commit on its branch", 1)
    assert git(repo, "log", "-1", "--format=%s", committer.branch).strip() == "the agent's commit"
    assert git(repo, "rev-parse", f"{committer.branch}~1") == git(repo, "rev-parse", "main")
    assert (paths["committer"] / "new.txt").read_text() == "new\n"

    worker = ends["worker"]
    assert (worker.state, worker.reason, worker.dirty) == ("kept", "uncommitted changes", True)
    assert (paths["worker"] / "wip.txt").read_text() == "wip\n"
    assert (paths["worker"] / "README").read_text() == "hello\nmore\n"  # the base's README, not the user's

    idle = ends["idle"]
    assert (idle.state, idle.reason) == ("removed", "nothing changed")
    assert (tmp_path / "pwd").read_text().strip() == str(paths["idle"])  # it worked in its worktree
    assert not paths["idle"].exists()
    assert sorted(branches(repo)) == sorted(["main", f"{prefix}/committer", f"{prefix}/worker"])
    assert sorted(registered(repo)) == sorted([str(paths["committer"]), str(paths["worker"])])
    assert "locked" not in git(repo, "worktree", "list", "--porcelain")  # a run that ended lets go

    logged = {line["fields"].get("worktree"): line["message"] for line in read_lines(result.run_dir / "log.jsonl")
              if line["message"].startswith("worktree ") and line["message"] != "worktree made"}
    assert logged == {"committer": "worktree kept", "worker": "worktree kept", "idle": "worktree removed"}
    manifest = (result.run_dir / "worktrees" / "worker.json").read_text()
    assert '"state":"ended"' in manifest and "uncommitted changes" in manifest


async def test_a_worktree_starts_at_its_base_and_is_the_agents_cwd(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    first = git(repo, "rev-parse", "main~1").strip()

    async def based(wf: Workflow) -> str:
        path = wf.worktree("old", base="main~1")
        made = wf.worktrees["old"]
        assert (made.path, made.base, made.given_base, made.branch) == (path, first, "main~1", f"awf/{wf.run_id}/old")
        assert wf.worktree("old", base="main~1") == path  # the same name and arguments: the same worktree
        reader = await wf.agents.open("reader", runtime=agent(tmp_path, "reader", 'cat src.py > "$OUT/seen"'), cwd=path)
        return (await reader.run("Read.")).outcome.kind

    result = await run_in(repo, based)
    assert result.value == "answered", result.reason
    assert (tmp_path / "seen").read_text() == "x = 1\n"  # the first commit's file
    assert [end.state for end in result.worktrees] == ["removed"]


@pytest.mark.parametrize(
    ("keep", "body", "state", "directory", "branch"),
    [
        ("always", NOTHING, "kept", True, True),
        ("never", COMMITS, "branch-kept", False, True),
        ("never", LEAVES_WORK, "kept", True, True),  # uncommitted work: never removed, whatever keep says
        ("never", NOTHING, "removed", False, False),
    ],
)
async def test_keep(tmp_path: Path, keep: str, body: str, state: str, directory: bool, branch: bool) -> None:
    repo = make_repo(tmp_path)
    before = snapshot(repo)

    async def kept(wf: Workflow) -> None:
        path = wf.worktree("w", keep=keep)  # type: ignore[arg-type]
        opened = await wf.agents.open("a", runtime=agent(tmp_path, "a", body), cwd=path)
        await opened.run("Work.")

    result = await run_in(repo, kept)
    [end] = result.worktrees
    assert end.state == state, end.reason
    assert end.path.exists() == directory
    assert (end.branch in branches(repo)) == branch
    assert snapshot(repo) == before


async def test_a_failing_workflow_still_deals_with_its_worktrees(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)

    async def fails(wf: Workflow) -> None:
        kept = wf.worktree("kept")
        (kept / "left.txt").write_text("mine\n")
        wf.worktree("clean")
        raise RuntimeError("boom")

    result = await run_in(repo, fails)
    assert result.outcome == "failed"
    assert {end.name: end.state for end in result.worktrees} == {"kept": "kept", "clean": "removed"}


async def test_from_a_subdirectory_with_the_record_outside_the_repository(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo / "service").mkdir()
    (repo / "service" / "app.py").write_text("app = 1\n")
    git(repo, "add", "service")
    git(repo, "commit", "-qm", "a service")
    before = snapshot(repo)

    async def sub(wf: Workflow) -> str:
        top = wf.worktree("w")
        made = wf.worktrees["w"]
        assert made.repository == repo and wf.cwd == repo / "service"
        assert top.parent == tmp_path / "worktrees" / wf.run_id  # beside the record, not in it
        here = top / wf.cwd.relative_to(made.repository)  # the run's directory, in the worktree
        opened = await wf.agents.open("a", runtime=agent(tmp_path, "a", "echo more >> app.py"), cwd=here)
        return (await opened.run("Work.")).outcome.kind

    result = await run_in(repo / "service", sub, run_root=tmp_path / "records")
    assert result.value == "answered", result.reason
    [end] = result.worktrees
    assert (end.state, end.reason) == ("kept", "uncommitted changes")
    assert (end.path / "service" / "app.py").read_text() == "app = 1\nmore\n"
    assert snapshot(repo) == before
