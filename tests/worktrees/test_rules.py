"""`decide`, the pure rule of what becomes of a worktree: never removed with uncommitted work,
with an unreadable status, moved or replaced, or with commits its branch doesn't hold; a
branch deleted only at its base."""

from __future__ import annotations

from typing import get_args

from hypothesis import given
from hypothesis import strategies as st

from agentswf.workflow.worktrees import Keep, Place, Seen, decide

BASE, OTHER, THIRD = "b" * 40, "c" * 40, "d" * 40
commits = st.sampled_from([None, BASE, OTHER, THIRD])
seen = st.builds(
    Seen,
    place=st.sampled_from(get_args(Place)),
    dirty=st.sampled_from([None, False, True]),
    head=commits,
    tip=commits,
    commits=st.integers(0, 3),
    problem=st.sampled_from([None, "git said no"]),
)
keeps = st.sampled_from(get_args(Keep))


@given(keeps, seen, st.booleans())
def test_nothing_with_work_in_it_is_ever_removed(keep: Keep, found: Seen, cleaning: bool) -> None:
    plan = decide(keep, found, BASE, cleaning=cleaning)
    if found.place in ("moved", "replaced") or (found.place == "here" and found.dirty is not False):
        assert not plan.remove and not plan.delete_branch and plan.state == "kept"
    if plan.delete_branch:
        assert found.tip == BASE  # (update-ref checks it again when it deletes)
    if plan.remove:
        assert found.head is not None or found.place == "deleted"
        assert found.head in (None, BASE, found.tip)  # no commit only HEAD holds goes with the worktree
    if found.tip not in (None, BASE):
        assert not plan.delete_branch and plan.state != "removed"


@given(seen, st.booleans())
def test_keep_always_holds_an_unchanged_worktree_until_cleaning(found: Seen, cleaning: bool) -> None:
    plan = decide("always", found, BASE, cleaning=cleaning)
    if not cleaning and found.place == "here":
        assert not plan.remove


def test_the_table() -> None:
    clean = Seen("here", dirty=False, head=BASE, tip=BASE)
    committed = Seen("here", dirty=False, head=OTHER, tip=OTHER, commits=2)
    assert decide("on-change", clean, BASE).reason == "nothing changed"
    assert (decide("on-change", clean, BASE).remove, decide("on-change", clean, BASE).delete_branch) == (True, True)
    assert decide("always", clean, BASE).state == "kept"
    assert decide("always", clean, BASE, cleaning=True).state == "removed"
    assert (decide("on-change", committed, BASE).state, decide("on-change", committed, BASE).reason) == (
        "kept",
        "2 commits on its branch",
    )
    never = decide("never", committed, BASE)
    assert (never.remove, never.delete_branch, never.state) == (True, False, "branch-kept")
    detached = Seen("here", dirty=False, head=THIRD, tip=BASE)  # committed on a detached HEAD
    assert decide("never", detached, BASE).remove is False
    assert decide("on-change", Seen("here", dirty=True, head=BASE, tip=BASE), BASE).reason == "uncommitted changes"
    assert decide("on-change", Seen("gone", tip=BASE), BASE).delete_branch
    assert decide("on-change", Seen("gone"), BASE).reason == "nothing was left"
