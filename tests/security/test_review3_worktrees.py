"""Attacks on the run's worktrees from the agent working in one (review 3): what it writes in
its worktree's `.git` file or git's entry for it is read at the run's end, and printed."""

from __future__ import annotations

from pathlib import Path

import pytest

import agentswf
from agentswf import Workflow

from ..worktrees.kit import agent, make_repo, run_in, run_manifest, snapshot

pytestmark = pytest.mark.anyio


async def _one_agent(repo: Path, tmp_path: Path, body: str) -> agentswf.RunResult:
    async def work(wf: Workflow) -> str:
        opened = await wf.agents.open("a", runtime=agent(tmp_path, "a", body), cwd=wf.worktree("w"))
        return (await opened.run("Work.")).outcome.kind

    return await run_in(repo, work)


@pytest.mark.parametrize(
    "body",
    [
        r"printf 'gitdir: /tmp/a\000b\n' > .git",  # its own .git file
        r'printf "/tmp/a\000b/.git\n" > "$(git rev-parse --git-dir)/gitdir"',  # git's entry for it
    ],
    ids=["dot-git", "gitdir"],
)
async def test_a_nul_in_a_worktrees_git_link_doesnt_crash_the_runs_end(tmp_path: Path, body: str) -> None:
    repo = make_repo(tmp_path)
    before = snapshot(repo)
    result = await _one_agent(repo, tmp_path, body)
    assert result.value == "answered", result.reason
    [end] = result.worktrees
    assert end.state == "kept", end
    assert snapshot(repo) == before


# The agent says, through git's entry for its worktree, that the worktree was moved to a
# directory it made whose name is an escape sequence (OSC 52: the clipboard), then deletes the
# worktree: the run's end reads "it was moved to <that name>" and prints it.
MOVED_TO_AN_ESCAPE = r"""
d="$OUT/$(printf 'x\033]52;c;cm0gLXJmIH4K\007y\342\200\256')"
mkdir -p "$d"
echo "$d/.git" > "$(git rev-parse --git-dir)/gitdir"
here="$PWD"; cd /; rm -rf "$here"
"""

FLOW = """
from agentswf import workflow

@workflow(name="moved", description="An agent that says its worktree moved.")
async def moved(wf):
    agent = await wf.agents.open("a", runtime={runtime!r}, cwd=wf.worktree("w"))
    return (await agent.run("Work.")).outcome.kind
"""
CONTROLS = ("\x1b", "\x07", "\u202e")


def test_where_an_agent_says_its_worktree_went_is_shown_not_obeyed(tmp_path: Path) -> None:
    import subprocess
    import sys

    repo = make_repo(tmp_path)
    (tmp_path / "flow.py").write_text(FLOW.format(runtime=agent(tmp_path, "a", MOVED_TO_AN_ESCAPE)))

    def awf(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agentswf", *args], cwd=repo, capture_output=True, text=True, timeout=60, check=False
        )

    ran = awf("run", str(tmp_path / "flow.py"), "--plain")
    assert ran.returncode == 0, ran.stderr
    assert "moved to" in ran.stderr and "\\x1b]52" in ran.stderr, ran.stderr  # awf run's closing lines
    listed = awf("worktrees")
    assert "\\x1b]52" in listed.stdout, listed.stdout
    [run_dir] = (repo / ".awf" / "runs" / "moved").iterdir()
    logs = awf("logs", run_dir.name)
    assert "moved to" in logs.stdout, logs.stdout
    for done in (ran, listed, logs):
        assert not [char for char in CONTROLS if char in done.stdout + done.stderr], done.args


@pytest.mark.parametrize("field", ["repository", "git_dir", "common_dir"])
def test_a_manifest_with_a_nul_in_a_path_is_not_read(
    tmp_path: Path, field: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`awf worktrees` goes by the manifests; one an agent wrote with a NUL in a path names no
    worktree, and crashes no command (git's cwd or `--git-dir` would raise ValueError). In the
    test's process: a raise would fail it as well; the FIFO test below runs it as a process."""
    import json
    from dataclasses import replace

    from agentswf.workflow.worktrees import read_manifest

    from ..cli.here import awf_here

    directory, own = run_manifest(tmp_path)
    runs = tmp_path / "runs"
    forged = json.loads((directory / "w.json").read_text())
    forged["worktree"][field] = str(replace(own).repository) + "/a\0b"
    (directory / "w.json").write_text(json.dumps(forged))
    assert read_manifest(directory / "w.json") is None
    for args in ([], ["--clean"]):
        done = awf_here(tmp_path, "worktrees", "--run-root", str(runs), *args, monkeypatch=monkeypatch, capsys=capsys)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_a_manifest_named_by_no_worktrees_name_is_not_read(tmp_path: Path) -> None:
    """A file an agent put among the manifests, named with an escape sequence, its fields made to match."""
    from agentswf.workflow.worktrees import Manifest, Worktree, read_manifest, write_manifest

    directory = tmp_path / "20261201-090020-fc66" / "worktrees"
    directory.mkdir(parents=True)
    name = "w\x1b]52;c;cm0gLXJmIH4K\x07"
    forged = Worktree(
        name, directory / name, f"awf/20261201-090020-fc66/{name}", "0" * 40, "on-change",
        tmp_path, tmp_path / ".git" / "worktrees" / "w", tmp_path / ".git", "HEAD", "20261201-090020-fc66",
    )  # fmt: skip
    write_manifest(directory, Manifest(forged, "made"))
    assert read_manifest(directory / f"{name}.json") is None


# The agent (unsandboxed: it can write the repository's .git) plants a hook in the repository's
# git directory, which its worktree shares. The run's own git runs it: beside the live run, under
# no keeper and with no run mark, it is a person to the operator socket, and nothing kills what
# it leaves.
HOOK = """#!/bin/sh
(
    sleep 0.3  # once git is done: the run waits for it
    {python} -c '{approve}' "$(cat {out}/control)" "$(cat {out}/pending)" >>{out}/hook.out 2>&1
    exec sleep 1000
) </dev/null >/dev/null 2>&1 &
echo $! >>{out}/hook.pids
"""
APPROVE = (
    "import json, socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
    "s.sendall(json.dumps(dict(command=chr(97)+chr(112)*2+chr(114)+chr(111)+chr(118)+chr(101), call_id=sys.argv[2], "
    "reason=chr(111)+chr(107), by=chr(97))).encode() + bytes([10])); s.shutdown(socket.SHUT_WR); print(s.recv(65536).decode())"
)  # `approve`, spelled without quotes: the hook's shell quotes the whole in ''
HOOK_ACTS_WITHIN_SECONDS = 5.0
PLANT_HOOKS = r"""
common=$(cd "$(git rev-parse --git-common-dir)" && pwd)
for name in post-checkout reference-transaction; do cp "$OUT/hook.sh" "$common/hooks/$name"; chmod 755 "$common/hooks/$name"; done
"$WFA" tool deploy >"$OUT/deploy.out" 2>&1
"""
PLANT_FILTER = r"""
common=$(cd "$(git rev-parse --git-common-dir)" && pwd)
git config filter.x.smudge "sh $OUT/hook.sh; cat" && echo "* filter=x" >>"$common/info/attributes"
"$WFA" tool deploy >"$OUT/deploy.out" 2>&1
"""


@pytest.mark.parametrize(
    "plant",
    [
        PLANT_HOOKS,
        PLANT_FILTER,  # the run's git checks worktree b out through no filter the repository's config names
    ],
    ids=["hooks", "filter"],
)
async def test_a_hook_an_agent_planted_neither_acts_as_a_person_nor_outlives_the_run(tmp_path: Path, plant: str) -> None:
    import os
    import signal
    import sys

    import anyio

    from agentswf import tool
    from agentswf.engine.record.layout import read_json

    from ..harnesses.kit import alive

    repo = make_repo(tmp_path)
    (tmp_path / "hook.sh").write_text(HOOK.format(python=sys.executable, out=tmp_path, approve=APPROVE))
    deploys: list[str] = []

    async def work(wf: Workflow) -> bool:
        a = await wf.agents.open(
            "a", runtime=agent(tmp_path, "a", plant), cwd=wf.worktree("a"),
            tools={"deploy": tool(lambda: deploys.append("x"), description="D.", requires_approval=True)},
        )  # fmt: skip
        async with anyio.create_task_group() as group:
            group.start_soon(a.run, "Deploy.")
            with anyio.fail_after(20):
                while not (pending := await wf.approvals.pending()):
                    await anyio.sleep(0.02)
            (tmp_path / "control").write_text(read_json(wf.run_dir / "run.json")["control"])
            (tmp_path / "pending").write_text(pending[0].call_id)
            wf.worktree("b")  # the workflow makes another worktree: git checks it out
            await anyio.sleep(HOOK_ACTS_WITHIN_SECONDS)
            still = [p.call_id for p in await wf.approvals.pending()] == [pending[0].call_id]
            if still:
                await wf.approvals.reject(pending[0].call_id, reason="not by a hook")
        return still

    try:
        result = await run_in(repo, work)
        assert result.outcome == "completed", result.reason
        assert deploys == [] and result.value, (tmp_path / "hook.out").read_text() if (tmp_path / "hook.out").exists() else ""
        pids = [int(pid) for pid in (tmp_path / "hook.pids").read_text().split()] if (tmp_path / "hook.pids").exists() else []
        assert [pid for pid in pids if alive(pid)] == [], "what the hook started outlived the run"
    finally:
        for pid in (int(p) for p in (tmp_path / "hook.pids").read_text().split()) if (tmp_path / "hook.pids").exists() else ():
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_manifest_an_agent_made_a_fifo_hangs_no_awf_worktrees(tmp_path: Path) -> None:
    """The record's worktrees directory is writable by an unsandboxed agent: a FIFO among the
    manifests (`<name>.json`) is no manifest, read by no one."""
    import os
    import subprocess
    import sys

    directory = tmp_path / "runs" / "wt" / "20261201-090020-fc66" / "worktrees"
    directory.mkdir(parents=True)
    os.mkfifo(directory / "w.json")
    (tmp_path / "runs" / "wt" / "20261201-090020-fc66" / "worktrees" / "x").mkdir()
    os.symlink("/dev/zero", directory / "z.json")
    for args in ([], ["--clean"]):
        done = subprocess.run(
            [sys.executable, "-m", "agentswf", "worktrees", "--run-root", str(tmp_path / "runs"), *args],
            cwd=tmp_path, capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


# The agent defines a clean filter for every path and touches its worktree's files, changing
# nothing: at the run's end the run's git reads the worktree's status (and `git worktree remove`
# checks it is clean with a status of its own), hashing each file whose stat changed through
# the repository's clean filter, the agent's command, beside the live run.
PLANT_CLEAN = r"""
common=$(cd "$(git rev-parse --git-common-dir)" && pwd)
git config filter.y.clean "touch $OUT/CLEANED; cat" && git config filter.y.process "touch $OUT/CLEANED"
echo "* filter=y" >>"$common/info/attributes" && echo "* filter=y" >.gitattributes.mine
git ls-files -z | xargs -0 touch
"""


async def test_the_runs_end_reads_and_removes_a_worktree_through_no_filter_an_agent_defined(tmp_path: Path) -> None:
    from ..worktrees.kit import registered

    repo = make_repo(tmp_path)
    result = await _one_agent(repo, tmp_path, PLANT_CLEAN + "rm .gitattributes.mine")
    assert result.value == "answered", result.reason
    [end] = result.worktrees
    assert end.state == "removed" and registered(repo) == [], end
    assert not (tmp_path / "CLEANED").exists(), "the run's git ran the agent's clean filter"
