"""An attempt's own usage out of a CLI's running totals: `since`, and a harness's totals by session."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentswf.harnesses.codex import CodexHarness
from agentswf.harnesses.usage import Usage, add_usage, since

counts = st.one_of(st.none(), st.integers(min_value=0, max_value=10**9))
usages = st.builds(Usage, counts, counts, counts, counts, st.none())
ALL = frozenset({"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"})


@given(usages, usages)
def test_a_turn_on_top_of_the_totals_before_it_is_what_it_added(before: Usage, own: Usage) -> None:
    reported = add_usage(before, own)
    assert reported is not None
    delta = since(reported, before, ALL)
    for name in ALL:
        if getattr(own, name) is not None:
            assert getattr(delta, name) == getattr(own, name), name


@given(usages, usages)
def test_what_isnt_a_running_total_is_taken_as_reported(before: Usage, reported: Usage) -> None:
    assert since(reported, before, frozenset()) == reported
    assert since(reported, None, ALL) == reported


def test_a_total_below_the_last_is_a_count_begun_anew() -> None:
    assert since(Usage(input_tokens=50), Usage(input_tokens=400), ALL) == Usage(input_tokens=50)


def test_a_cost_total_is_taken_off_and_tokens_that_arent_totals_stay() -> None:
    delta = since(Usage(input_tokens=100, cost_usd=0.0016), Usage(input_tokens=100, cost_usd=0.0008), frozenset({"cost_usd"}))
    assert delta.input_tokens == 100 and abs((delta.cost_usd or 0) - 0.0008) < 1e-12


def test_a_harness_keeps_each_sessions_totals_apart() -> None:
    harness = CodexHarness("/bin/codex")
    assert harness._own("a", Usage(input_tokens=100)) == Usage(input_tokens=100)
    assert harness._own("b", Usage(input_tokens=30)) == Usage(input_tokens=30)  # another session: its own count
    assert harness._own("a", Usage(input_tokens=250)) == Usage(input_tokens=150)
    assert harness._own("a", None) is None  # reported nothing: the totals stay
    assert harness._own("a", Usage(input_tokens=260)) == Usage(input_tokens=10)
    assert harness._own(None, Usage(input_tokens=7)) == Usage(input_tokens=7)  # no session: nothing to take off
