"""Who may speak on the run's sockets, as a pure rule over a table of parents (hypothesis)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentswf.launcher.identity import (
    MAX_ANCESTRY_DEPTH,
    LiveAttempts,
    agent_refusal,
    ancestor_in,
    operator_refusal,
)

RUN = 100
NO_MARKS = {"run_mark": "awf-r", "mark_of": lambda pid: None}
PIDS = st.integers(min_value=2, max_value=60)
# A table of parents: any pid to any pid (loops included, as a faked or racing /proc could give).
TABLES = st.dictionaries(PIDS, st.integers(min_value=0, max_value=60), max_size=60)


def chain(pid: int, table: dict[int, int]) -> list[int]:
    """`pid` and its ancestors by the table, stopping at init, the table's end, or a loop."""
    seen: list[int] = []
    current: int | None = pid
    while current is not None and current > 1 and current not in seen:
        seen.append(current)
        current = table.get(current)
    return seen


@given(TABLES, PIDS, st.sets(PIDS, max_size=5))
def test_a_process_descends_from_a_root_exactly_when_its_chain_meets_it(table, pid, roots):
    found = ancestor_in(pid, roots, table.get)
    ancestry = chain(pid, table)
    expected = next((p for p in ancestry if p in roots), None)
    assert found == expected


def test_a_loop_in_the_table_ends_the_walk():
    assert ancestor_in(5, {9}, {5: 6, 6: 5}.get) is None
    deep = {pid: pid + 1 for pid in range(2, MAX_ANCESTRY_DEPTH + 10)}
    assert ancestor_in(2, {MAX_ANCESTRY_DEPTH + 5}, deep.get) is None  # past the walk's limit: refused


@given(TABLES, PIDS, st.sets(PIDS, max_size=5))
def test_an_agent_socket_admits_the_run_and_the_agents_own_processes_only(table, pid, roots):
    refusal = agent_refusal(pid, agent="a", run_pid=RUN, roots=roots, parent_of=table.get)
    assert (refusal is None) == (ancestor_in(pid, roots, table.get) is not None)
    assert agent_refusal(RUN, agent="a", run_pid=RUN, roots=roots, parent_of=table.get) is None


def test_with_no_live_attempt_only_the_run_is_admitted():
    table = {7: 5, 5: 3}
    refusal = agent_refusal(7, agent="a", run_pid=RUN, roots=set(), parent_of=table.get)
    assert refusal is not None and "a has no attempt running" in refusal
    assert agent_refusal(RUN, agent="a", run_pid=RUN, roots=set(), parent_of=table.get) is None


def test_an_unknown_peer_is_refused():
    assert "can't tell which process" in agent_refusal(None, agent="a", run_pid=RUN, roots={3}, parent_of={}.get)
    assert "can't tell which process" in operator_refusal(None, attempts={3: "a"}, parent_of={}.get, **NO_MARKS)


def test_a_sibling_is_refused_naming_the_socket_and_the_process():
    table = {20: 11, 11: 10, 30: 21, 21: 10}  # a's keeper 11, b's keeper 21, both under the run (10)
    refusal = agent_refusal(30, agent="a", run_pid=10, roots={11}, parent_of=table.get)
    assert refusal == (
        "this is a's socket, and process 30 isn't one of a's: nothing was done. "
        "Use the wfa launcher your own prompt gave you."
    )
    assert agent_refusal(20, agent="a", run_pid=10, roots={11}, parent_of=table.get) is None


@given(TABLES, PIDS, st.dictionaries(PIDS, st.sampled_from(["a", "b", "c"]), max_size=5))
def test_the_operator_socket_refuses_exactly_the_processes_of_live_attempts(table, pid, attempts):
    refusal = operator_refusal(pid, attempts=attempts, parent_of=table.get, **NO_MARKS)
    root = ancestor_in(pid, attempts, table.get)
    if root is None:
        assert refusal is None
    else:
        assert refusal is not None and f"agent {attempts[root]}'s" in refusal and "as a person" in refusal


@given(st.one_of(st.none(), st.sampled_from(["awf-r", "awf-r/1f2e", "awf-r/1f2e/x", "awf-rr", "awf-rr/1", "awf", ""])))
def test_a_stray_carrying_the_runs_mark_is_refused_at_the_operator_socket(mark):
    refusal = operator_refusal(7, attempts={}, parent_of={7: 1}.get, run_mark="awf-r", mark_of=lambda pid: mark)
    ours = mark is not None and (mark == "awf-r" or mark.startswith("awf-r/"))
    assert (refusal is not None) == ours
    if ours:
        assert "process 7 was started by one of the run's agents" in refusal


def test_live_attempts_are_kept_by_agent():
    live = LiveAttempts()
    live.add(11, "a")
    live.add(12, "a")
    live.add(21, "b")
    live.remove(12)
    live.remove(99)  # twice, or never added: nothing happens
    assert live.of("a") == {11} and live.of("b") == {21} and live.of("c") == set()
    assert live.roots == {11: "a", 21: "b"}


def test_live_attempts_by_agent_follow_every_add_and_remove():
    live = LiveAttempts()
    live.add(11, "a")
    live.add(11, "b")  # a pid given again (its keeper gone, the pid reused): now b's alone
    assert live.of("a") == frozenset() and live.of("b") == {11}
    live.remove(11)
    assert live.of("b") == frozenset() and live.roots == {}
    for pid in range(2, 2000):
        live.add(pid, f"agent{pid % 7}")
    assert live.of("agent3") == {pid for pid in range(2, 2000) if pid % 7 == 3}
