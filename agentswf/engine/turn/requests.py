"""The agent's `wfa` requests, as the turn answers them: `result`, `waiting`, `tool`, `send` and `reply`.

Whether a request is refused is a pure rule of `rules.py`; here it is strung into the turn. Every
answer is led by the line saying what the agent owes or awaits, if anything (`notice`).
"""

from __future__ import annotations

import math

from msgspec.structs import replace

from ...wire import (
    DEFAULT_WAITING_SECONDS,
    MIN_WAITING_SECONDS,
    ReplyRequest,
    Response,
    ResultRequest,
    SendRequest,
    ToolRequest,
    WaitingRequest,
    accepted,
    refused,
)
from ...wire.prompts import usage_line
from ...wire.teaching import ReadError
from .. import rules
from ..agent_time import told
from ..instant import Instant
from ..mail.words import DropAwait, Post, StandingView
from ..notice import notice
from ..outcomes import Answered
from ..rules import CallView, Refusal
from .effects import (
    AnswerTool,
    ArmTimer,
    Effect,
    JoinTool,
    RecordAnswer,
    RecordCandidate,
    RecordToolRefused,
    Respond,
    SendPost,
    StartTool,
    Step,
    TellBoard,
)
from .events import (
    AnswerRecorded,
    Event,
    PostAnswered,
    PostAsked,
    ResultAsked,
    ToolAsked,
    ToolFinished,
    ToolsSet,
    WaitingAsked,
)
from .moves import finish, in_turn, live, then, with_call
from .state import RELEASE_GRACE_SECONDS, AgentState, Phase, Timer, ToolRun

TurnRequest = ResultRequest | WaitingRequest | ToolRequest | SendRequest | ReplyRequest
"""The `wfa` requests a turn answers (`peers` is the switchboard's, answered beside it)."""


def asked(request: TurnRequest, standing: StandingView, foreign: CallView | None, at: Instant, new_call_id: str) -> Event:
    """The event of `request` on the agent's socket: the one place a request becomes the turn's,
    so a new `wfa` command is its request in the wire, its event and handler here and its column
    in `TRANSITIONS`. `foreign`: the call the request names as the run knows it, where it isn't
    this agent's; `new_call_id`: the id a tool call gets if it runs."""
    if isinstance(request, ToolRequest):
        return ToolAsked(request, standing, new_call_id, at)
    if isinstance(request, SendRequest | ReplyRequest):
        return PostAsked(request, at)
    if isinstance(request, ResultRequest):
        return ResultAsked(request, standing, foreign, at)
    return WaitingAsked(request, standing, foreign, at)


def _view(state: AgentState, standing: StandingView) -> rules.AgentView:
    return rules.AgentView(
        state.key,
        tool_running=state.tool is not None,
        owes=standing.owes,
        supports_waiting=state.supports_waiting,
        owed_text=standing.owed_text,
    )


def _lead(response: Response, standing: StandingView, *, stderr: bool = False) -> Response:
    """The response, led by the owed/awaits notice (on standard error for a tool: stdout is its result)."""
    lead = notice(standing)
    if not lead:
        return response
    if stderr:
        return replace(response, stderr=lead + response.stderr)
    return replace(response, stdout=lead + response.stdout)


def _refuse(command: str, refusal: Refusal, standing: StandingView) -> list[Effect]:
    return [Respond(_lead(refused(command, refusal.code, refusal.message), standing))]


# wfa result ---------------------------------------------------------------------------


def result_asked(state: AgentState, event: ResultAsked) -> Step:
    """Refused by the rules, or read by the turn's schema: a fitting answer is recorded before it is accepted."""
    request, standing = event.request, event.standing
    call = state.calls.get(request.call_id, event.foreign)
    refusal = rules.judge_result(_view(state, standing), request.call_id, call, event.at.loop)
    if refusal is not None:
        return state, _refuse("result", refusal, standing)
    turn = state.turn
    assert turn is not None and turn.call_id == request.call_id
    try:
        value = turn.taught.read(request.args, request.input)
    except ReadError as error:
        usage = usage_line(f"{state.launcher} result {turn.call_id}", turn.taught)
        hint = f"the answer doesn't fit: {error}\nFix it and run wfa result again.\n{usage}"
        return replace(state, turn=replace(turn, last_refusal=str(error))), [
            RecordCandidate(request.call_id, event.at.wall, request.args, request.input, False, str(error)),
            *_refuse("result", Refusal("invalid-result", hint), standing),
        ]
    return state, [RecordAnswer(request, value, standing)]


def answer_recorded(state: AgentState, event: AnswerRecorded) -> Step:
    """On the record: accepted. A running attempt gets a grace to exit; a quiet turn ends at once."""
    request, standing, at = event.request, event.standing, event.at
    if not event.ok:
        message = "the run couldn't record your answer, so it isn't accepted; try again."
        return state, _refuse("result", Refusal("internal-error", message), standing)
    turn = live(state)
    effects: list[Effect] = [RecordCandidate(request.call_id, at.wall, request.args, request.input, True)]
    state = replace(state, calls=with_call(state, turn.call_id, CallView(state.key, "accepted", turn.deadline)))
    if standing.awaits is not None:
        effects.append(TellBoard(DropAwait(state.key)))  # answered: the wait for a reply is dropped
    turn = replace(turn, value=event.value)
    if turn.phase is Phase.RUNNING:
        effects.append(ArmTimer(turn.call_id, Timer.RELEASE, min(turn.deadline, at.loop + RELEASE_GRACE_SECONDS)))
        state = replace(state, turn=replace(turn, phase=Phase.RELEASING))
    else:
        state, effects = then(effects, finish(state, turn, Answered(event.value)))
    effects.append(Respond(_lead(accepted("result", stdout="wfa: result accepted.\n"), standing)))
    return state, effects


# wfa waiting --------------------------------------------------------------------------


def waiting_asked(state: AgentState, event: WaitingAsked) -> Step:
    """Refused, a no-op while a reply is awaited, or granted: the wait holds off the nudge, never past the deadline."""
    request, standing, at = event.request, event.standing, event.at
    call = state.calls.get(request.call_id, event.foreign)
    refusal = rules.judge_waiting(_view(state, standing), request.call_id, call, at.loop)
    if refusal is not None:
        return state, _refuse("waiting", refusal, standing)
    if standing.awaits is not None:
        text = f"wfa: {standing.awaits}'s reply is already awaited; nothing changed.\n"
        return state, [Respond(_lead(accepted("waiting", stdout=text), standing))]
    refusal = rules.judge_waiting_reason(request.reason)
    if refusal is not None:
        return state, _refuse("waiting", refusal, standing)
    turn = state.turn
    assert turn is not None
    requested = None if request.timeout_ms is None else request.timeout_ms / 1000
    until = rules.waiting_until(at.loop, turn.deadline, requested, default=DEFAULT_WAITING_SECONDS, minimum=MIN_WAITING_SECONDS)
    until_ms, deadline_ms, now_ms = at.ms(until), at.ms(turn.deadline), int(at.wall * 1000)
    text = f"wfa: waiting granted until {told(until_ms, now_ms)}"
    text += f"; the turn's deadline is {told(deadline_ms, now_ms)}.\n" if deadline_ms is not None else ".\n"
    response = accepted("waiting", stdout=text, value={"wait_until_ms": until_ms, "deadline_ms": deadline_ms})
    return replace(state, turn=replace(turn, waiting_until=until, waited=True)), [Respond(_lead(response, standing))]


# wfa tool -----------------------------------------------------------------------------


def tool_asked(state: AgentState, event: ToolAsked) -> Step:
    """A refusal now, or the call runs (or joins the one running) and is answered when it ends."""
    request, standing = event.request, event.standing
    turn = in_turn(state)
    running = state.tool
    # The same call again joins the running one and gets its answer, once; more are tool-busy.
    same = (
        running is not None
        and not running.joined
        and (running.name, running.args, running.input) == (request.name, tuple(request.args), request.input)
    )
    refusal = rules.judge_tool(
        _view(state, standing),
        in_turn=turn is not None,
        accepted=turn is not None and turn.phase is Phase.RELEASING,
        busy_with=running.name if running is not None else None,
        same_call=same,
        name=request.name,
        tools=tuple(state.tools),
    )
    if refusal is not None:
        turn_call_id = state.turn.call_id if state.turn is not None else ""
        response = _lead(refused("tool", refusal.code, refusal.message), standing, stderr=True)
        return state, [RecordToolRefused(request, refusal.code, refusal.message, turn_call_id), Respond(response)]
    if running is not None:  # the same call again: it gets the running call's answer
        return replace(state, tool=replace(running, joined=True)), [JoinTool()]
    assert turn is not None
    timeout = state.tools[request.name]
    deadline = turn.deadline if timeout is None else min(turn.deadline, event.at.loop + timeout)
    run = ToolRun(event.new_call_id, request.name, tuple(request.args), request.input)
    return replace(state, tool=run), [StartTool(run.call_id, request, deadline, turn.call_id)]


def tool_answer(response: Response, standing: StandingView) -> Response:
    """A tool call's answer as its callers are told it: led by the owed/awaits notice, on
    standard error (standard output is the tool's result)."""
    return _lead(response, standing, stderr=True)


def is_running_tool(state: AgentState, event: ToolFinished) -> bool:
    return state.tool is not None and state.tool.call_id == event.call_id


def tool_finished(state: AgentState, event: ToolFinished) -> Step:
    return replace(state, tool=None), [AnswerTool(tool_answer(event.response, event.standing))]


def tools_set(state: AgentState, event: ToolsSet) -> Step:
    return replace(state, tools=dict(event.tools)), []


# wfa send, wfa reply ------------------------------------------------------------------


def post_asked(state: AgentState, event: PostAsked) -> Step:
    """Pass the message to the switchboard; a question asked in a turn waits no longer than its deadline."""
    request = event.request
    turn = in_turn(state)
    until = turn.deadline if turn is not None else math.inf
    if request.timeout_ms is not None:
        until = min(until, event.at.loop + request.timeout_ms / 1000)
    post = Post(
        sender=state.key,
        peer=request.peer,
        text=request.message,
        reply=isinstance(request, ReplyRequest),
        question=request.await_reply,
        until=until,
        in_turn=turn is not None,
    )
    return state, [SendPost(post, request)]


def post_answered(state: AgentState, event: PostAnswered) -> Step:
    request, answer = event.request, event.answer
    command = "reply" if isinstance(request, ReplyRequest) else "send"
    if isinstance(answer, Refusal):
        return state, _refuse(command, answer, event.standing)
    verb = "replied to" if command == "reply" else "sent to"
    text = f"wfa: {verb} {request.peer}; it reads it {answer.read}.\n"
    if request.await_reply:
        when = event.at.ms(event.until)
        text += "wfa: its reply starts your next turn"
        text += f"; the wait ends at {told(when, int(event.at.wall * 1000))}.\n" if when is not None else ".\n"
    response = accepted(command, stdout=text, value={"message_id": answer.message_id, "read": answer.read})
    return state, [Respond(_lead(response, event.standing))]
