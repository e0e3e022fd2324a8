"""`awf run` lists the worktrees it kept; `awf worktrees` lists those a run killed with -9
left, as live while the run lives (and `--clean` leaves them alone then), and `--clean`
removes only those in which nothing changed. Real `awf run` subprocesses, real git; `awf worktrees`
as a process in the first tests, in the test's process (`worktrees_here`) in the later ones."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentswf import Workflow
from agentswf.workflow.worktrees import SUBMODULES_KEEP

from ..cli.here import Said, awf_here
from .kit import agent, branches, git, make_repo, registered, run_in, snapshot

AWF = [sys.executable, "-m", "agentswf"]
READY_SECONDS = 30.0

WORKFLOW = """
from agentswf import workflow

@workflow(name="held", description="Three agents in worktrees, then one that waits.")
async def held(wf):
    for key, runtime in {runtimes!r}.items():
        agent = await wf.agents.open(key, runtime=runtime, cwd=wf.worktree(key))
        await agent.run("Work.")
    waiter = await wf.agents.open("waiter", runtime={waiter!r})
    await waiter.run("Wait.", timeout="1h")
"""


def awf(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AWF, *args], cwd=repo, capture_output=True, text=True, timeout=60, check=False)


def listed(repo: Path, *args: str) -> dict[str, str]:
    """`awf worktrees`' lines, by worktree name: its status and detail."""
    done = awf(repo, "worktrees", *args)
    assert done.returncode == 0, done.stderr
    found = {}
    for line in done.stdout.splitlines():
        if not line.startswith(" "):
            _, name, status = line.split("  ", 2)
            found[name] = status
    return found


def start(repo: Path, tmp_path: Path, backend: str) -> subprocess.Popen[bytes]:
    runtimes = {
        "committer": agent(tmp_path, "committer", "echo new > new.txt && git add new.txt && git commit -qm new"),
        "worker": agent(tmp_path, "worker", "echo wip > wip.txt"),
        "idle": agent(tmp_path, "idle", "true"),
    }
    waiter = agent(tmp_path, "waiter", 'touch "$OUT/ready"; sleep 1000')
    flows = tmp_path / "flows.py"
    flows.write_text(WORKFLOW.format(runtimes=runtimes, waiter=waiter))
    run = subprocess.Popen(
        [*AWF, "run", str(flows), "--backend", backend], cwd=repo, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + READY_SECONDS
    while not (tmp_path / "ready").exists():
        assert time.monotonic() < deadline and run.poll() is None, "the run never got to its waiter"
        time.sleep(0.02)
    return run


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_killed_runs_worktrees_are_listed_and_only_the_clean_ones_cleaned(tmp_path: Path, backend: str) -> None:
    repo = make_repo(tmp_path)
    before = snapshot(repo)
    run = start(repo, tmp_path, backend)
    try:
        live = listed(repo, "--clean")
        assert live == dict.fromkeys(["committer", "idle", "worker"], "live: its run is still running")
        assert len(registered(repo)) == 3  # --clean left a live run's worktrees alone
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait()
    assert listed(repo) == {
        "committer": "changed: 1 commit on its branch",
        "idle": "clean: nothing changed (--clean removes it)",
        "worker": "changed: uncommitted changes",
    }
    assert "locked agentswf run" in git(repo, "worktree", "list", "--porcelain")  # a killed run's: still locked
    assert listed(repo, "--clean") == {
        "committer": "kept: 1 commit on its branch",
        "idle": "removed: nothing changed",
        "worker": "kept: uncommitted changes",
    }
    kept = registered(repo)
    assert [Path(path).name for path in kept] == ["committer", "worker"]
    assert (Path(kept[1]) / "wip.txt").read_text() == "wip\n"
    assert sorted(name.rsplit("/", 1)[1] for name in branches(repo) if name.startswith("awf/")) == ["committer", "worker"]
    assert "locked" not in git(repo, "worktree", "list", "--porcelain")  # its run is over: the kept ones are the user's
    assert listed(repo) == {"committer": "changed: 1 commit on its branch", "worker": "changed: uncommitted changes"}
    assert snapshot(repo) == before


def test_awf_run_lists_the_worktrees_it_kept(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    flows = tmp_path / "kept.py"
    committer = agent(tmp_path, "c", "git commit -q --allow-empty -m mine")
    flows.write_text(
        "from agentswf import workflow\n\n"
        "@workflow(name='kept', description='One commit, one nothing.')\n"
        "async def kept(wf):\n"
        f"    for key in ('c', 'idle'):\n"
        f"        agent = await wf.agents.open(key, runtime={committer!r} if key == 'c' else 'shell:true', cwd=wf.worktree(key))\n"
        "        await agent.run('Work.', nudge=False)\n"
    )
    done = awf(repo, "run", str(flows), "--json")
    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("awf: worktree")]
    run_dir = next((repo / ".awf" / "runs" / "kept").iterdir())
    path = repo / ".awf" / "worktrees" / run_dir.name / "c"  # beside the record
    assert line == f"awf: worktree c kept (1 commit on its branch): {path}  branch awf/{run_dir.name}/c"
    ends = {end["name"]: end for end in json.loads(done.stdout)["worktrees"]}
    assert (ends["c"]["state"], ends["c"]["path"], ends["c"]["commits"]) == ("kept", str(path), 1)
    assert (ends["idle"]["state"], ends["idle"]["reason"]) == ("removed", "nothing changed")
    assert listed(repo) == {"c": "changed: 1 commit on its branch"}
    assert listed(repo, run_dir.name) == {"c": "changed: 1 commit on its branch"}


@pytest.fixture
def worktrees_here(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., Said]:
    """`awf worktrees` in the test's process, for the tests whose subject is what it reads of a run's
    record and the repository: the tests above run it as a process, against a live run and after."""

    def worktrees(cwd: Path, *args: str) -> Said:
        return awf_here(cwd, "worktrees", *args, monkeypatch=monkeypatch, capsys=capsys)

    return worktrees


def test_an_unknown_run_is_a_usage_error(tmp_path: Path) -> None:
    done = awf(tmp_path, "worktrees", "no-such-run")
    assert done.returncode == 2 and "no record of run 'no-such-run'" in done.stderr
    nothing = awf(tmp_path, "worktrees")
    assert nothing.returncode == 0 and "no worktrees under" in nothing.stderr


async def test_a_worktree_whose_repository_went_away_is_listed_and_left(tmp_path: Path, worktrees_here: Callable[..., Said]) -> None:
    repo = make_repo(tmp_path)

    async def leaves(wf: Workflow) -> None:
        (wf.worktree("w") / "mine.txt").write_text("mine\n")

    result = await run_in(repo, leaves, run_root=tmp_path / "records")
    assert [end.state for end in result.worktrees] == ["kept"]
    repo.rename(tmp_path / "elsewhere")
    for clean in ((), ("--clean",)):
        done = worktrees_here(tmp_path, "--run-root", str(tmp_path / "records"), *clean)
        assert done.returncode == 0, done.stderr
        assert f"w  {'kept' if clean else 'changed'}: it couldn't be checked ({repo} is not there)" in done.stdout
    assert (result.worktrees[0].path / "mine.txt").read_text() == "mine\n"


def lines_of(worktrees: Callable[..., Said], repo: Path, *args: str) -> list[tuple[str, str, str]]:
    """`awf worktrees`' lines: run, name, status and detail (a name may be two runs')."""
    done = worktrees(repo, *args)
    assert done.returncode == 0, done.stderr
    return [tuple(line.split("  ", 2)) for line in done.stdout.splitlines() if not line.startswith(" ")]  # type: ignore[misc]


async def one_look(repo: Path, tmp_path: Path, body: str) -> Any:
    """A run whose one agent works in worktree `look`: its end."""

    async def look(wf: Workflow) -> str:
        opened = await wf.agents.open("a", runtime=agent(tmp_path, f"a{len(list(tmp_path.glob('a*.sh')))}", body), cwd=wf.worktree("look"))
        return (await opened.run("Work.")).outcome.kind

    result = await run_in(repo, look)
    assert result.value == "answered", result.reason
    [end] = result.worktrees
    return end, result.run_dir


COMMITS = "echo new > new.txt && git add new.txt && git commit -qm new"


@pytest.mark.anyio
async def test_a_name_a_later_run_reuses_is_that_runs_and_the_earlier_removed_one_stays_removed(
    tmp_path: Path, worktrees_here: Callable[..., Said]
) -> None:
    """Git names a worktree's entry after its directory, so a later run's `look` takes the entry
    an earlier run's removed `look` had: the earlier one was listed as moved to the later one's
    place, and `--clean` rewrote its record from removed to kept."""
    repo = make_repo(tmp_path)
    first, first_run = await one_look(repo, tmp_path, "true")
    assert first.state == "removed"
    second, second_run = await one_look(repo, tmp_path, COMMITS)
    assert second.state == "kept" and second.path != first.path
    expected = [(second_run.name, "look", "changed: 1 commit on its branch")]
    assert lines_of(worktrees_here, repo) == expected
    assert lines_of(worktrees_here, repo, "--clean") == [(second_run.name, "look", "kept: 1 commit on its branch")]
    manifest = json.loads((first_run / "worktrees" / "look.json").read_text())
    assert manifest["state"] == "ended" and manifest["ended"]["state"] == "removed"  # still removed
    assert lines_of(worktrees_here, repo) == expected


@pytest.mark.anyio
async def test_a_kept_worktree_you_removed_is_not_the_later_one_in_its_place(tmp_path: Path, worktrees_here: Callable[..., Said]) -> None:
    repo = make_repo(tmp_path)
    first, _ = await one_look(repo, tmp_path, COMMITS)
    git(repo, "worktree", "remove", str(first.path))  # merged, say, then removed as the docs say
    git(repo, "branch", "-D", first.branch)
    _, second_run = await one_look(repo, tmp_path, COMMITS)
    assert lines_of(worktrees_here, repo) == [(second_run.name, "look", "changed: 1 commit on its branch")]


@pytest.mark.anyio
async def test_a_worktree_with_submodules_checked_out_is_listed_as_kept_saying_why_not_as_clean(
    tmp_path: Path, worktrees_here: Callable[..., Said]
) -> None:
    """`git worktree remove` won't remove one: it was listed `clean … (--clean removes it)` before
    and after every `--clean`, which couldn't."""
    library = make_repo(tmp_path, "library")
    git(library, "stash", "-u", "-q")
    repo = make_repo(tmp_path)
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(library), "lib")
    git(repo, "commit", "-qm", "a submodule")
    end, run_dir = await one_look(repo, tmp_path, "git -c protocol.file.allow=always submodule update --init -q")
    assert (end.state, end.reason) == ("kept", SUBMODULES_KEEP)
    for args in ((), ("--clean",), ()):
        assert lines_of(worktrees_here, repo, *args) == [(run_dir.name, "look", f"kept: {SUBMODULES_KEEP}")]
    assert (end.path / "lib" / "README").exists()
