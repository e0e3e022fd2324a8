"""Review 4: `awf pending` of a run on Temporal prints a tool call's input as the agent wrote it.

The local `awf pending` shows every control character of what it prints as its escape
(review 3, `cli/shown.py`); its Temporal branch (`cli/temporal.command_pending`) printed the
input through `msgspec.json.encode`, which escapes C0 controls but leaves a right-to-left
override (U+202E) and CSI as one C1 character (U+009B) raw, so an agent's input could reorder
or rewrite what a person reads before approving the call. The workflow's query is given here
(the printing is what is tested; the query's own round trip is tests/temporal's, with a server).
"""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from agentswf.cli import temporal

CONTROLS = ("\x1b", "\u202e", "\x9b")
HOSTILE = {"target": "staging\u202e \x9b2J\x1b[2K"}


def test_awf_pending_of_a_temporal_run_shows_a_calls_input_not_obeys_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def query(run: dict[str, Any], name: str, arg: Any, *, update: bool, by: str = "") -> Any:
        return [{"call_id": "c1", "agent": "a", "tool": "deploy", "input": HOSTILE, "reason": "why\u202e"}]

    monkeypatch.setattr(temporal, "_ask", query)
    assert temporal.command_pending(argparse.Namespace(), {}) == 0
    printed = capsys.readouterr()
    assert "staging" in printed.out and "c1" in printed.out, printed.out
    assert [char for char in CONTROLS if char in printed.out + printed.err] == [], printed.out
