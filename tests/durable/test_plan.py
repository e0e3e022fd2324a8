"""The stage plan and the look-ahead's stand-ins, as pure functions: no run, no files."""

from __future__ import annotations

import datetime
import enum
import uuid
from typing import Annotated, Literal

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentswf.engine.record.attempts import StageRecord
from agentswf.workflow import stages as plan

NAMES = ["plan", "build", "check", "ship"]


def record(name: str) -> StageRecord:
    return StageRecord(stage=name, attempt=1, started_at=0.0, ended_at=1.0, value=name)


@given(
    entered=st.lists(st.sampled_from(NAMES), unique=True),
    recorded=st.sets(st.sampled_from(NAMES)),
    rerun=st.none() | st.sampled_from(NAMES),
)
def test_a_continue_reuses_until_its_start_point_and_runs_everything_after(entered, recorded, rerun):
    started = False
    for name in entered:
        decision = plan.enter(
            name, recorded=record(name) if name in recorded else None, started=started, from_stage=None, rerun=rerun, values=None
        )
        if started:
            assert decision == plan.Run(start=False)
        elif name == rerun or name not in recorded:
            assert decision == plan.Run(start=True)  # the start point: the first that runs
            started = True
        else:
            assert decision == plan.Reuse(record(name))  # a recorded stage before the start never runs


@given(entered=st.lists(st.sampled_from(NAMES), unique=True, min_size=1), values=st.none() | st.dictionaries(st.sampled_from(NAMES), st.integers()))
def test_before_from_stage_nothing_runs(entered, values):
    start = entered[-1]
    for name in entered[:-1]:
        decision = plan.enter(name, recorded=None, started=False, from_stage=start, rerun=None, values=values)
        if values is None:
            assert decision == plan.Need()
        elif name in values:
            assert decision == plan.Provide(values[name])
        else:
            assert decision == plan.Missing()
    assert plan.enter(start, recorded=None, started=False, from_stage=start, rerun=None, values=values) == plan.Run(True)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Inner(msgspec.Struct):
    tags: Annotated[list[str], msgspec.Meta(min_length=2)]
    when: datetime.datetime


class Outer(msgspec.Struct):
    name: Annotated[str, msgspec.Meta(min_length=3, max_length=5)]
    count: Annotated[int, msgspec.Meta(gt=4, multiple_of=3)]
    ratio: Annotated[float, msgspec.Meta(ge=0.5)]
    inner: Inner
    color: Color
    kind: Literal["a", "b"]
    maybe: int | None = None
    pair: tuple[int, str] = (0, "")


class Cat(msgspec.Struct, tag="cat"):
    lives: Annotated[int, msgspec.Meta(le=-2)]


class Dog(msgspec.Struct, tag="dog"):
    good: bool


@pytest.mark.parametrize(
    "kind",
    [Outer, Cat | Dog, list[Outer], dict[str, int], uuid.UUID, datetime.date, str, int, bool, None | int, tuple[Inner, ...]],
)
def test_a_stand_in_fits_its_type(kind):
    value = plan.decode_value(plan.stand_in(kind), kind)
    msgspec.json.encode(value)


def test_a_stand_in_is_the_smallest_the_schema_allows():
    value = plan.decode_value(plan.stand_in(Outer), Outer)
    assert (value.name, value.count, value.ratio, value.inner.tags, value.kind) == ("xxx", 6, 0.5, ["", ""], "a")


def test_a_schema_without_a_stand_in_is_refused_by_its_check():
    pattern = Annotated[str, msgspec.Meta(pattern="^[0-9]+$")]
    with pytest.raises(msgspec.ValidationError):
        plan.decode_value(plan.stand_in(pattern), pattern)


@pytest.mark.parametrize("name,ok", [("plan", True), ("fix-2", True), ("Plan", False), ("2fix", False), ("", False), ("a/b", False), ("x" * 65, False)])
def test_stage_names(name, ok):
    assert plan.is_stage_name(name) is ok
