"""What the pure turn machine costs per event: `turn.step` over whole turns, no actor, no I/O.

    python benchmarks/turn_step.py [TURNS]   (default 20000)

Each turn is the events of an ordinary one: asked, a tool call and its answer, `wfa result` and
its record, the attempt's clean end, its settling, the mail read after it. Prints the median of
5 runs in microseconds per event (`turn.step` and the effects' construction, nothing else).
"""

from __future__ import annotations

import math
import statistics
import sys
import time

import msgspec

from agentswf.engine import turn as t
from agentswf.engine.clock import Instant
from agentswf.engine.mail.switchboard import StandingView
from agentswf.harnesses.base import AttemptEnding, AttemptResult
from agentswf.wire import ResultRequest, ToolRequest, accepted
from agentswf.wire.teaching import Taught

RUNS = 5
NOBODY = StandingView()
EVENTS_PER_TURN = 8


class Answer(msgspec.Struct):
    n: int


TAUGHT = Taught(Answer)  # made once per turn by the workflow, outside the machine


def one_turn(state: t.AgentState, n: int) -> t.AgentState:
    call_id, at = f"c{n}", Instant(float(n), 1_700_000_000.0 + n)
    start = t.StartTurn(call_id=call_id, n=n, prompt="p", nudge_prompt="n", taught=TAUGHT, deadline=math.inf)
    state, _ = t.step(state, t.TurnAsked(start, at))
    state, _ = t.step(state, t.ToolAsked(ToolRequest(version=1, name="look"), NOBODY, f"t{n}", at))
    state, _ = t.step(state, t.ToolFinished(f"t{n}", accepted("tool", stdout="ok"), NOBODY))
    state, effects = t.step(state, t.ResultAsked(ResultRequest(version=1, call_id=call_id, args=["--n", "3"]), NOBODY, None, at))
    record = effects[0]
    assert isinstance(record, t.RecordAnswer)
    state, _ = t.step(state, t.AnswerRecorded(record.request, record.value, True, NOBODY, at))
    state, _ = t.step(state, t.AttemptEnded(call_id, AttemptResult(AttemptEnding("exited")), at))
    state, _ = t.step(state, t.Settled(call_id, NOBODY, at))
    state, _ = t.step(state, t.MailTaken((), NOBODY, at))
    assert state.turn is None
    return state


def main(turns: int) -> None:
    seconds = []
    for _ in range(RUNS):
        state = t.AgentState("a", "/w", True, math.inf, {"look": 30.0})
        start = time.process_time()
        for n in range(turns):
            state = one_turn(state, n)
            state = msgspec.structs.replace(state, calls={})  # a run's calls grow; here each turn's are dropped
        seconds.append(time.process_time() - start)
    per_event = statistics.median(seconds) / (turns * EVENTS_PER_TURN) * 1e6
    print(f"turn_step: {per_event:.2f}us per event ({turns} turns x {EVENTS_PER_TURN} events, median of {RUNS})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
