"""The harness side of operations, without a CLI: what claude's and pi's output readers take from it."""

from __future__ import annotations

import msgspec

from agentswf.harnesses.claude import ClaudeCompactionReader, summary_of
from agentswf.harnesses.pi import PiReader, PiStateReader


def line(event: dict) -> bytes:
    return msgspec.json.encode(event)


def test_claudes_summary_is_taken_from_the_row_after_the_compact_boundary():
    reader = ClaudeCompactionReader()
    reader.feed(line({"type": "user", "message": {"content": "before: not a summary"}}))
    reader.feed(line({"type": "system", "subtype": "compact_boundary"}))
    content = "The summary below covers it.\n\n<system-reminder>\n</system-reminder>\nTHE GIST\n\nIf you need specific details, read x"
    reader.feed(line({"type": "user", "message": {"content": content}}))
    reader.feed(line({"type": "user", "message": {"content": "<local-command-stdout>Compacted </local-command-stdout>"}}))
    assert reader.compacted and reader.summary == "THE GIST"
    assert summary_of("plain text") == "plain text"


def test_without_a_boundary_claude_did_not_compact():
    reader = ClaudeCompactionReader()
    reader.feed(line({"type": "user", "message": {"content": "THE GIST"}}))
    assert not reader.compacted and reader.summary is None


def test_a_pi_session_resumed_by_its_file_stays_named_by_it():
    by_file = PiReader("/store/--elsewhere--/2026_abc.jsonl")
    by_file.feed(line({"type": "session", "id": "abc"}))
    assert by_file.session == "/store/--elsewhere--/2026_abc.jsonl"
    by_id = PiReader()
    by_id.feed(line({"type": "session", "id": "abc"}))
    assert by_id.session == "abc"


def test_pis_fork_reads_only_a_successful_get_state_naming_a_session_file():
    reader = PiStateReader()
    reader.feed(line({"type": "response", "command": "get_state", "success": False, "data": {"sessionFile": "a.jsonl"}}))
    reader.feed(line({"type": "response", "command": "get_state", "success": True, "data": {"sessionFile": "/etc/passwd"}}))
    assert reader.file is None
    reader.feed(line({"type": "response", "command": "get_state", "success": True, "data": {"sessionFile": "/s/x.jsonl"}}))
    assert reader.file == "/s/x.jsonl"
