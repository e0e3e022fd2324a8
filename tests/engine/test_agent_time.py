"""Every wait's end and deadline an agent is told reads as a UTC time and the seconds left, beside its Unix ms."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from agentswf.engine import turn as t
from agentswf.engine.agent.text import check_in_text, peers_text
from agentswf.engine.agent_time import told, utc_text
from agentswf.engine.mail.words import Posted
from agentswf.wire import SendRequest, WaitingRequest

from .test_turn import NOBODY, WALL, at, begun, response

TOLD = re.compile(r"^(\d+) Unix ms \((\S+), (in (\d+) s|now)\)$")
MS = st.integers(min_value=0, max_value=4_102_444_800_000)  # up to 2100


@given(MS, MS)
def test_a_time_told_says_its_ms_its_utc_second_and_the_seconds_left(ms, now_ms):
    found = TOLD.match(told(ms, now_ms))
    assert found, told(ms, now_ms)
    assert int(found[1]) == ms
    assert datetime.fromisoformat(found[2]) == datetime.fromtimestamp(ms // 1000, UTC)
    left = round((ms - now_ms) / 1000)
    assert found[3] == (f"in {left} s" if left > 0 else "now")


def test_no_time_is_never():
    assert told(None, 0) == "never"


def test_a_granted_wait_says_when_it_ends_and_the_deadline_as_times_to_read():
    state = begun(deadline=1000.0)
    request = WaitingRequest(version=1, call_id="c1", reason="building", timeout_ms=60_000)
    _, effects = t.step(state, t.WaitingAsked(request, NOBODY, None, at(0)))
    until, deadline = int((WALL + 60) * 1000), int((WALL + 1000) * 1000)
    assert response(effects).stdout == (
        f"wfa: waiting granted until {until} Unix ms ({utc_text(until)}, in 60 s); "
        f"the turn's deadline is {deadline} Unix ms ({utc_text(deadline)}, in 1000 s).\n"
    )
    assert "2023-11-14T22:14:20+00:00" in response(effects).stdout  # WALL + 60, read off


def test_a_wait_for_a_reply_says_when_it_ends_as_a_time_to_read():
    state = begun(deadline=50.0)
    request = SendRequest(version=1, peer="b", message="q?", await_reply=True)
    _, effects = t.step(state, t.PostAnswered(request, 50.0, Posted("m1", "now"), NOBODY, at(20)))
    until = int((WALL + 50) * 1000)
    assert response(effects).stdout.endswith(f"; the wait ends at {until} Unix ms ({utc_text(until)}, in 30 s).\n")


def test_wfa_peers_says_until_when_the_agent_awaits_a_reply():
    table = {"peers": [], "owes": [], "awaits": {"peer": "b", "until": 1_700_000_090_000}}
    text = peers_text(table, now_ms=1_700_000_000_000)
    assert "you await b's reply until 1700000090000 Unix ms (2023-11-14T22:14:50+00:00, in 90 s).\n" in text
    no_end = peers_text({"peers": [], "owes": [], "awaits": {"peer": "b", "until": None}}, now_ms=0)
    assert "you await b's reply.\n" in no_end


def test_a_check_in_tells_the_deadline_as_the_same_utc_time():
    text = check_in_text(t.CheckIn("Are you still working?", 1_700_000_090_000))
    assert f"The fixed answer deadline is {utc_text(1_700_000_090_000)} (1700000090000 Unix ms)." in text
