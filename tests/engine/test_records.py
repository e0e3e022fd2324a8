"""The run's record on disk: every file a run writes, and the torn-line rules of JSON lines."""

from __future__ import annotations

import os

import pytest

from agentswf.engine.record.layout import LineLog, append_line, read_json, read_lines, write_whole

from ..harnesses.kit import N, run_wf, shell_agent

pytestmark = pytest.mark.anyio


async def test_a_run_writes_its_whole_record(tmp_path):
    runtime = shell_agent(
        tmp_path,
        "agent",
        """
if [ "$WFA_TURN" = 1 ]; then
  "$WFA" result "$WFA_CALL_ID" --n many 2>/dev/null
  "$WFA" result "$WFA_CALL_ID" --n 4
fi
""",
    )

    async def fn(wf, args: dict):
        agent = await wf.agents.open("a", runtime=runtime)
        first = await agent.run("Count the files.", schema=N, timeout="10s")
        second = await agent.run("Count again.", schema=N, timeout="10s", nudge=False)
        wf.log("counted", n=first.value.n)
        return {"calls": [first.call_id, second.call_id], "n": first.value.n}

    result = await run_wf(fn, tmp_path, name="records", args={"why": "test"})
    assert result.completed, result.reason
    first, second = result.value["calls"]
    run_dir = result.run_dir
    assert run_dir == tmp_path / "runs" / "records" / result.run_id
    assert (tmp_path / "runs" / ".gitignore").read_text() == "*\n"

    run = read_json(run_dir / "run.json")
    assert run["run_id"] == result.run_id and run["workflow"] == "records" and run["args"] == {"why": "test"}
    assert run["cwd"] == str(tmp_path) and run["version"] == 1

    turns = list(read_lines(run_dir / "turns.jsonl"))
    assert [(t["call_id"], t["n"], t["outcome"]["kind"]) for t in turns] == [
        (first, 1, "answered"),
        (second, 2, "unanswered"),
    ]
    assert turns[0]["outcome"]["value"] == {"n": 4} and turns[0]["agent"] == "a"
    assert turns[0]["started_at"] <= turns[0]["ended_at"]

    call = read_json(run_dir / "calls" / first / "call.json")
    assert call["call_id"] == first and call["agent"] == "a" and call["n"] == 1
    assert "Count the files." in call["prompt"] and call["schema"]["properties"]["n"]["type"] == "integer"
    assert call["deadline_at"] is not None

    candidates = list(read_lines(run_dir / "calls" / first / "candidates.jsonl"))
    assert [(c["args"], c["accepted"]) for c in candidates] == [(["--n", "many"], False), (["--n", "4"], True)]
    assert "integer" in candidates[0]["error"]
    assert read_json(run_dir / "calls" / first / "result.json") == {"version": 1, "value": {"n": 4}}
    assert not (run_dir / "calls" / second / "result.json").exists()
    assert not (run_dir / "calls" / second / "candidates.jsonl").exists()

    [log] = list(read_lines(run_dir / "log.jsonl"))
    assert log["message"] == "counted" and log["fields"] == {"n": 4}

    out = read_json(run_dir / "output.json")
    assert out["outcome"] == "completed" and out["value"] == result.value and out["reason"] is None
    assert out["started_at"] <= out["ended_at"]


def test_a_torn_last_line_is_skipped_and_the_next_append_starts_fresh(tmp_path):
    path = tmp_path / "log.jsonl"
    append_line(path, {"a": 1})
    with open(path, "ab") as file:
        file.write(b'{"b": 2, "c"')  # a writer died mid-line
    assert list(read_lines(path)) == [{"a": 1}]
    append_line(path, {"d": 4})
    assert list(read_lines(path)) == [{"a": 1}, {"d": 4}]
    assert path.read_bytes().endswith(b'\n{"d":4}\n')


def test_read_lines_skips_what_is_not_an_object(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'[1]\n"s"\n\n{"ok": true}\nnot json\n')
    assert list(read_lines(path)) == [{"ok": True}]
    assert list(read_lines(tmp_path / "missing.jsonl")) == []


def test_write_whole_replaces_and_exclusive_refuses_a_second(tmp_path):
    path = tmp_path / "d" / "result.json"
    write_whole(path, b"1")
    write_whole(path, b"2")
    assert path.read_bytes() == b"2"
    with pytest.raises(FileExistsError):
        write_whole(path, b"3", exclusive=True)
    assert path.read_bytes() == b"2"
    assert sorted(p.name for p in path.parent.iterdir()) == ["result.json"]  # no temp file left


def test_a_link_or_a_fifo_in_a_logs_place_is_refused_not_followed_or_waited_on(tmp_path):
    """What an agent puts where the Recorder appends (it can write the record): a link to a
    file of the person's is not written through, and a FIFO is refused at once."""
    theirs = tmp_path / "bashrc"
    theirs.write_text("# the person's\n")
    (tmp_path / "linked.jsonl").symlink_to(theirs)
    os.mkfifo(tmp_path / "fifo.jsonl")
    for name in ("linked.jsonl", "fifo.jsonl"):
        with pytest.raises(OSError):
            LineLog(tmp_path / name).write(b'{"a":1}\n')
    assert theirs.read_text() == "# the person's\n"
