"""A sandboxed agent's home kept from one opening to the next (a Temporal worker's: each turn opens
the agent afresh): keyed by workflow, run and agent, so no other agent or run finds it; made once,
whole, and found again as its agent left it; never taken through a link. Run for real, with the
CLIs on Temporal, in tests/temporal/test_sandboxed_sessions.py."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from agentswf.harnesses.base import Operation
from agentswf.harnesses.claude import ClaudeHarness
from agentswf.sandbox.homes import found_home, home_name, prepare_home
from agentswf.sandbox.runner import Sandbox, SandboxedHarness
from agentswf.sandbox.spec import ResolvedSpec
from agentswf.workflow.sandboxes import kept_homes


def boxed(tmp_path: Path, homes: Path | None, agent: str = "a") -> SandboxedHarness:
    spec = ResolvedSpec(cwd=tmp_path, read=(), write=(), network=())
    sandbox = Sandbox("box", spec, bwrap="bwrap", log=lambda message, **fields: None, record=tmp_path, homes=homes)
    harness = sandbox.confine(agent, ClaudeHarness("claude"))
    assert isinstance(harness, SandboxedHarness)
    return harness


def test_a_kept_home_is_the_same_agents_of_the_same_run_and_no_one_elses(tmp_path: Path) -> None:
    root = tmp_path / "worker"
    run = kept_homes(root, "review", "r1")
    assert boxed(tmp_path, run, "lead").kept == root / "homes" / "review" / "r1" / "lead"
    assert boxed(tmp_path, run, "lead").with_settings("m", None).kept == run / "lead"  # type: ignore[attr-defined]
    others = {boxed(tmp_path, run, "other").kept, boxed(tmp_path, kept_homes(root, "review", "r2"), "lead").kept,
              boxed(tmp_path, kept_homes(root, "fix", "r1"), "lead").kept}
    assert len(others) == 3 and run / "lead" not in others
    assert boxed(tmp_path, None).kept is None  # locally: in the agent's directory, gone with the run
    assert kept_homes(root, "..", "../..") == root / "homes" / home_name("..") / home_name("../..")


@given(st.text(max_size=80), st.text(max_size=80))
def test_a_home_name_is_one_file_name_and_never_another_keys(one: str, other: str) -> None:
    for key in (one, other):
        name = home_name(key)
        assert name and "/" not in name and "\0" not in name and name not in (".", "..")
        assert len(name.encode()) <= 255
    assert (home_name(one) == home_name(other)) == (one == other)


def test_an_agent_key_is_its_homes_name_as_it_is() -> None:
    assert home_name("reviewer-2:fix.v1") == "reviewer-2:fix.v1"
    assert home_name(".hidden").startswith(".") and home_name(".hidden") != ".hidden"


def test_a_home_is_made_once_and_found_again_as_its_agent_left_it(tmp_path: Path) -> None:
    user = tmp_path / "user"
    (user / ".claude").mkdir(parents=True)
    (user / ".claude" / ".credentials.json").write_text('{"token": "first"}')
    home = tmp_path / "homes" / "a"
    home.parent.mkdir()
    assert prepare_home(home, "claude", {"HOME": str(user)}) is True
    session = home / ".claude" / "projects" / "p" / "s1.jsonl"
    session.parent.mkdir(parents=True)
    session.write_text("the first turn")  # what the agent's CLI wrote at its turn
    (user / ".claude" / ".credentials.json").write_text('{"token": "second"}')
    assert prepare_home(home, "claude", {"HOME": str(user)}) is False  # the next opening's
    assert session.read_text() == "the first turn"
    assert (home / ".claude" / ".credentials.json").read_text() == '{"token": "first"}'  # nothing written in it
    assert os.listdir(home.parent) == ["a"]  # made beside it, whole, then renamed: nothing left there


def test_a_link_or_a_file_in_a_homes_place_is_neither_taken_nor_written_through(tmp_path: Path) -> None:
    user = tmp_path / "user"
    (user / ".claude").mkdir(parents=True)
    (user / ".claude" / ".credentials.json").write_text('{"token": "t"}')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    homes = tmp_path / "homes"
    homes.mkdir()
    (homes / "linked").symlink_to(elsewhere)
    (homes / "file").write_text("not a home")
    for name in ("linked", "file"):
        assert not found_home(homes / name)
        try:
            prepare_home(homes / name, "claude", {"HOME": str(user)})
        except OSError:
            pass
        else:
            raise AssertionError(f"a home was taken in place of {name}")
    assert os.listdir(elsewhere) == [] and sorted(os.listdir(homes)) == ["file", "linked"]


async def test_a_compaction_needs_the_kept_home_and_a_forks_copy_a_turn_in_this_opening(tmp_path: Path) -> None:
    run = kept_homes(tmp_path / "worker", "wf", "r1")
    harness = boxed(tmp_path, run)
    launcher = tmp_path / "sockets" / "a0123" / "wfa"  # this opening's directory, not made: no turn in it yet
    compact = Operation(agent="a", kind="compact", session="s1", cwd=tmp_path, env={}, focus="x", launcher=launcher)
    result = await harness.compact(compact)
    assert result.ending.kind == "failed" and "no turn in its sandbox in this run" in (result.ending.reason or "")
    run.mkdir(parents=True)
    assert prepare_home(run / "a", "claude", {"HOME": str(tmp_path / "nobody")})  # an earlier opening's turn
    fork = Operation(agent="a", kind="fork", session="s1", cwd=tmp_path, env={}, launcher=launcher)
    result = await harness.fork(fork)
    assert result.ending.kind == "failed" and "no turn in its sandbox since it was opened" in (result.ending.reason or "")
