"""Each CLI harness: its command lines, how it reads the CLI's output, and how an attempt ends.

The real CLIs run end to end in tests/harnesses/test_real_clis.py; here their output is
fed line by line, as the harness reads it, from shapes measured on the pinned versions.
cursor-agent can't be installed here: a stand-in that prints its documented output shape
plays it through a real run.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

import agentswf
from agentswf import Runtime, workflow
from agentswf.harnesses.base import Attempt
from agentswf.harnesses.claude import ClaudeHarness
from agentswf.harnesses.codex import CodexHarness
from agentswf.harnesses.pi import PiHarness
from agentswf.harnesses.process import Exited
from agentswf.harnesses.usage import Usage


def attempt(session: str | None = None) -> Attempt:
    return Attempt("a", "c1", 1, False, "Do it.", Path("/tmp/x/wfa"), Path("/tmp"), {}, session)


def feed(reader, *events: dict) -> None:
    for event in events:
        reader.feed(json.dumps(event).encode())


def test_claude_command_lines():
    harness = ClaudeHarness("/bin/claude", model="sonnet", effort="high", args=("--bare",))
    assert harness.argv(attempt()) == [
        "/bin/claude", "-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions",
        "--model", "sonnet", "--effort", "high", "--bare",
    ]
    assert harness.argv(attempt("s-1"))[6:8] == ["--resume", "s-1"]
    assert harness.stdin(attempt()) == b"Do it."


def test_claude_reads_session_usage_and_errors():
    harness = ClaudeHarness("/bin/claude")
    reader = harness.reader(attempt())
    feed(
        reader,
        {"type": "system", "subtype": "init", "session_id": "s-1"},
        {"type": "assistant", "message": {}},
        {"type": "result", "subtype": "success", "is_error": False, "session_id": "s-1", "total_cost_usd": 0.01,
         "usage": {"input_tokens": 101, "output_tokens": 7, "cache_read_input_tokens": 3, "cache_creation_input_tokens": 2}},
    )
    assert reader.session == "s-1" and reader.finished
    assert reader.usage == Usage(101, 7, 3, 2, 0.01)
    assert harness.ending(Exited(0, "", ""), reader).kind == "exited"
    failing = harness.reader(attempt())
    feed(failing, {"type": "result", "subtype": "success", "is_error": True, "api_error_status": 529, "result": "Overloaded"})
    ending = harness.ending(Exited(1, "", ""), failing)
    assert ending.kind == "failed" and ending.retryable and "Overloaded" in ending.reason


def test_a_login_failure_fails_for_good_and_says_what_to_run():
    harness = ClaudeHarness("/bin/claude")
    reader = harness.reader(attempt())
    feed(reader, {"type": "result", "is_error": True, "api_error_status": 401, "result": "Invalid API key"})
    ending = harness.ending(Exited(1, "", ""), reader)
    assert ending.kind == "failed" and not ending.retryable
    assert "isn't logged in" in ending.reason and "/login" in ending.reason


def test_codex_command_lines_and_output():
    harness = CodexHarness("/bin/codex", model="gpt-5.5", effort="low")
    first = harness.argv(attempt())
    assert first[:2] == ["/bin/codex", "exec"] and first[-1] == "-"
    assert "--dangerously-bypass-approvals-and-sandbox" in first and 'model_reasoning_effort="low"' in first
    assert harness.argv(attempt("t-1"))[2:4] == ["resume", "t-1"]
    reader = harness.reader(attempt())
    feed(
        reader,
        {"type": "thread.started", "thread_id": "t-1"},
        {"type": "turn.started"},
        {"type": "turn.completed", "usage": {"input_tokens": 50, "cached_input_tokens": 10, "output_tokens": 5}},
    )
    assert reader.session == "t-1" and reader.usage == Usage(50, 5, 10, None, None)
    assert harness.ending(Exited(0, "", ""), reader).kind == "exited"
    failed = harness.reader(attempt())
    feed(failed, {"type": "turn.failed", "error": {"message": "stream disconnected"}})
    assert harness.ending(Exited(1, "", ""), failed).kind == "failed"


def test_pi_sums_usage_and_reads_an_api_error_despite_exit_0():
    harness = PiHarness("/bin/pi", effort="minimal")
    assert harness.argv(attempt("p-1")) == ["/bin/pi", "--mode", "json", "--session", "p-1", "--thinking", "minimal", "Do it."]
    assert harness.stdin(attempt()) == b""
    reader = harness.reader(attempt())
    usage = {"input": 10, "output": 2, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.5}}
    feed(
        reader,
        {"type": "session", "version": 3, "id": "p-1"},
        {"type": "message_end", "message": {"role": "assistant", "usage": usage, "stopReason": "toolUse"}},
        {"type": "message_end", "message": {"role": "assistant", "usage": usage, "stopReason": "stop"}},
        {"type": "agent_end"},
    )
    assert reader.session == "p-1" and reader.usage == Usage(20, 4, 0, 0, 1.0)
    assert harness.ending(Exited(0, "", ""), reader).kind == "exited"
    broken = harness.reader(attempt())
    feed(broken, {"type": "message_end", "message": {"role": "assistant", "stopReason": "error", "errorMessage": "500"}},
         {"type": "agent_end"})
    assert harness.ending(Exited(0, "", ""), broken).kind == "failed"


def test_output_that_cant_be_read_is_never_success():
    harness = CodexHarness("/bin/codex")
    reader = harness.reader(attempt())
    reader.feed(b"not json at all")
    ending = harness.ending(Exited(0, "not json at all", ""), reader)
    assert ending.kind == "failed" and "couldn't be read" in ending.reason


class Verdict(msgspec.Struct):
    verdict: str


CURSOR_STANDIN = """#!/bin/sh
# Stands in for cursor-agent: what its documented headless mode prints, one JSON object.
echo "$@" >>"$OUT/argv"
cat >/dev/null
"$WFA" result "$WFA_CALL_ID" --verdict "ok" >/dev/null
echo '{"type":"result","subtype":"success","is_error":false,"session_id":"cur-1","result":"done"}'
"""


@pytest.mark.anyio
async def test_cursor_through_a_real_run_with_a_stand_in_cli(tmp_path):
    cli = tmp_path / "cursor-agent"
    cli.write_text(CURSOR_STANDIN)
    cli.chmod(0o755)

    @workflow(name="cursor", description="Two turns on cursor.")
    async def flow(wf):
        agent = await wf.agents.open("c", runtime=Runtime(harness="cursor", model="gpt-5-high", env={"OUT": str(tmp_path)}))
        first = await agent.run("One.", schema=Verdict, timeout="20s")
        second = await agent.run("Two.", schema=Verdict, timeout="20s")
        return [first.value.verdict, second.value.verdict, second.session]

    result = await agentswf.run(flow, run_root=tmp_path / "runs", env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert result.outcome == "completed", result.reason
    assert result.value == ["ok", "ok", "cur-1"]
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv[0] == "-p --output-format json --force --model gpt-5-high"
    assert argv[1] == "-p --output-format json --force --resume cur-1 --model gpt-5-high"
