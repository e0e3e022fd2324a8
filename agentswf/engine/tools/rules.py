"""A tool call's phases as pure decisions: read, check, policy, approval, run, settle.

The ToolBroker is their shell: it carries each decision out (asks the approval desk, runs
the handler, waits out a backoff, records, tells the agent) and brings back what happened.
Nothing here does I/O, reads a clock or awaits; time comes in as arguments, so every rule
of a call's life can be checked on its own (tests/tools/test_toolrules.py).

    read      the input, as given, within MAX_TOOL_INPUT_BYTES and fitting the tool's schema
    policy    the verdict of the tool's settings and the workflow's policies (policy.decide)
    approval  a person's decision, or none in time
    run       each attempt's ending; retry a raise while attempts and time are left
    check     the result is JSON, within MAX_TOOL_RESULT_BYTES, fitting the tool's output
    settle    what `wfa tool` prints and exits with, given whether the call was recorded
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from ...wire import Code, Response, accepted, is_code, refused
from ...wire.prompts import usage_line
from ...wire.teaching import ReadError, Taught
from .policy import Verdict

if TYPE_CHECKING:
    from ..record.lines import ApprovalDecision

MAX_TOOL_RESULT_BYTES = 64 * 1024
MAX_RAISED_FRAMES = 5  # of a raising handler's traceback, innermost last, kept on record for the workflow's author
MAX_TOOL_INPUT_BYTES = MAX_TOOL_RESULT_BYTES  # one call's input, as given: 64 KiB, as its result
UNRECORDED_CALL = (
    "the run couldn't record this call, so its answer isn't given. It may have run: check before calling again."
)
_encoder = msgspec.json.Encoder()

ToolOutcomeKind = Literal["result", "failed", "timed-out", "refused"]
OutcomeCode = Code | Literal["", "raised", "abandoned"]
"""A refusal's wire code; or, recorded only, `raised` (a retry may follow) and `abandoned` (a handler left running)."""


class ToolOutcome(msgspec.Struct, frozen=True):
    """How one call ended: `result` (with `value`), `failed`, `timed-out`, or `refused` (with `code`).
    `raised`: where a raising handler raised (`raised_at`), for the record; the agent is told `error`."""

    kind: ToolOutcomeKind
    value: Any = None
    error: str = ""
    code: OutcomeCode = ""
    raised: tuple[str, ...] = ()


class Next(enum.Enum):
    """A call not ended yet, and what it waits for next."""

    APPROVAL = "approval"  # a person's decision
    RUN = "run"  # its handler (or the replayed record)


# Read ---------------------------------------------------------------------------------


class Read(msgspec.Struct, frozen=True):
    """The input, read by the tool's schema."""

    value: Any


def read_input(taught: Taught, name: str, args: list[str], input: str | None, launcher: str) -> Read | ToolOutcome:
    """The call's input read by the tool's schema, or its `invalid-input` refusal with the tool's usage."""
    size = len((input or "").encode()) + sum(len(arg.encode()) for arg in args)
    if size > MAX_TOOL_INPUT_BYTES:
        error = f"the input is {size} bytes, over the limit of {MAX_TOOL_INPUT_BYTES}; pass a path instead"
        return ToolOutcome("refused", error=error, code="invalid-input")
    try:
        return Read(taught.read(args, input))
    except ReadError as error:
        usage = usage_line(f"{launcher} tool {name}", taught)
        hint = f"the input doesn't fit: {error}\nThe tool did not run. Fix the input and call it again.\n{usage}"
        return ToolOutcome("refused", error=hint, code="invalid-input")


# Policy and approval ------------------------------------------------------------------


def after_policy(verdict: Verdict) -> Next | ToolOutcome:
    """Denied ends the call; otherwise it waits for a person, or runs."""
    if not verdict.allowed:
        return ToolOutcome("refused", error=verdict.reason, code="denied")
    return Next.APPROVAL if verdict.needs_approval else Next.RUN


def after_approval(decision: ApprovalDecision | None, *, turn_ended: bool) -> Next | ToolOutcome:
    """Approved runs; rejected is refused; no decision in time never ran."""
    if decision is None:
        why = "its turn ended" if turn_ended else "its time ran out"
        return ToolOutcome("timed-out", error=f"no decision on the call's approval before {why}; the tool did not run")
    if not decision.approved:
        why = f": {decision.reason}" if decision.reason else ""
        return ToolOutcome("refused", error=f"a person rejected this call{why}", code="rejected")
    return Next.RUN


def broken(error: Exception) -> ToolOutcome:
    """A policy (or anything before the handler) raised: the call fails, never the run."""
    return ToolOutcome("failed", error=f"the call could not be run: {type(error).__name__}: {error}")


# Run ----------------------------------------------------------------------------------


class Returned(msgspec.Struct, frozen=True):
    value: Any


class Raised(msgspec.Struct, frozen=True):
    error: BaseException


class Stopped(msgspec.Struct, frozen=True):
    """The handler was cancelled when its turn ended."""


HandlerEnding = Returned | Raised | Stopped


def raised_at(error: BaseException, own: tuple[str, ...]) -> tuple[str, ...]:
    """Where a handler raised, for its author: the exception's type, then `path:line in function` of
    its traceback's innermost MAX_RAISED_FRAMES frames outside the files `own` (the broker's, that
    called it). Read from the frames alone: no source file is opened."""
    frames = []
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename not in own:
            frames.append(f"{code.co_filename}:{tb.tb_lineno} in {code.co_name}")
        tb = tb.tb_next
    return (type(error).__qualname__, *frames[-MAX_RAISED_FRAMES:])


def handler_ended(ending: HandlerEnding, *, now: float, deadline: float, output: Any, own: tuple[str, ...] = ()) -> ToolOutcome:
    """One run of the handler, as the call sees it. A raise is `failed` with code `raised`
    (a retry may follow; `final` strips the code), and where it raised (`raised_at`, past the
    files `own`); a return after the call's time is too late."""
    if isinstance(ending, Raised):
        error, where = ending.error, raised_at(ending.error, own)
        if not isinstance(error, Exception):
            return ToolOutcome("failed", error=f"the handler raised {error!r}", code="raised", raised=where)
        return ToolOutcome("failed", error=str(error) or type(error).__name__, code="raised", raised=where)
    if isinstance(ending, Stopped):
        return ToolOutcome("timed-out", error="the call was cancelled when its turn ended. It may have run.")
    if now >= deadline:
        return ToolOutcome("timed-out", error="the call finished after its time ran out. It may have run.")
    return check_result(ending.value, output)


def abandoned(*, turn_ended: bool, grace: float) -> ToolOutcome:
    """The handler ignored its signal for `grace` seconds after its time or its turn's end."""
    why = "its turn ended" if turn_ended else "the call's time ran out"
    return ToolOutcome(
        "timed-out",
        error=f"{why}, and the handler ignored its signal for {grace:g}s more, "
        "so it was abandoned. It may have run: check before calling again.",
        code="abandoned",
    )


ABANDONED_AT_RUN_END = "the run ended while the handler ran, and it was abandoned. It may have run."


class Retry(msgspec.Struct, frozen=True):
    """Run the handler again after `pause` seconds, unless the call is over by then."""

    pause: float


def after_attempt(
    outcome: ToolOutcome, attempt: int, *, max_attempts: int, backoff: float, now: float, deadline: float, over: bool
) -> ToolOutcome | Retry:
    """Retry a raise while attempts are left and the pause ends before the call's time; else the call ends.

    `over`: the call's turn ended or its time is up. The pause doubles each attempt.
    """
    if outcome.kind != "failed" or outcome.code != "raised" or attempt >= max_attempts:
        return final(outcome)
    pause = backoff * (2 ** (attempt - 1))
    if over or now + pause >= deadline:
        return final(outcome)
    return Retry(pause)


def final(outcome: ToolOutcome) -> ToolOutcome:
    """How the call ends: a raise is plain `failed` (its `raised` code only steers retries)."""
    return msgspec.structs.replace(outcome, code="") if outcome.code == "raised" else outcome


# Check --------------------------------------------------------------------------------


def _not_json(value: Any) -> str | None:
    """What in `value` isn't a JSON value (None if all of it is).

    msgspec would encode a set, a datetime, bytes or a UUID in some form, but the agent
    should read what the handler returned, not a guess at it: only None, bool, int, a
    finite float, str, list/tuple, dict with str keys, and Structs or dataclasses of
    these are JSON.
    """
    if value is None or isinstance(value, (bool, int, str)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"the number {value!r}"
    if isinstance(value, (list, tuple)):
        items: Any = value
    elif isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                return f"a dict key {key!r} ({type(key).__name__}, not str)"
        items = value.values()
    elif isinstance(value, msgspec.Struct):
        items = [getattr(value, name) for name in value.__struct_fields__]
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = [getattr(value, item.name) for item in dataclasses.fields(value)]
    else:
        return f"a value of type {type(value).__name__}"
    for item in items:
        found = _not_json(item)
        if found is not None:
            return found
    return None


def check_result(value: Any, output: Any) -> ToolOutcome:
    """The handler's return value as the agent will read it, or why it can't be."""
    try:
        found = _not_json(value)
    except RecursionError:
        found = "a value nested too deeply"
    if found is not None:
        return ToolOutcome("failed", error=f"the tool returned what isn't JSON: {found}")
    if output is not None:
        try:
            value = msgspec.convert(value, output, from_attributes=True)
        except msgspec.ValidationError as error:
            return ToolOutcome("failed", error=f"the tool's result doesn't fit its output schema: {error}")
    try:
        encoded = _encoder.encode(value)
    except (TypeError, msgspec.EncodeError) as error:
        return ToolOutcome("failed", error=f"the tool returned what isn't JSON: {error}")
    if len(encoded) > MAX_TOOL_RESULT_BYTES:
        return ToolOutcome(
            "failed",
            error=f"the tool's result is {len(encoded)} bytes as JSON, over the limit of {MAX_TOOL_RESULT_BYTES}; "
            "return a summary or a path instead",
        )
    return ToolOutcome("result", value=msgspec.json.decode(encoded))


# Settle -------------------------------------------------------------------------------


def settle(outcome: ToolOutcome, *, recorded: bool) -> Response:
    """What `wfa tool` prints and exits with: the agent is told only what is on the record."""
    if not recorded:
        return refused("tool", "internal-error", UNRECORDED_CALL)
    return tool_response(outcome)


def tool_response(outcome: ToolOutcome) -> Response:
    """What `wfa tool` prints and exits with for `outcome`."""
    if outcome.kind == "result":
        value = outcome.value
        if value is None:
            text = ""
        elif isinstance(value, str):
            text = value
        else:
            text = _encoder.encode(value).decode() + "\n"
        return accepted("tool", stdout=text, value=value)
    code = outcome.code if outcome.kind == "refused" else outcome.kind
    return refused("tool", code if is_code(code) else "internal-error", outcome.error)  # a replayed record's code
