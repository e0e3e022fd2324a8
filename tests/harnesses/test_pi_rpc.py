"""pi's compaction in `--mode rpc`: the answer read from its output, and, against stand-ins for pi
that fail, a failed operation saying why with nothing left running. (The real pi is driven in
tests/agents/test_real_cli_operations.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest

from agentswf.harnesses.base import Operation
from agentswf.harnesses.pi import PiCompactionReader, PiHarness

from .kit import alive


def line(event: dict) -> bytes:
    return msgspec.json.encode(event)


def test_only_the_answer_to_compact_counts_and_its_summary_is_the_value():
    reader = PiCompactionReader()
    reader.feed(line({"type": "compaction_end", "result": {"summary": "not the answer"}}))
    reader.feed(line({"type": "response", "command": "get_state", "success": True, "data": {"summary": "nor this"}}))
    assert not reader.finished and reader.summary is None
    reader.feed(line({"type": "response", "command": "compact", "success": True, "data": {"summary": "THE GIST"}}))
    assert reader.finished and reader.summary == "THE GIST"


@pytest.mark.parametrize(
    "answer, error",
    [
        ({"success": False, "error": "No model selected"}, "No model selected"),
        ({"success": True, "data": {"summary": 3}}, "without a summary"),
        ({"success": "yes", "data": {"summary": "x"}}, "without a summary"),
    ],
)
def test_a_failed_or_misshapen_answer_gives_no_summary(answer, error):
    reader = PiCompactionReader()
    reader.feed(line({"type": "response", "command": "compact", **answer}))
    assert reader.finished and reader.summary is None and error in (reader.error or "")


def stand_in(tmp_path: Path, body: str) -> PiHarness:
    script = tmp_path / "pi"
    script.write_text(f"#!/bin/sh\necho $$ >>{tmp_path}/pids\n{body}\n")
    script.chmod(0o755)
    return PiHarness(str(script))


@pytest.mark.anyio
@pytest.mark.parametrize(
    "body, said",
    [
        ('read -r line; echo "$line" >"$(dirname "$0")/sent"; echo "model gone" >&2; exit 1',
         "pi ended before it answered compact (the CLI's output ended): model gone"),
        ('read -r line; echo "$line" >"$(dirname "$0")/sent"; '
         'echo \'{"type":"response","command":"compact","success":false,"error":"Nothing to compact"}\'; sleep 1000',
         "pi did not compact: Nothing to compact"),
    ],
)
async def test_a_compaction_pi_fails_fails_saying_why_and_leaves_nothing(tmp_path, body, said):
    operation = Operation(agent="a", kind="compact", session="s-1", cwd=tmp_path, env=dict(os.environ), focus="FOCUS")
    result = await stand_in(tmp_path, body).compact(operation)
    assert result.ending.kind == "failed" and said in result.ending.reason
    assert msgspec.json.decode((tmp_path / "sent").read_text()) == {
        "id": "compact", "type": "compact", "customInstructions": "FOCUS"
    }
    assert [pid for pid in map(int, (tmp_path / "pids").read_text().split()) if alive(pid)] == []
