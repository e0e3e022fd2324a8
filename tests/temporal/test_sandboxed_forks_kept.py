"""A fork of a sandboxed agent whose home a Temporal worker keeps (`SandboxedHarness.fork_kept`): the
copy is placed only in a fork's home made for it, never in one there already (its agent may have
written it) nor through a link in its place. Run for real, with the CLIs on Temporal, in
test_sandboxed_forks.py."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from agentswf.harnesses.base import AttemptEnding, Operation, OperationResult
from agentswf.harnesses.claude import ClaudeHarness
from agentswf.launcher.place import sockets_root
from agentswf.sandbox.homes import prepare_home
from agentswf.sandbox.runner import FORK_DIR_PREFIX, KEPT_FORKS_NAME, Sandbox, SandboxedHarness
from agentswf.sandbox.spec import ResolvedSpec
from agentswf.workflow.sandboxes import kept_homes

pytestmark = pytest.mark.anyio
PROJECT = ".claude/projects/-work"


class ForkingClaude(ClaudeHarness):
    """claude's fork as the CLI leaves it: a new session's file beside the parent's, in the parent's home."""

    def __init__(self, home: Path) -> None:
        super().__init__("claude")
        self.home = home
        self.forks = 0

    async def fork(self, operation: Operation) -> OperationResult:
        self.forks += 1
        new = str(uuid.uuid4())
        (self.home / PROJECT / f"{new}.jsonl").write_text('{"copy": true}\n')
        return OperationResult(AttemptEnding("exited"), session=new)


def parent(tmp_path: Path) -> tuple[SandboxedHarness, ForkingClaude, Path]:
    homes = kept_homes(tmp_path / "worker", "review", "r1")
    spec = ResolvedSpec(cwd=tmp_path, read=(), write=(), network=())
    sandbox = Sandbox("box", spec, bwrap="bwrap", log=lambda message, **fields: None, record=tmp_path / "worker", homes=homes)
    home = homes / "lead"
    homes.mkdir(parents=True)
    assert prepare_home(home, "claude", {})
    (home / PROJECT).mkdir(parents=True)
    (home / PROJECT / f"{uuid.uuid4()}.jsonl").write_text('{"parent": true}\n')
    inner = ForkingClaude(home)
    harness = sandbox.confine("lead", inner)
    assert isinstance(harness, SandboxedHarness)
    return harness, inner, homes


def forking(tmp_path: Path) -> Operation:
    return Operation(agent="lead", kind="fork", session=str(uuid.uuid4()), cwd=tmp_path, env={})


async def test_the_copy_goes_into_the_forks_home_made_for_it_and_nothing_is_left_behind(tmp_path: Path) -> None:
    harness, inner, homes = parent(tmp_path)
    before = set(Path(sockets_root()).glob(f"{FORK_DIR_PREFIX}*"))
    result = await harness.fork_kept(forking(tmp_path), "alt", tmp_path)
    assert result.ending.kind == "exited" and result.session is not None, result.ending.reason
    assert (homes / "alt" / PROJECT / f"{result.session}.jsonl").read_text() == '{"copy": true}\n'
    assert not (homes / "lead" / PROJECT / f"{result.session}.jsonl").exists()  # moved out of the parent's
    assert not list((homes / KEPT_FORKS_NAME).iterdir())  # its staging placed
    assert set(Path(sockets_root()).glob(f"{FORK_DIR_PREFIX}*")) <= before  # the fork's own directory removed
    assert inner.forks == 1


async def test_a_forks_home_there_already_is_not_written_and_the_cli_never_runs(tmp_path: Path) -> None:
    harness, inner, homes = parent(tmp_path)
    (homes / "alt").mkdir(mode=0o700)  # the fork's, from its turns: its agent's to write
    result = await harness.fork_kept(forking(tmp_path), "alt", tmp_path)
    assert result.ending.kind == "failed" and "alt's home is on this worker already" in (result.ending.reason or "")
    assert inner.forks == 0 and not list((homes / "alt").iterdir())


async def test_a_link_in_the_forks_homes_place_is_not_written_through(tmp_path: Path) -> None:
    harness, inner, homes = parent(tmp_path)
    yours = tmp_path / "yours"
    yours.mkdir()
    (homes / "alt").symlink_to(yours)
    result = await harness.fork_kept(forking(tmp_path), "alt", tmp_path)
    assert result.ending.kind == "failed" and "could not be placed in the fork's home" in (result.ending.reason or "")
    assert inner.forks == 1 and not list(yours.iterdir()) and (homes / "alt").is_symlink()
    assert not list((homes / KEPT_FORKS_NAME).iterdir())  # the copy taken out is removed, not left staged
