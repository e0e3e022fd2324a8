"""Test helpers that ship with agentswf: scripted agents and participants over the real
sockets, runs, their records, and a pytest plugin.

    from agentswf.testing import answer, respond, run_workflow

    async def test_review(run_root):
        run = await run_workflow(my_workflow, agents={"reviewer": answer(lambda turn: "LGTM")},
                                 participants={"lead": respond("Merge it.")}, run_root=run_root)
        assert run.value == ...
        assert run.record.turns[0]["agent"] == "reviewer"

`run_workflow(..., engine="temporal")` (agentswf[temporal]) runs the same on Temporal's
time-skipping test server, then replays its history (agentswf.testing.temporal).

With agentswf installed, pytest runs every `async def test_…` on asyncio and on trio
(`--agentswf-backend trio` narrows to one), says why each skipped test was skipped, and
has the fixtures `run_root` and `run_record`, and the mark `virtual_time`, which runs a test on a
virtual clock (see `agentswf.testing.pytest_plugin`; `virtual_clock` does the same outside pytest).
"""

from typing import TYPE_CHECKING

from ..lazy import public

if TYPE_CHECKING:  # each imported when first named (agentswf/lazy.py)
    from ..errors import TestScriptError
    from ..replay.recorded import RecordUnreadable
    from ..wire import Response
    from .approvals import Decision, approve, reject
    from .clock import virtual_clock
    from .fork import fork
    from .participants import ParticipantScript, respond
    from .record import Record, RunRecord, read_record
    from .replay import ReplayDiverged, replay
    from .runs import TestRun, run_workflow
    from .scripted import (
        Script,
        ScriptedTurn,
        ToolFailed,
        ToolRefused,
        ToolResult,
        answer,
        blocked,
        failed,
        hang,
        silent,
        timed_out,
    )

__all__ = [
    "Decision",
    "ParticipantScript",
    "Record",
    "RecordUnreadable",
    "ReplayDiverged",
    "Response",
    "RunRecord",
    "Script",
    "ScriptedTurn",
    "TestRun",
    "TestScriptError",
    "ToolFailed",
    "ToolRefused",
    "ToolResult",
    "answer",
    "approve",
    "blocked",
    "failed",
    "fork",
    "hang",
    "read_record",
    "reject",
    "replay",
    "respond",
    "run_workflow",
    "silent",
    "timed_out",
    "virtual_clock",
]

public(__name__, __file__)
