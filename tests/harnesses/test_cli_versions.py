"""A CLI's version checked at a run's first use of it, for real: claude from npm behind wrappers
that say another version, offline, against the scripted model.

A wrapper answers `--version` with the version the test needs and runs the real claude for the
rest: below the minimum the agent's open fails, naming the version, the minimum and the install
command; above the newest tested the run warns once and goes on; run.json, the agents' sessions
lines and `awf logs` name each executable's version.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import anyio
import pytest

import agentswf
from agentswf import Runtime, workflow
from agentswf.cli.logs import print_run
from agentswf.engine.record.layout import read_json, read_lines
from agentswf.errors import DefinitionError
from agentswf.harnesses.cli_version import VERSION_TIMEOUT_SECONDS, read_version
from agentswf.harnesses.versions import shown
from agentswf.testing.models import Conversation, ScriptedModel, Shell, Text, claude_env, find_cli

from ..clis import TAUGHT, needs_clis, version_of

pytestmark = pytest.mark.anyio

REAL = find_cli("claude")
needs_claude = pytest.mark.skipif(REAL is None, reason="needs the claude CLI (.ci/run installs it)")


def wrapper(directory: Path, name: str, says: str, real: str | None = REAL) -> str:
    """An executable that answers `--version` with `says` and runs `real` for anything else."""
    path = directory / name
    path.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo "{says}"; exit 0; fi\nexec {real} "$@"\n')
    path.chmod(0o755)
    return str(path)


def answer_approve(conv: Conversation):
    found = TAUGHT.search(conv.prompt)
    if found is None:
        return Text("Nothing to do.")
    wfa, call = found.groups()
    return Shell(f"printf approve | {wfa} result {call}") if not conv.tool_results else Text("Done.")


@needs_claude
@needs_clis
async def test_below_the_minimum_the_open_fails_naming_the_version_the_minimum_and_the_install(tmp_path):
    old = wrapper(tmp_path, "claude-old", "2.1.300 (Claude Code)")
    async with ScriptedModel(answer_approve) as model:
        runtime = Runtime(harness="claude", command=(old,), env=claude_env(model, tmp_path / "home"))

        @workflow(name="old-cli", description="An agent on a claude older than the minimum.")
        async def flow(wf):
            with pytest.raises(DefinitionError) as refused:
                await wf.agents.open("a", runtime=runtime)
            return str(refused.value)

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    said = result.value
    for part in ("claude 2.1.300", "2.1.312", "npm install -g @anthropic-ai/claude-code@2.1.332", old):
        assert part in said, said
    assert model.requests == []  # refused at the open: no turn ran


@needs_claude
@needs_clis
async def test_a_newer_cli_is_warned_of_once_and_used_and_each_version_is_recorded(tmp_path):
    newer = wrapper(tmp_path, "claude-newer", "2.1.999 (Claude Code)")
    async with ScriptedModel(answer_approve) as model:
        env = claude_env(model, tmp_path / "home")

        @workflow(name="new-cli", description="Agents on the real claude and on a newer one.")
        async def flow(wf):
            real = await wf.agents.open("real", runtime=Runtime(harness="claude", command=(REAL,), env=env))
            ahead = [await wf.agents.open(key, runtime=Runtime(harness="claude", command=(newer,), env=env))
                     for key in ("ahead", "ahead-too")]
            turns = await wf.parallel([real, *ahead], lambda agent: agent.run("Approve it.", timeout=90))
            return [turn.value for turn in turns]

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    assert result.value == ["approve"] * 3  # the newer one was used
    warned = [line["message"] for line in read_lines(result.run_dir / "log.jsonl")]
    assert [line for line in warned if "newer" in line] == [
        f"claude 2.1.999 is newer than the newest version agentswf was tested with, 2.1.332; the run goes on with it ({newer})"
    ]  # once, for two agents on it; none for the real one
    real = shown(version_of("claude") or ())  # the real one's, whichever the tests run
    clis = read_json(result.run_dir / "run.json")["clis"]
    assert clis == [
        {"cli": "claude", "path": REAL, "agent": "real", "version": real},
        {"cli": "claude", "path": newer, "agent": "ahead", "version": "2.1.999"},
    ]
    versions = {line["agent"]: line.get("version") for line in read_lines(result.run_dir / "sessions.jsonl")}
    assert versions == {"real": real, "ahead": "2.1.999", "ahead-too": "2.1.999"}
    logs = io.StringIO()
    print_run(result.run_dir, logs)
    assert f"  claude {real}: {REAL}\n" in logs.getvalue() and f"  claude 2.1.999: {newer}\n" in logs.getvalue()


async def test_a_version_is_read_once_per_executable_and_modification_time(tmp_path):
    counted = tmp_path / "count"
    cli = tmp_path / "pi"
    cli.write_text(f'#!/bin/sh\necho x >>{counted}\necho 0.73.1 >&2\n')  # pi 0.x says it on standard error
    cli.chmod(0o755)
    env = {"PATH": os.defpath}
    first = await read_version("pi", str(cli), env, tmp_path)
    again = await read_version("pi", str(cli), env, tmp_path)
    assert first.version == again.version == (0, 73, 1)
    assert counted.read_text().count("x") == 1
    stat = cli.stat()
    os.utime(cli, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # updated in place
    await read_version("pi", str(cli), env, tmp_path)
    assert counted.read_text().count("x") == 2


@pytest.mark.virtual_time
async def test_a_version_that_doesnt_come_in_time_is_unknown_not_fatal(tmp_path):
    """The CLI is a real process that never answers: the clock jumps to the bound while it sleeps."""
    slow = tmp_path / "slow"
    slow.write_text("#!/bin/sh\nsleep 300\n")
    slow.chmod(0o755)
    started = anyio.current_time()
    with anyio.fail_after(VERSION_TIMEOUT_SECONDS + 1):
        timed_out = await read_version("pi", str(slow), {"PATH": os.defpath}, tmp_path)
    assert anyio.current_time() - started == pytest.approx(VERSION_TIMEOUT_SECONDS, abs=0.1)
    assert timed_out.version is None and f"no answer in {VERSION_TIMEOUT_SECONDS:g} s" in timed_out.problem


async def test_a_version_that_fails_is_unknown_not_fatal(tmp_path):
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\necho 'SyntaxError: no enableCompileCache' >&2\nexit 1\n")
    broken.chmod(0o755)
    failed = await read_version("pi", str(broken), {"PATH": os.defpath}, tmp_path)
    assert failed.version is None and "status 1" in failed.problem and "enableCompileCache" in failed.problem


async def test_what_a_cli_leaves_in_its_tmpdir_to_say_its_version_is_removed(tmp_path):
    """opencode makes `$TMPDIR/opencode` even for `--version`: the version is read with a
    temporary directory of its own, removed after, so nothing is left in the agent's `TMPDIR`."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    cli = tmp_path / "leaves"
    cli.write_text('#!/bin/sh\nmkdir -p "$TMPDIR/opencode" && echo 1.18.33\n')
    cli.chmod(0o755)
    found = await read_version("opencode", str(cli), {"PATH": os.defpath, "TMPDIR": str(tmp)}, tmp_path)
    assert found.version is not None and shown(found.version) == "1.18.33", found.problem
    assert list(tmp.iterdir()) == []
