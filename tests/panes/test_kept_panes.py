"""`keep_pane`: a pane left after its run for a person to read, listed by `awf ls`, closed by
`awf attach --close`; released from the run (no `wfa`, no run mark), and nothing else left."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from agentswf import Runtime
from agentswf.cli.attach import find_pane
from agentswf.errors import DefinitionError
from agentswf.harnesses.keeper import MARK_VARIABLE
from agentswf.harnesses.pane_keep import close_kept, kept_panes, should_keep
from agentswf.harnesses.runtime import check_runtime

from .kit import needs, needs_tmux, processes_with
from .test_codex_pi_panes import nothing_left, run_pane


@pytest.fixture
def kept(tmp_path):
    """The kept panes this test leaves, closed whatever happens."""
    yield
    for pane in kept_panes():
        if pane.cwd.startswith(str(tmp_path)):
            close_kept(pane)


def test_a_pane_is_kept_always_or_when_its_last_turn_wasnt_answered():
    assert should_keep("always", "answered") and should_keep("always", None)
    assert should_keep("on-failure", "unanswered") and should_keep("on-failure", "timed-out")
    assert not should_keep("on-failure", "answered") and not should_keep("on-failure", None)
    assert not should_keep("never", "failed")


def test_keep_pane_needs_a_pane_and_one_of_its_words():
    with pytest.raises(DefinitionError, match="needs placement='pane'"):
        check_runtime(Runtime(harness="claude", keep_pane="always"))
    with pytest.raises(DefinitionError, match="keep_pane must be one of never, on-failure, always"):
        check_runtime(Runtime(harness="claude", placement="pane", keep_pane="sometimes"))  # type: ignore[arg-type]


def environ(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(pair.decode(errors="replace").split("=", 1) for pair in pairs if b"=" in pair)


@needs_tmux
@pytest.mark.parametrize(("cli", "policy", "scenario", "keeps"), [
    pytest.param("pi", "always", "answer", True, marks=needs("pi")),
    pytest.param("pi", "on-failure", "answer", False, marks=needs("pi")),
    pytest.param("pi", "on-failure", "silent-twice", True, marks=needs("pi")),
    pytest.param("codex", "always", "answer", True, marks=needs("codex")),  # resumed with --no-daemon too
])  # fmt: skip
async def test_a_kept_pane_is_listed_released_from_the_run_and_closed(cli, policy, scenario, keeps, tmp_path, kept):
    result, _ = await run_pane(cli, tmp_path, scenario, keep_pane=policy)
    if not keeps:
        nothing_left(tmp_path)
        return
    (pane,) = [pane for pane in kept_panes() if pane.cwd.startswith(str(tmp_path))]
    assert pane.agent == cli and pane.session == result.value[0]["session"]
    left = processes_with(tmp_path / "home")
    assert left  # the kept server and pi in it, resumed on the session
    assert all(MARK_VARIABLE not in environ(pid) and "WFA" not in environ(pid) for pid in left)

    awf = [sys.executable, "-m", "agentswf"]
    runs = str(tmp_path / "runs")
    listed = (await anyio.run_process([*awf, "ls", "--run-root", runs])).stdout.decode()
    run_id = result.run_dir.name
    assert f"awf attach {run_id} {cli}" in listed and f"awf attach --close {run_id} {cli}" in listed, listed

    assert find_pane(Path(runs), run_id, None) == Path(pane.socket)  # awf attach reaches it as it would a live one
    closed = await anyio.run_process([*awf, "attach", "--close", run_id, cli, "--run-root", runs])
    assert f"closed the kept pane of {cli}" in closed.stdout.decode()
    assert not [pane for pane in kept_panes() if pane.cwd.startswith(str(tmp_path))]
    nothing_left(tmp_path)
