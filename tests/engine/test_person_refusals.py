"""A refusal a person gets at `awf send` / `awf reply` names the person's commands, never `wfa`'s.

The message rules speak to an agent; `operator.for_a_person` rewrites their next step for a
person. Every refusal the rules can give a participant's post (never a question, always "in a
turn") is walked here with peers of any key an agent may have and persons of any key at all.
"""

from __future__ import annotations

import re
import shlex

from hypothesis import assume, given
from hypothesis import strategies as st

from agentswf.engine.mail.rules import QuestionView, RouteView, judge_reply, judge_send
from agentswf.engine.operator import for_a_person

AGENT_KEY = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-", min_size=1, max_size=12)
PERSON_KEY = st.text(alphabet=st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=12)
COMMAND = re.compile(r"\b(?:awf|wfa) (send|reply) ")


@st.composite
def posts(draw: st.DrawFn) -> tuple[str, str, str, object]:
    """(the person, the peer, "send" or "reply", the refusal), for any state the switchboard can be in."""
    person, peer = draw(PERSON_KEY), draw(AGENT_KEY)
    assume(person != peer and "wfa" not in person + peer)
    ends = draw(st.sampled_from([(person, peer), (peer, person)]))
    limit = draw(st.integers(1, 40))
    route = draw(st.none() | st.builds(
        RouteView, id=st.just("r1"), sender=st.just(ends[0]), receiver=st.just(ends[1]), both_ways=st.booleans(),
        purpose=st.just("p"), max_messages=st.just(limit), used=st.integers(0, limit), open=st.booleans(),
    ))
    size = draw(st.sampled_from([0, 10, 16 * 1024, 16 * 1024 + 1]))
    if draw(st.booleans()):
        sendable = route if route is not None and route.can(person) in ("send", "both") else None
        refusal = judge_send(
            sender=person, peer=peer, in_turn=True, route=sendable, any_route=route is not None,
            peer_state=draw(st.sampled_from([None, "not-started", "working", "idle", "awaiting-reply", "stopped"])),
            size=size, question=False, awaiting=None, can_await=False, waits={}, peer_unread=draw(st.integers(0, 20)),
        )
        return person, peer, "send", refusal
    owed = draw(st.none() | st.just(QuestionView("q1", peer, person, "r1", 100.0)))
    refusal = judge_reply(
        sender=person, peer=peer, in_turn=True, owed=owed, expired=draw(st.booleans()), route=route, size=size,
        question=False, awaiting=None, can_await=False, waits={}, closed_under=draw(st.booleans()),
    )
    return person, peer, "reply", refusal


@given(posts())
def test_no_refusal_told_to_a_person_names_a_wfa_command(post):
    person, peer, _, refusal = post
    assume(refusal is not None)
    told = for_a_person(refusal.message, person)
    assert "wfa" not in told, told
    for found in COMMAND.finditer(told):  # each command the person is given runs as written
        command = f"awf {found[1]} {shlex.quote(peer)} --as {shlex.quote(person)}"
        assert told.startswith(command, found.start()), told
        assert told[found.start() + len(command):][:1] in ("", ")", "."), told


def test_a_peer_key_ending_in_a_dot_keeps_it():
    told = for_a_person("b. asked you nothing open, or was answered already; to message it, use wfa send b..", "boss")
    assert told.endswith("use awf send b. --as boss.")


def test_a_person_whose_key_has_a_space_is_told_it_quoted():
    told = for_a_person("you can only reply to b (wfa reply b), not send it messages of your own.", "the boss")
    assert "(awf reply b --as 'the boss')" in told
