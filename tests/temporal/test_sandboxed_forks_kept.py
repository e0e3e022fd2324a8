"""A fork of a sandboxed agent whose home a Temporal worker keeps (`SandboxedHarness.fork_kept`): the
copy is placed only in a fork's home made for it: one there already (an earlier attempt's, its agent's
to write) is set aside unread, and a link in its place is neither followed nor taken. Run for real, with the CLIs on Temporal, in
test_sandboxed_forks.py."""

from __future__ import annotations

import json
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentswf.harnesses.base import AttemptEnding, Operation, OperationResult
from agentswf.harnesses.claude import ClaudeHarness
from agentswf.sandbox import runner
from agentswf.sandbox.homes import prepare_home
from agentswf.sandbox.runner import KEPT_FORKS_NAME, REPLACED_PREFIX, Sandbox, SandboxedHarness
from agentswf.sandbox.spec import ResolvedSpec
from agentswf.workflow.resume import sessions_on_record
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


@pytest.fixture(autouse=True)
def sockets(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory of sockets of the test's own (a fork's agent directory is made there), short enough."""
    made = Path(tempfile.mkdtemp(prefix="awf-test-sockets-"))
    monkeypatch.setattr(runner, "sockets_root", lambda: str(made))
    yield made
    shutil.rmtree(made)


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


async def test_the_copy_goes_into_the_forks_home_made_for_it_and_nothing_is_left_behind(tmp_path: Path, sockets: Path) -> None:
    harness, inner, homes = parent(tmp_path)
    result = await harness.fork_kept(forking(tmp_path), "alt", tmp_path)
    assert result.ending.kind == "exited" and result.session is not None, result.ending.reason
    assert (homes / "alt" / PROJECT / f"{result.session}.jsonl").read_text() == '{"copy": true}\n'
    assert not (homes / "lead" / PROJECT / f"{result.session}.jsonl").exists()  # moved out of the parent's
    assert not list((homes / KEPT_FORKS_NAME).iterdir())  # its staging placed
    assert not list(sockets.iterdir())  # the fork's own agent directory removed
    assert inner.forks == 1


async def test_a_forks_home_there_already_is_set_aside_unread_and_the_copy_goes_into_a_new_one(tmp_path: Path) -> None:
    harness, inner, homes = parent(tmp_path)
    (homes / "alt").mkdir(mode=0o700)  # an earlier attempt's fork of the key: its agent's to write
    (homes / "alt" / ".claude").symlink_to(tmp_path / "yours")  # planted: never written through
    result = await harness.fork_kept(forking(tmp_path), "alt", tmp_path)
    assert result.ending.kind == "exited" and result.session is not None, result.ending.reason
    assert (homes / "alt" / PROJECT / f"{result.session}.jsonl").is_file() and not (homes / "alt" / ".claude").is_symlink()
    aside = [path for path in homes.iterdir() if path.name.startswith(REPLACED_PREFIX)]
    assert len(aside) == 1 and (aside[0] / ".claude").is_symlink()  # as its agent left it
    assert not (tmp_path / "yours").exists() and inner.forks == 1


async def test_a_link_in_the_forks_homes_place_is_not_written_through(tmp_path: Path) -> None:
    harness, inner, homes = parent(tmp_path)
    yours = tmp_path / "yours"
    yours.mkdir()
    (homes / "alt").symlink_to(yours)
    result = await harness.fork_kept(forking(tmp_path), "alt", tmp_path)
    assert result.ending.kind == "failed" and "could not be placed in the fork's home" in (result.ending.reason or "")
    assert inner.forks == 1 and not list(yours.iterdir()) and (homes / "alt").is_symlink()
    assert not list((homes / KEPT_FORKS_NAME).iterdir())  # the copy taken out is removed, not left staged


def test_a_continued_runs_agent_resumes_its_own_session_not_its_forks_copy(tmp_path: Path) -> None:
    """A fork's line in turns.jsonl is the parent's (its agent) and names the copy's session: an agent
    opened again resumes the session of its own last turn (test_sandboxed_forks.py, for real)."""
    own, copy = str(uuid.uuid4()), str(uuid.uuid4())
    (tmp_path / "sessions.jsonl").write_text(json.dumps({"attempt": 1, "agent": "a", "harness": "claude"}) + "\n")
    (tmp_path / "turns.jsonl").write_text("".join(json.dumps(line) + "\n" for line in (
        {"agent": "a", "kind": "turn", "session": own}, {"agent": "a", "kind": "fork", "session": copy},
        {"agent": "alt", "kind": "turn", "session": copy},
    )))
    found = sessions_on_record(tmp_path)
    assert (found["a"].session, found["alt"].session) == (own, copy)
