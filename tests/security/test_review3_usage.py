"""A CLI's output is hostile (an agent writes into its own CLI's standard output through /proc):
a line of a known type with a field of another type must not make the attempt's accounting
raise (review 3). Raising there, the attempt is reported as a harness that broke, and the
spend its CLI did report goes uncounted: an agent that answered, then wrote one such line,
would spend past `--budget`. Real harnesses running stand-in CLIs (real processes)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agentswf.harnesses.base import Attempt
from agentswf.harnesses.claude import ClaudeHarness
from agentswf.harnesses.cli import CliHarness
from agentswf.harnesses.codex import CodexHarness
from agentswf.harnesses.pi import PiHarness

pytestmark = pytest.mark.anyio

SESSION = "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
LINES = {
    "claude": [
        {"type": "system", "subtype": "init", "session_id": SESSION, "model": ["claude-opus"]},
        {"type": "result", "session_id": SESSION, "usage": {"input_tokens": 500, "output_tokens": 70}, "total_cost_usd": 2.5},
    ],
    "pi": [
        {"type": "session", "id": SESSION},
        {"type": "message_end", "message": {"role": "assistant", "model": "m", "stopReason": "stop",
                                            "usage": {"input": 500, "output": 70, "cost": {"total": 2.5}}}},
        {"type": "message_end", "message": {"role": "assistant", "model": {"forged": True}, "stopReason": "stop"}},
        {"type": "agent_end"},
    ],
    "codex": [
        {"type": "thread.started", "thread_id": SESSION},
        {"type": "turn.completed", "usage": {"input_tokens": 500, "output_tokens": 70}},
        {"type": "turn.failed", "error": {"message": ["not", "text"]}},
    ],
}
HARNESSES: dict[str, type[CliHarness]] = {"claude": ClaudeHarness, "pi": PiHarness, "codex": CodexHarness}


@pytest.mark.parametrize("name", sorted(LINES))
async def test_a_field_of_another_type_in_a_known_line_doesnt_lose_the_turns_spend(tmp_path: Path, name: str) -> None:
    script = tmp_path / name
    printed = "\n".join(json.dumps(line) for line in LINES[name])
    script.write_text(f"#!/bin/sh\ncat >/dev/null\ncat <<'EOF'\n{printed}\nEOF\n")
    script.chmod(0o755)
    harness = HARNESSES[name](str(script))
    attempt = Attempt("a", "c1", 1, False, "Do it.", tmp_path / "wfa", tmp_path, dict(os.environ), None)
    result = await harness.run(attempt)
    assert result.usage is not None and (result.usage.input_tokens, result.usage.output_tokens) == (500, 70), result
    assert result.usage.model is None or isinstance(result.usage.model, str)
    assert result.ending.reason is None or isinstance(result.ending.reason, str)
