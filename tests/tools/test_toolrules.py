"""The pure decisions of a tool call's phases (engine/tools/rules.py), checked as properties."""

from __future__ import annotations

import math

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from agentswf.engine.record.lines import ApprovalDecision
from agentswf.engine.tools.call import tool_record
from agentswf.engine.tools.policy import REDACTED, Verdict
from agentswf.engine.tools.rules import (
    MAX_RAISED_FRAMES,
    MAX_TOOL_INPUT_BYTES,
    MAX_TOOL_RESULT_BYTES,
    UNRECORDED_CALL,
    Next,
    Raised,
    Read,
    Retry,
    Returned,
    Stopped,
    ToolOutcome,
    after_approval,
    after_attempt,
    after_policy,
    check_result,
    final,
    handler_ended,
    raised_at,
    read_input,
    settle,
)
from agentswf.wire import is_code
from agentswf.wire.teaching import Taught


class Item(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    count: int


ITEM = Taught(Item)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
kinds = st.sampled_from(["result", "failed", "timed-out", "refused"])
outcomes = st.builds(
    ToolOutcome,
    kinds,
    json_values,
    st.text(max_size=20),
    st.sampled_from(["", "raised", "denied", "rejected", "abandoned", "invalid-input"]),
)


# Read -------------------------------------------------------------------------------


@given(st.integers(min_value=0), st.text(max_size=20))
def test_an_input_that_fits_the_schema_is_read(count, id):
    given_input = msgspec.json.encode({"id": id, "count": count}).decode()
    read = read_input(ITEM, "count", [], given_input, "/x/wfa")
    assert read == Read(Item(id, count))


@given(st.text(max_size=40))
def test_an_input_that_doesnt_fit_is_invalid_input_with_the_tools_usage(text):
    try:
        msgspec.json.decode(text, type=Item)
        return  # it fits: not this property's case
    except (msgspec.DecodeError, msgspec.ValidationError):
        pass
    refusal = read_input(ITEM, "count", [], text, "/x/wfa")
    assert isinstance(refusal, ToolOutcome)
    assert (refusal.kind, refusal.code) == ("refused", "invalid-input")
    assert "The tool did not run" in refusal.error and "/x/wfa tool count" in refusal.error


@given(st.integers(min_value=-8, max_value=8))
def test_the_input_limit_is_on_its_bytes_as_given(over):
    size = MAX_TOOL_INPUT_BYTES + over
    read = read_input(Taught(str), "say", [], "é" * (size // 2) + "x" * (size % 2), "wfa")
    if over > 0:
        assert isinstance(read, ToolOutcome) and read.code == "invalid-input"
        assert f"{size} bytes, over the limit of {MAX_TOOL_INPUT_BYTES}" in read.error
    else:
        assert isinstance(read, Read)


# Policy and approval ----------------------------------------------------------------


@given(st.booleans(), st.booleans(), st.text(max_size=10))
def test_a_verdict_denies_or_sends_the_call_on(allowed, needs_approval, reason):
    step = after_policy(Verdict(allowed, reason, needs_approval))
    if not allowed:
        assert step == ToolOutcome("refused", error=reason, code="denied")
    else:
        assert step is (Next.APPROVAL if needs_approval else Next.RUN)


@given(st.none() | st.builds(ApprovalDecision, st.booleans(), st.text(max_size=10)), st.booleans())
def test_only_an_approval_runs_the_call(decision, turn_ended):
    step = after_approval(decision, turn_ended=turn_ended)
    if decision is not None and decision.approved:
        assert step is Next.RUN
    elif decision is None:
        assert isinstance(step, ToolOutcome) and step.kind == "timed-out" and "did not run" in step.error
        assert ("its turn ended" in step.error) == turn_ended
    else:
        assert step == ToolOutcome("refused", error=step.error, code="rejected")
        assert decision.reason in step.error


# Run ----------------------------------------------------------------------------------


@given(
    outcomes,
    st.integers(min_value=1, max_value=10),
    st.integers(min_value=1, max_value=10),
    st.floats(min_value=0, max_value=10),
    st.floats(min_value=0, max_value=100),
    st.floats(min_value=0, max_value=100) | st.just(math.inf),
    st.booleans(),
)
def test_a_retry_comes_only_after_a_raise_with_attempts_and_time_left(
    outcome, attempt, max_attempts, backoff, now, deadline, over
):
    step = after_attempt(
        outcome, attempt, max_attempts=max_attempts, backoff=backoff, now=now, deadline=deadline, over=over
    )
    if isinstance(step, Retry):
        assert outcome.kind == "failed" and outcome.code == "raised"
        assert attempt < max_attempts and not over
        assert step.pause == backoff * 2 ** (attempt - 1) and now + step.pause < deadline
    else:
        assert step == final(outcome) and step.code != "raised"  # the raise's code steers retries only


@given(json_values, st.floats(min_value=0, max_value=10), st.floats(min_value=0, max_value=10))
def test_a_handlers_return_after_its_time_is_too_late(value, now, deadline):
    outcome = handler_ended(Returned(value), now=now, deadline=deadline, output=None)
    if now >= deadline:
        assert outcome.kind == "timed-out" and "after its time ran out" in outcome.error
    else:
        assert outcome == ToolOutcome("result", value=msgspec.json.decode(msgspec.json.encode(value)))


@given(st.sampled_from([ValueError("bad"), ValueError(), KeyboardInterrupt(), SystemExit(3)]))
def test_whatever_a_handler_raises_fails_the_call_for_a_retry(error):
    outcome = handler_ended(Raised(error), now=0, deadline=1, output=None)
    assert (outcome.kind, outcome.code) == ("failed", "raised")
    assert outcome.error == (str(error) or type(error).__name__ if isinstance(error, Exception) else
                             f"the handler raised {error!r}")


def _deep(depth: int) -> None:
    if depth:
        _deep(depth - 1)
    raise KeyError("b")


def _caller(depth: int) -> BaseException:
    try:
        _deep(depth)
    except KeyError as error:
        return error
    raise AssertionError("no raise")


@given(st.integers(0, 12))
def test_where_a_handler_raised_is_its_type_and_innermost_frames_past_its_callers(depth):
    error = _caller(depth)
    kind, *frames = raised_at(error, own=(__file__,))
    assert kind == "KeyError" and frames == []  # every frame is the callers' own file here
    kind, *frames = raised_at(error, own=())
    assert len(frames) == min(depth + 2, MAX_RAISED_FRAMES)  # _caller, then each _deep, innermost last
    assert frames[-1] == f"{__file__}:{_deep.__code__.co_firstlineno + 3} in _deep"
    outcome = handler_ended(Raised(error), now=0, deadline=1, output=None, own=())
    assert outcome.raised == (kind, *frames) and outcome.error == "'b'"  # the agent's message unchanged
    assert final(outcome).raised == outcome.raised  # kept as the retry code is stripped


def test_a_handler_stopped_by_its_turns_end_may_have_run():
    outcome = handler_ended(Stopped(), now=0, deadline=1, output=None)
    assert outcome.kind == "timed-out" and "may have run" in outcome.error


# Check --------------------------------------------------------------------------------


@given(json_values)
def test_a_json_result_is_the_value_the_agent_reads(value):
    outcome = check_result(value, None)
    if len(msgspec.json.encode(value)) > MAX_TOOL_RESULT_BYTES:
        assert outcome.kind == "failed"
    else:
        assert outcome == ToolOutcome("result", value=value)


@given(st.sampled_from([{1, 2}, b"x", math.nan, {1: "a"}, [object()], {"k": math.inf}]))
def test_what_isnt_json_fails_the_call(value):
    outcome = check_result(value, None)
    assert outcome.kind == "failed" and "isn't JSON" in outcome.error


@given(st.integers(min_value=-4, max_value=4))
def test_the_result_limit_is_on_its_json_bytes(over):
    value = "x" * (MAX_TOOL_RESULT_BYTES - 2 + over)  # its JSON: the quotes too
    outcome = check_result(value, None)
    assert (outcome.kind == "failed") == (over > 0)


@given(st.integers(), st.text(max_size=8) | st.integers())
def test_a_result_must_fit_the_tools_output(count, id):
    outcome = check_result({"id": id, "count": count}, Item)
    assert (outcome.kind == "result") == isinstance(id, str)


# Settle -------------------------------------------------------------------------------


@given(outcomes, st.booleans())
def test_the_agent_is_told_only_what_is_on_the_record(outcome, recorded):
    response = settle(outcome, recorded=recorded)
    if not recorded:
        assert (response.ok, response.code, response.error) == (False, "internal-error", UNRECORDED_CALL)
    elif outcome.kind == "result":
        assert response.ok and response.value == outcome.value
    else:
        assert not response.ok
        code = outcome.code if outcome.kind == "refused" else outcome.kind
        assert response.code == (code if is_code(code) else "internal-error")  # a record's code that isn't the wire's
    expected = {"result": 0, "failed": 1, "timed-out": 4}.get(outcome.kind, 3) if recorded else 4
    if response.code != "internal-error":
        assert response.exit == expected


# The record ---------------------------------------------------------------------------

fields = st.frozensets(st.sampled_from(["id", "card", "secret"]), max_size=3)


def _record(**given: object) -> dict[str, object]:
    record = tool_record(
        call_id="c", turn_call_id="t", agent="a", tool="x", outcome="result", started_at=0, ended_at=1, **given
    )
    return msgspec.to_builtins(record)


def _keys_with(value: object, shown: str) -> set[str]:
    if isinstance(value, dict):
        found = {key for key, item in value.items() if item != REDACTED and key in ("id", "card", "secret")}
        return found | {key for item in value.values() for key in _keys_with(item, shown)}
    if isinstance(value, list):
        return {key for item in value for key in _keys_with(item, shown)}
    return set()


@given(json_values, json_values, fields)
def test_no_redacted_field_reaches_the_record_at_any_depth(input, result, redacted):
    record = _record(input=input, result=result, redacted=redacted)
    assert not _keys_with(record["input"], REDACTED) & redacted
    assert not _keys_with(record["result"], REDACTED) & redacted


@given(st.lists(st.text(max_size=8), max_size=3) | st.text(max_size=8), fields)
def test_an_unread_input_is_kept_only_when_no_field_is_sensitive(raw, sensitive):
    record = _record(input=raw, redacted=sensitive, read=False)
    assert record["input"] == (REDACTED if sensitive else raw)


@given(json_values)
def test_a_broken_policy_keeps_none_of_the_input(input):
    assert _record(input=input, redacted=None)["input"] == REDACTED
