"""The moves every part of the turn makes: launch an attempt, finish a turn, and its record.

Each returns the new state and its own effects; a caller puts them after (or before) its own.
"""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from ..instant import Instant
from ..outcomes import Cancelled, Outcome, Turn
from ..rules import CallView
from .effects import Effect, Finished, HoldUntilSettled, Prompt, RecordTurnEnded, StartAttempt, Step, StopTool, StopTurn
from .state import AgentState, Phase, Queued, StartOp, TurnState


def current(state: AgentState, call_id: str) -> TurnState | None:
    """The turn `call_id`, if it is the agent's and not yet ending."""
    turn = state.turn
    if turn is None or turn.call_id != call_id or turn.phase is Phase.ENDING:
        return None
    return turn


def in_turn(state: AgentState) -> TurnState | None:
    turn = state.turn
    return None if turn is None or turn.phase is Phase.ENDING else turn


def live(state: AgentState) -> TurnState:
    """The turn the table found the event for: it is the agent's, and not ending."""
    turn = state.turn
    assert turn is not None and turn.phase is not Phase.ENDING
    return turn


def with_call(state: AgentState, call_id: str, call: CallView) -> dict[str, CallView]:
    return {**state.calls, call_id: call}


def busy(state: AgentState) -> bool:
    """In a turn or an operation: what is asked now waits its place in the queue."""
    return state.turn is not None or state.op is not None


def ran_with(state: AgentState, settings: tuple[str | None, str | None] | None) -> AgentState:
    """The agent's settings as an attempt or operation that says what it ran with left them: a fork's
    agent ran a played turn with its recorded ones, and runs with those given from the fork's turn on.
    Its record, and what later runs, say so; None: it ran with the agent's, as `set` left them."""
    return state if settings is None else replace(state, model=settings[0], effort=settings[1])


def record(state: AgentState, turn: TurnState, outcome: Outcome, at: Instant) -> Turn:
    return Turn(
        outcome=outcome,
        agent=state.key,
        call_id=turn.call_id,
        n=turn.n,
        nudged=turn.nudged,
        started_at=at.wall_of(turn.started_at),
        ended_at=at.wall,
        usage=turn.usage,
        session=turn.session,
        started_by=turn.kind,
        model=state.model,
        effort=state.effort,
        forked_from=state.forked_from,
    )


def never_started(state: AgentState, start: Queued, outcome: Outcome, at: Instant) -> Turn:
    kind = start.kind if isinstance(start, StartOp) else "turn"
    return Turn(
        outcome=outcome, agent=state.key, call_id=start.call_id, n=start.n, started_at=at.wall, ended_at=at.wall,
        kind=kind, model=state.model, effort=state.effort, forked_from=state.forked_from,
    )


def refused_stopped(state: AgentState, start: Queued, at: Instant) -> Step:
    """Asked of a stopped agent: it never starts, and says why."""
    ended = never_started(state, start, Cancelled(f"{state.stopped}; it takes no more work"), at)
    return state, [RecordTurnEnded(ended), Finished(start.call_id, ended)]


def launch(state: AgentState, turn: TurnState, prompt: Prompt) -> Step:
    """The turn's next attempt starts, with `prompt`."""
    turn = replace(turn, phase=Phase.RUNNING)
    return replace(state, turn=turn), [StartAttempt(turn.call_id, turn.n, turn.nudged, prompt, turn.kind, state.session)]


def finish(state: AgentState, turn: TurnState, outcome: Outcome) -> Step:
    """End the turn: its CLI and timers stop, and it settles once the CLI is gone."""
    calls = state.calls
    if calls[turn.call_id].state == "open":
        calls = with_call(state, turn.call_id, CallView(state.key, "ended", turn.deadline))
    turn = replace(turn, phase=Phase.ENDING, outcome=outcome)
    effects: list[Effect] = [StopTurn(turn.call_id)]
    if state.tool is not None:
        effects.append(StopTool(state.tool.call_id))
    return replace(state, turn=turn, calls=calls), effects


def then(effects: list[Effect], step: Step) -> Step:
    """`step` with `effects` done first."""
    state, after = step
    return state, [*effects, *after]


def hold(state: AgentState, event: Any) -> Step:
    """Answer the asker once the call it names has settled (it is ending already)."""
    return state, [HoldUntilSettled(event.call_id)]
