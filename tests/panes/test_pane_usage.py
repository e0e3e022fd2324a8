"""A pane turn's usage, read from its TUI's session file: rows as claude 2.1.332, codex 0.171.0 and
pi 0.73.1 write them (captured from a pane), each response counted once, hostile rows ignored."""

from __future__ import annotations

import json
import math
import os

from hypothesis import given
from hypothesis import strategies as st

from agentswf.harnesses.pane_usage import MAX_USAGE_LINE_BYTES, lines_usage, row_usage, usage_since
from agentswf.harnesses.usage import Usage

CLAUDE = {
    "type": "assistant", "uuid": "a32ca7f9", "parentUuid": "fc65c7f3",
    "message": {"id": "msg_198c", "model": "claude-opus-5-5", "usage": {
        "input_tokens": 100, "cache_creation_input_tokens": 3, "cache_read_input_tokens": 7, "output_tokens": 20,
        "output_tokens_details": {"thinking_tokens": 0}}},
}
CODEX_TURN = {  # as codex writes it as its turn begins, its instructions left out
    "type": "turn_context", "payload": {"turn_id": "01a232bc-97f4", "root_turn_id": "01a232bc-97f4", "cwd": "/w",
        "approval_policy": "never", "model": "gpt-5.5", "comp_hash": "2911", "summary": "none"},
}
CODEX = {
    "type": "token_usage_record", "payload": {"turn_id": "01a232bc-97f4", "response_id": "resp_e488", "usage": {
        "input_tokens": 100, "cached_input_tokens": 40, "cache_write_input_tokens": 0, "output_tokens": 20},
        "turn_token_usage": {"input_tokens": 999}, "thread_token_usage": {"input_tokens": 9999}},
}
PI = {
    "type": "message", "id": "ab077fc1", "parentId": "a6658602",
    "message": {"role": "assistant", "model": "fake-model", "usage": {
        "input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.25}}},
}


def lines(*rows: object) -> bytes:
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


def test_each_clis_rows_give_the_responses_usage():
    assert lines_usage(lines(CLAUDE)) == Usage(100, 20, 7, 3, model="claude-opus-5-5")
    assert lines_usage(lines(CODEX)) == Usage(100, 20, 40, 0)  # the response's own, not the running totals
    assert lines_usage(lines(PI)) == Usage(100, 20, 0, 0, 0.25, model="fake-model")


def test_a_codex_turns_model_is_the_one_its_turn_context_row_names():
    assert lines_usage(lines(CODEX_TURN, CODEX)) == Usage(100, 20, 40, 0, model="gpt-5.5")
    other = {**CODEX_TURN, "payload": {**CODEX_TURN["payload"], "turn_id": "another"}}
    assert lines_usage(lines(other, CODEX)) == Usage(100, 20, 40, 0)  # another turn's model is not this one's
    for forged in ({"model": ["gpt-5"]}, {"model": ""}, {"turn_id": 7}):
        row = {**CODEX_TURN, "payload": {**CODEX_TURN["payload"], **forged}}
        assert lines_usage(lines(row, CODEX)) == Usage(100, 20, 40, 0), forged  # no model, no crash


def test_a_response_written_as_several_rows_counts_once_and_others_add_up():
    second = {**CLAUDE, "uuid": "b1", "message": {**CLAUDE["message"], "id": "msg_2"}}
    assert lines_usage(lines(CLAUDE, CLAUDE, second)) == Usage(200, 40, 14, 6, model="claude-opus-5-5")


def test_rows_without_usage_a_line_being_written_and_hostile_rows_count_nothing():
    user = {"type": "user", "uuid": "u", "message": {"content": "hi", "usage": {"input_tokens": 5}}}
    forged = {**CLAUDE, "message": {**CLAUDE["message"], "id": "m3", "usage": {"input_tokens": "9", "output_tokens": -1}}}
    deep = b"[" * 10_000 + b"]" * 10_000 + b"\n"
    huge = b'{"type": "assistant", "pad": "' + b"x" * MAX_USAGE_LINE_BYTES + b'"}\n'
    data = lines(user, forged) + deep + huge + b"not json\n" + json.dumps(PI).encode()  # the last line unfinished
    assert lines_usage(data) == Usage(model="claude-opus-5-5")  # forged counts are no counts
    assert lines_usage(lines(user)) is None


def test_a_turns_usage_is_what_the_file_gained_since_it_began(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(lines(CLAUDE))
    begun = path.stat().st_size
    with open(path, "ab") as file:
        file.write(lines(PI))
    assert usage_since(path, begun) == Usage(100, 20, 0, 0, 0.25, model="fake-model")
    assert usage_since(tmp_path / "missing.jsonl", 0) is None and usage_since(None, 0) is None


@given(st.binary(max_size=2000))
def test_no_bytes_crash_the_reader(data):
    lines_usage(data)


def test_a_session_file_an_agent_made_a_fifo_is_read_as_no_usage_without_blocking(tmp_path):
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    assert usage_since(fifo, 0) is None  # an open() of it would wait for a writer: the run's loop with it


def test_a_cost_past_every_float_counts_as_unknown():
    endless = lines(PI).replace(b'"total": 0.25', b'"total": 1e999')  # JSON past every float
    found = lines_usage(endless)
    assert found is None or found.cost_usd is None
    row = {**PI, "message": {**PI["message"], "usage": {**PI["message"]["usage"], "cost": {"total": math.inf}}}}
    assert row_usage(row) == ("ab077fc1", Usage(100, 20, 0, 0, None, model="fake-model"))
