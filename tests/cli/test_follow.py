"""`Follower`: a run's record read as it grows, each line once, a torn last line left for later."""

from __future__ import annotations

import json
import os
from pathlib import Path

from agentswf.cli.follow import Follower, Tally


def _append(path: Path, *lines: dict, torn: str = "") -> None:
    with path.open("a") as file:
        file.writelines(json.dumps(line) + "\n" for line in lines)
        file.write(torn)


def test_each_line_once_in_time_order_and_a_torn_line_on_the_next_poll(tmp_path: Path) -> None:
    (tmp_path / "calls" / "c1").mkdir(parents=True)
    (tmp_path / "calls" / "c1" / "call.json").write_text(
        json.dumps({"call_id": "c1", "agent": "a", "n": 1, "prompt": "Work.", "deadline_at": None})
    )
    os.utime(tmp_path / "calls" / "c1" / "call.json", (0.5, 0.5))  # a turn starts when its call.json is written
    (tmp_path / "calls" / "c2").mkdir()  # its call.json not written yet
    tool = {"agent": "a", "tool": "note", "input": {"text": "x"}, "outcome": "result", "started_at": 1.0, "ended_at": 1.1}
    _append(tmp_path / "tools.jsonl", tool)
    sent = {"event": "sent", "mail": {"id": "m1", "sender": "a", "to": "b", "text": "hi", "kind": "message", "at": 2.0}}
    _append(tmp_path / "messages.jsonl", sent, torn='{"event": "read", "message_id": "m1", "by"')
    decided = {"call_id": "t1", "tool": "rm", "agent": "a", "decision": {"approved": False, "reason": "no", "by": "ada"}, "at": 1.5}
    _append(tmp_path / "approvals.jsonl", decided)
    follower = Follower(tmp_path)
    first = follower.poll()
    assert [event.kind for event in first[1:]] == ["tool", "approval", "message"]  # by time, after the turn's start
    assert first[0].kind == "turn-started" and first[0].text == "turn 1 started: Work."
    assert first[2].text == "tool rm call t1 rejected by ada: no"
    assert follower.poll() == []
    _append(tmp_path / "messages.jsonl", torn=': "b", "at": 3.0}\n')
    turn = {"agent": "a", "call_id": "c1", "n": 1, "outcome": {"kind": "answered", "value": "ok"}, "ended_at": 4.0,
            "usage": {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.01}}
    _append(tmp_path / "turns.jsonl", turn)
    (tmp_path / "output.json").write_text(json.dumps({"outcome": "completed", "ended_at": 5.0}))
    second = follower.poll()
    assert [(event.kind, event.agent) for event in second] == [("read", "b"), ("turn-ended", "a"), ("run-ended", "")]
    assert second[1].text == "turn 1 ended answered (15 tokens, $0.0100)" and follower.ended
    tally = Tally()
    for event in first + second:
        tally.add(event)
    assert tally.tokens == 15 and tally.cost_usd == 0.01 and tally.agents["a"].state == "idle"
    assert tally.ended == "run completed"
