"""What the named ACP runtimes add: their native binaries found, gemini's store mended before a load."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from agentswf.harnesses.acp import ANY_AGENT, AcpHarness
from agentswf.harnesses.acp_agents import GEMINI_MINUTE, OPENCODE, _platform, gemini_before_load, native_in
from agentswf.harnesses.acp_rpc import Permissions
from agentswf.harnesses.acp_turn import Turn

SESSION = "8ef847ca-549e-4c4d-90c6-47eadd57c43b"


def chats(home: Path) -> Path:
    folder = home / ".gemini" / "tmp" / "project" / "chats"
    folder.mkdir(parents=True)
    return folder


def test_a_gemini_session_written_this_minute_is_renamed_before_its_load(tmp_path):
    folder = chats(tmp_path)
    now = folder / f"session-{time.strftime(GEMINI_MINUTE)}-{SESSION[:8]}.jsonl"
    older = folder / f"session-2020-01-01T00-00-{SESSION[:8]}.jsonl"
    other = folder / f"session-{time.strftime(GEMINI_MINUTE)}-0000aaaa.jsonl"
    for path in (now, older, other):
        path.write_text(path.name)
    gemini_before_load(SESSION, {"HOME": str(tmp_path)})
    gemini_before_load(SESSION, {"HOME": str(tmp_path)})  # nothing left to rename: nothing replaced
    assert not now.exists() and older.exists() and other.exists()
    moved = [path for path in folder.iterdir() if path not in (older, other)]
    assert [path.read_text() for path in moved] == [now.name]
    assert moved[0].name.startswith("session-") and moved[0].suffix == ".jsonl"


def test_a_link_in_the_gemini_store_renames_nothing_where_it_points(tmp_path):
    """A sandboxed agent writes its home: a project folder or a session file linked out of it is passed over."""
    outside = tmp_path / "outside"
    outside.mkdir()
    name = f"session-{time.strftime(GEMINI_MINUTE)}-{SESSION[:8]}.jsonl"
    (outside / name).write_text("yours")
    folder = chats(tmp_path / "home")
    (folder.parent.parent / "linked").mkdir()
    (folder.parent.parent / "linked" / "chats").symlink_to(outside)
    (folder / name).symlink_to(outside / name)
    gemini_before_load(SESSION, {"HOME": str(tmp_path / "home")})
    assert (outside / name).read_text() == "yours" and (folder / name).is_symlink()


def test_a_session_id_that_isnt_one_renames_nothing(tmp_path):
    folder = chats(tmp_path)
    kept = folder / f"session-{time.strftime(GEMINI_MINUTE)}-abcdefgh.jsonl"
    kept.write_text("")
    gemini_before_load("*", {"HOME": str(tmp_path)})
    gemini_before_load("../../x", {"HOME": str(tmp_path)})
    assert kept.exists()


def test_an_npm_wrapper_is_swapped_for_its_platform_binary(tmp_path):
    modules = tmp_path / "node_modules"
    wrapper = modules / "@github" / "copilot" / "npm-loader.js"
    binary = modules / "@github" / f"copilot-{_platform()}" / "copilot"
    for path, head in ((wrapper, b"#!/usr/bin/env node\n"), (binary, b"\x7fELF\x02\x01")):
        path.parent.mkdir(parents=True)
        path.write_bytes(head)
        path.chmod(0o755)
    bin_link = modules / ".bin" / "copilot"
    bin_link.parent.mkdir()
    os.symlink("../@github/copilot/npm-loader.js", bin_link)
    native = native_in("@github/copilot-{platform}/copilot")
    assert native(str(bin_link)) == str(binary)
    assert native(str(binary)) == str(binary)  # already native (npm 11 hard-links some)
    binary.unlink()
    assert native(str(bin_link)) == str(bin_link)  # none found: the wrapper, which the keeper still stops


def test_opencodes_running_cost_is_taken_per_turn_and_a_process_total_as_it_is():
    def spent(harness: AcpHarness, cost: float) -> float | None:
        turn = Turn("/x/wfa", Permissions())
        turn.cost = cost
        usage = harness._usage("ses_1", {"stopReason": "end_turn"}, turn)
        return usage.cost_usd if usage is not None else None

    opencode, claude_adapter = AcpHarness(OPENCODE, ("opencode", "acp")), AcpHarness(ANY_AGENT, ("claude-agent-acp",))
    assert [spent(opencode, cost) for cost in (0.00075, 0.001131)] == [0.00075, pytest.approx(0.000381)]
    assert [spent(claude_adapter, cost) for cost in (0.02, 0.03)] == [0.02, 0.03]
