"""The workflow's board decides as the local switchboard does (mailrules), as plain state:
questions, replies, budgets, loops, closing, expiry. No server is needed: it is pure."""

from __future__ import annotations

import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from agentswf.engine.mail.switchboard import Posted
from agentswf.engine.rules import Refusal
from agentswf.temporal.board import WorkflowBoard


def board(keys: tuple[str, ...] = ("a", "b", "c")) -> tuple[WorkflowBoard, list[str], list[tuple[str, float]]]:
    ids = itertools.count()
    woken: list[str] = []
    timers: list[tuple[str, float]] = []
    made = WorkflowBoard(now=lambda: 100.0, new_id=lambda: f"m{next(ids)}", on_mail=woken.append,
                         on_question=lambda question, until: timers.append((question, until)))
    for key in keys:
        made.register(key, "agent")
    made.register("person", "participant", can_await=False)
    return made, woken, timers


def post(made: WorkflowBoard, sender: str, peer: str, *, reply: bool = False, question: bool = False,
         until: float = math.inf) -> Posted | Refusal:
    return made.post(sender=sender, peer=peer, text="x", reply=reply, question=question, until=until, in_turn=True)


def test_a_question_is_owed_answered_once_and_its_reply_wakes_the_asker() -> None:
    made, woken, timers = board()
    assert made.open_route("a", "b", "Ask", False, 40) == "r1"
    asked = post(made, "a", "b", question=True, until=160.0)
    assert isinstance(asked, Posted) and asked.read == "now, in a turn of its own" and woken == ["b"]
    assert timers == [(asked.message_id, 160.0)]
    assert made.standing("a").awaits == "b" and made.standing("b").owes == ("a",)
    refused = post(made, "b", "a")  # b can only reply on a's route
    assert isinstance(refused, Refusal) and refused.code == "no-route"
    assert [mail.text for mail in made.take("b")] == ["x"]
    assert isinstance(post(made, "b", "a", reply=True), Posted) and woken == ["b", "a"]
    again = post(made, "b", "a", reply=True)
    assert isinstance(again, Refusal) and again.code == "none-owed"
    assert made.standing("a").awaits is None and made.views["r1"].used == 2
    assert [line["event"] for line in made.lines] == ["sent", "read", "sent"]


def test_an_expired_question_tells_its_asker_and_a_late_reply_is_refused() -> None:
    made, _, _ = board()
    made.open_route("a", "b", "Ask", False, 40)
    asked = post(made, "a", "b", question=True, until=110.0)
    assert isinstance(asked, Posted)
    made.expire(asked.message_id)
    [notice] = made.take("a")
    assert notice.kind == "notice" and "b did not reply in time" in notice.text
    late = post(made, "b", "a", reply=True)
    assert isinstance(late, Refusal) and late.code == "expired"


def test_a_closed_route_ends_its_questions_and_refuses_sends() -> None:
    made, _, _ = board()
    made.open_route("a", "b", "Ask", False, 40)
    post(made, "a", "b", question=True)
    made.close_route("r1")
    assert made.take("a")[0].kind == "notice"
    closed = post(made, "a", "b")
    assert isinstance(closed, Refusal) and closed.code == "closed"
    late = post(made, "b", "a", reply=True)
    assert isinstance(late, Refusal) and late.code == "closed"


def test_a_participant_cannot_await_and_an_agent_stopping_ends_what_it_owes() -> None:
    made, _, _ = board()
    made.open_route("person", "a", "Talk", True, 40)
    refused = post(made, "person", "a", question=True)
    assert isinstance(refused, Refusal) and refused.code == "unsupported"
    made.open_route("b", "a", "Ask", False, 40)
    post(made, "b", "a", question=True)
    made.stopped("a", "its agent was closed")
    notice = made.take("b")[0]
    assert notice.kind == "notice" and "a stopped: its agent was closed" in notice.text
    gone = post(made, "person", "a")
    assert isinstance(gone, Refusal) and gone.code == "peer-stopped"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from("abcd"), st.booleans(), st.booleans()), max_size=40))
def test_no_sequence_of_posts_admits_a_loop_of_waits_or_overspends_a_route(
    posts: list[tuple[str, str, bool, bool]],
) -> None:
    made, _, _ = board(("a", "b", "c", "d"))
    for a, b in itertools.combinations("abcd", 2):
        made.open_route(a, b, "Talk", True, 6)
    for sender, peer, reply, question in posts:
        post(made, sender, peer, reply=reply, question=question)
        waits = {q.asker: q.askee for q in made.questions.values() if q.open}
        for start in waits:  # each agent awaits one reply at most: a chain, never a loop back to itself
            seen, current = {start}, waits[start]
            while current in waits:
                assert current not in seen
                seen.add(current)
                current = waits[current]
        assert all(0 <= view.used <= view.max_messages for view in made.views.values())
