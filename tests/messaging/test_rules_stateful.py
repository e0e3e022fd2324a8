"""The wait-for graph and owes-reply rules, as a hypothesis state machine.

It drives the real Switchboard actor (agents registered without refs, so nothing runs) and
checks every answer against a small independent model: no cycle is ever admitted, each agent
awaits at most one reply, budgets hold, and every owed reply is answered, refused or expired.
"""

from __future__ import annotations

import itertools
import math

import anyio
import anyio.from_thread
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from agentswf.actors import Actor, Supervisor, handler
from agentswf.engine.mail import rules as mailrules
from agentswf.engine.mail.rules import QuestionView, RouteView
from agentswf.engine.mail.switchboard import (
    DropAwait,
    GiveUp,
    OpenRouteRequest,
    Post,
    Register,
    Standing,
    Switchboard,
    TakeMail,
    _Expire,
)
from agentswf.engine.record.lines import MessageRead, MessageSent
from agentswf.engine.rules import Refusal

KEYS = ("a", "b", "c", "d")
BUDGET = 12  # small, so the limit is reached too


class NullRecorder(Actor):
    """Records nothing, and says each line was written (the switchboard sends only what is recorded)."""

    @handler
    def sent(self, msg: MessageSent) -> bool:
        return True

    @handler
    def read(self, msg: MessageRead) -> bool:
        return True


async def _host(*, task_status) -> None:
    """A supervisor with a switchboard (and a recorder that records nothing), until told to stop."""
    stop = anyio.Event()
    async with Supervisor("test") as supervisor:
        recorder = supervisor.spawn(NullRecorder, capacity=256)
        board = supervisor.spawn(Switchboard, supervisor, recorder.ask, capacity=256)
        task_status.started((board, stop))
        await stop.wait()


def reaches(waits: dict[str, str], start: str, target: str) -> bool:
    seen = set()
    while start in waits and start not in seen:
        seen.add(start)
        start = waits[start]
        if start == target:
            return True
    return False


class Board(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.portal_cm = anyio.from_thread.start_blocking_portal()
        self.portal = self.portal_cm.__enter__()
        self.hosted, (self.board, self.stop) = self.portal.start_task(_host)
        # the model
        self.waits: dict[str, str] = {}
        self.ids: dict[str, str] = {}  # asker -> its open question's id
        self.dropped: set[tuple[str, str]] = set()
        self.used = {frozenset(pair): 0 for pair in itertools.combinations(KEYS, 2)}
        self.unread = dict.fromkeys(KEYS, 0)
        self.notices: dict[str, int] = dict.fromkeys(KEYS, 0)
        self.seen: set[str] = set()  # askers whose open question its askee has read

    def ask(self, message):
        return self.portal.call(self.board.ask, message)

    def teardown(self) -> None:
        try:
            # Every agent reads its mail, then ends its turn owing, after its reminder: every open question ends.
            for key in KEYS:
                self.read(key)
            for key in KEYS:
                owed_before = [asker for asker, askee in self.waits.items() if askee == key]
                self.portal.call(self.board.tell, GiveUp(key))
                for asker in owed_before:
                    del self.waits[asker]
                    self.notices[asker] += 1
            for key in KEYS:
                standing = self.ask(Standing(key))
                assert standing.owes == () and standing.awaits is None
            for key in KEYS:
                notices = [m for m in self.ask(TakeMail(key)) if m.kind == "notice"]
                assert len(notices) == self.notices[key], key
        finally:
            self.portal.call(self.stop.set)
            self.hosted.result(timeout=10)
            self.portal_cm.__exit__(None, None, None)

    @initialize()
    def open_routes(self) -> None:
        for key in KEYS:
            self.ask(Register(key=key, kind="agent"))
        for a, b in itertools.combinations(KEYS, 2):
            assert isinstance(self.ask(OpenRouteRequest(sender=a, receiver=b, purpose=f"{a} and {b}", both_ways=True, max_messages=BUDGET)), str)

    # What the model predicts ---------------------------------------------------------

    def _question_refusal(self, sender: str, peer: str, waits: dict[str, str]) -> str | None:
        if sender in waits:
            return "already-awaiting"
        if reaches(waits, peer, sender):
            return "cycle"
        return None

    def _deliver(self, peer: str) -> None:
        self.unread[peer] += 1

    @rule(sender=st.sampled_from(KEYS), peer=st.sampled_from(KEYS), question=st.booleans())
    def send(self, sender: str, peer: str, question: bool) -> None:
        answer = self.ask(Post(sender=sender, peer=peer, text="hello", reply=False, question=question, until=math.inf, in_turn=True))
        pair = frozenset((sender, peer))
        if sender == peer:
            expected = "no-route"
        else:
            expected = self._question_refusal(sender, peer, self.waits) if question else None
            cost = 2 if question else 1
            if expected is None and BUDGET - self.used[pair] < cost:
                expected = "limit"
            if expected is None and self.unread[peer] >= mailrules.MAX_UNREAD_MESSAGES:
                expected = "inbox-full"
        got = answer.code if isinstance(answer, Refusal) else None
        assert got == expected, (sender, peer, question, answer)
        if expected is None:
            self.used[pair] += 2 if question else 1
            self._deliver(peer)
            if question:
                self.waits[sender] = peer
                self.ids[sender] = answer.message_id
                self.dropped.discard((sender, peer))
                self.seen.discard(sender)

    @rule(sender=st.sampled_from(KEYS), peer=st.sampled_from(KEYS), back=st.booleans())
    def reply(self, sender: str, peer: str, back: bool) -> None:
        answer = self.ask(Post(sender=sender, peer=peer, text="an answer", reply=True, question=back, until=math.inf, in_turn=True))
        pair = frozenset((sender, peer))
        owed = self.waits.get(peer) == sender
        if not owed:
            expected = "expired" if (peer, sender) in self.dropped else "none-owed"
        elif back:
            answered = {k: v for k, v in self.waits.items() if k != peer}  # this reply answers peer's question
            expected = self._question_refusal(sender, peer, answered)
            if expected is None and BUDGET - self.used[pair] < 2:
                expected = "limit"
        else:
            expected = None
        got = answer.code if isinstance(answer, Refusal) else None
        assert got == expected, (sender, peer, back, answer, self.waits)
        if expected is None:
            del self.waits[peer]
            if peer not in self.seen:
                self.unread[sender] -= 1  # answered before it was read: the question's mail goes
            self.seen.discard(peer)
            self._deliver(peer)
            if back:
                self.used[pair] += 2
                self.waits[sender] = peer
                self.ids[sender] = answer.message_id
                self.dropped.discard((sender, peer))
                self.seen.discard(sender)

    @rule(asker=st.sampled_from(KEYS), back=st.booleans())
    def answer_an_open_question(self, asker: str, back: bool) -> None:
        """The askee of an open question replies (often asking back): the likely case, made likely here."""
        if asker in self.waits:
            self.reply(self.waits[asker], asker, back)

    @rule(asker=st.sampled_from(KEYS))
    def expire(self, asker: str) -> None:
        """The asker's wait runs out: it is told there is no answer; a late reply is refused expired."""
        if asker not in self.waits:
            return
        self.ask(_Expire(self.ids[asker]))
        self.dropped.add((asker, self.waits.pop(asker)))
        self.seen.discard(asker)
        self.notices[asker] += 1
        self._deliver(asker)

    @rule(asker=st.sampled_from(KEYS))
    def finish_with_result(self, asker: str) -> None:
        """`wfa result` while awaiting: the wait is dropped, with no notice."""
        self.portal.call(self.board.tell, DropAwait(asker))
        if asker in self.waits:
            self.dropped.add((asker, self.waits.pop(asker)))
            self.seen.discard(asker)

    @rule(askee=st.sampled_from(KEYS))
    def give_up(self, askee: str) -> None:
        """The askee ended its turn owing, after its reminder: the askers whose question it read hear there is no
        answer; a question it hasn't read yet waits for its next turn."""
        self.portal.call(self.board.tell, GiveUp(askee))
        for asker in [k for k, v in self.waits.items() if v == askee and k in self.seen]:
            self.seen.discard(asker)
            self.dropped.add((asker, self.waits.pop(asker)))
            self.notices[asker] += 1
            self._deliver(asker)

    @rule(key=st.sampled_from(KEYS))
    def read(self, key: str) -> None:
        mail = self.ask(TakeMail(key))
        assert len(mail) == self.unread[key]
        self.notices[key] -= sum(1 for m in mail if m.kind == "notice")
        self.unread[key] = 0
        self.seen.update(asker for asker, askee in self.waits.items() if askee == key)

    # What always holds ---------------------------------------------------------------

    @invariant()
    def the_board_agrees_with_the_model(self) -> None:
        if not hasattr(self, "board"):
            return
        real_waits = {}
        for key in KEYS:
            standing = self.ask(Standing(key))
            assert standing.awaits == self.waits.get(key), key
            assert sorted(standing.owes) == sorted(a for a, b in self.waits.items() if b == key), key
            for asker in standing.owes:
                assert asker not in real_waits, "an agent awaits two replies"
                real_waits[asker] = key
        for key in real_waits:
            assert not reaches(real_waits, key, key), f"a cycle through {key}: {real_waits}"
        assert all(used <= BUDGET for used in self.used.values())


BoardTest = Board.TestCase
BoardTest.settings = settings(
    max_examples=40, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


class PureRules(RuleBasedStateMachine):
    """judge_question and judge_send alone: whatever is asked, the graph stays a set of chains."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: dict[str, str] = {}

    @rule(asker=st.sampled_from(KEYS), askee=st.sampled_from(KEYS), can_await=st.booleans())
    def ask(self, asker: str, askee: str, can_await: bool) -> None:
        refusal = mailrules.judge_question(
            asker, askee, awaiting=self.waits.get(asker), can_await=can_await, waits=self.waits
        )
        if refusal is None:
            self.waits[asker] = askee
        elif asker in self.waits:
            assert refusal.code == "already-awaiting"
        elif not can_await:
            assert refusal.code == "unsupported"
        else:
            assert refusal.code == "cycle" and (asker == askee or reaches(self.waits, askee, asker))

    @rule(askee=st.sampled_from(KEYS), asker=st.sampled_from(KEYS), room=st.integers(0, 3))
    def answer(self, askee: str, asker: str, room: int) -> None:
        owed = self.waits.get(asker) == askee
        view = RouteView("r", asker, askee, True, "p", 3, used=3 - room)
        question = QuestionView("q", asker, askee, "r", math.inf) if owed else None
        refusal = mailrules.judge_reply(
            sender=askee, peer=asker, in_turn=True, owed=question, expired=False, route=view, size=1,
            question=False, awaiting=None, can_await=True, waits=self.waits,
        )
        if owed:
            assert refusal is None  # a question reserved its reply: a plain reply never meets the limit
            del self.waits[asker]
        else:
            assert refusal is not None and refusal.code == "none-owed"

    @invariant()
    def no_cycle_and_one_wait_each(self) -> None:
        for key in self.waits:
            assert not reaches(self.waits, key, key)


PureRulesTest = PureRules.TestCase
PureRulesTest.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)


@pytest.mark.parametrize(
    ("size", "code"), [(mailrules.MAX_MESSAGE_BYTES, None), (mailrules.MAX_MESSAGE_BYTES + 1, "too-large")]
)
def test_judge_send_size_boundary(size, code):
    view = RouteView("r", "a", "b", False, "p", 40)
    refusal = mailrules.judge_send(
        sender="a", peer="b", in_turn=True, route=view, any_route=True, peer_state="idle", size=size,
        question=False, awaiting=None, can_await=True, waits={}, peer_unread=0,
    )
    assert (refusal.code if refusal else None) == code


def test_judge_send_checks_in_the_documented_order():
    """A request with everything wrong is refused for the first thing: not in a turn."""
    base = dict(
        sender="a", peer="b", in_turn=False, route=RouteView("r", "a", "b", False, "p", 1, used=1, open=False),
        any_route=True, peer_state="stopped", size=10**6, question=True, awaiting="c", can_await=False,
        waits={"b": "a"}, peer_unread=16,
    )
    order = [
        ("no-operation", "in_turn", True),
        ("peer-stopped", "peer_state", "idle"),
        ("closed", "route", RouteView("r", "a", "b", False, "p", 1, used=1)),
        ("too-large", "size", 5),
        ("already-awaiting", "awaiting", None),
        ("unsupported", "can_await", True),
        ("cycle", "waits", {}),
        ("limit", "route", RouteView("r", "a", "b", False, "p", 2)),
        ("inbox-full", "peer_unread", 15),
    ]
    for code, field, fixed in order:
        refusal = mailrules.judge_send(**base)
        assert (refusal.code if refusal else None) == code, field
        base[field] = fixed
    assert mailrules.judge_send(**base) is None
    assert mailrules.judge_send(**{**base, "route": None}).code == "no-route"
    assert mailrules.message_cost(True) == 2 and mailrules.message_cost(False) == 1
