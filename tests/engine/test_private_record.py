"""The record is the user's alone: every directory it makes 0700, every file 0600, whatever the umask."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agentswf import tool, workflow
from agentswf.engine.record.layout import LineLog, make_private_dirs, write_whole
from agentswf.testing import answer, run_workflow

pytestmark = pytest.mark.anyio


@pytest.fixture(params=[0o000, 0o022], ids=["umask-000", "umask-022"])
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


@tool(description="Echo a number.")
def echo(n: int) -> int:
    return n


@workflow(name="private", description="Writes every kind of record file.")
async def private(wf):
    wf.log("started", secret="a prompt")
    agent = await wf.agents.open("a", runtime="codex", tools={"echo": echo})
    return (await agent.run("Answer with a number.", timeout="30s", nudge=False, schema=int)).value


def modes(root: Path) -> dict[str, int]:
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for path in root.rglob("*"):
        found[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return found


async def test_the_record_is_private_whatever_the_umask(tmp_path, umask):
    async def play(turn):
        await turn.tool("echo", {"n": 1})
        await turn.result("not a number")  # refused: candidates.jsonl
        await turn.result(7)

    root = tmp_path / "new" / "runs"  # made by the run, so made private
    run = await run_workflow(private, agents={"a": answer(play)}, run_root=root)
    assert run.value == 7
    found = modes(tmp_path / "new")
    names = {Path(name).name for name in found}
    assert {"run.json", "turns.jsonl", "log.jsonl", "tools.jsonl", "call.json", "candidates.jsonl"} <= names
    assert {"result.json", "output.json", ".gitignore"} <= names
    for name, mode in found.items():
        wanted = 0o700 if (tmp_path / "new" / name).is_dir() else 0o600
        assert mode == wanted, f"{name} is {mode:o}, not {wanted:o}"


def test_the_writers_are_private_and_leave_what_exists_alone(tmp_path, umask):
    tmp_path.chmod(0o755)
    make_private_dirs(tmp_path / "a" / "b")
    write_whole(tmp_path / "a" / "c" / "x.json", b"{}")
    log = LineLog(tmp_path / "a" / "d" / "y.jsonl")
    log.append({"n": 1})
    log.close()
    assert stat.S_IMODE(tmp_path.stat().st_mode) == 0o755  # it existed: not the record's to change
    for name, mode in modes(tmp_path / "a").items():
        wanted = 0o700 if (tmp_path / "a" / name).is_dir() else 0o600
        assert mode == wanted, f"{name} is {mode:o}"
    with pytest.raises(FileExistsError):
        make_private_dirs(tmp_path / "a" / "b", exist_ok=False)
