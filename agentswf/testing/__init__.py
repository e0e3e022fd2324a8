"""Test helpers that ship with agentswf: scripted agents over the real socket, and runs.

    from agentswf.testing import run_workflow, answer

    run = await run_workflow(my_workflow, agents={"reviewer": answer(lambda turn: "LGTM")})
    assert run.value == ...
"""

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
    "Script",
    "ScriptedTurn",
    "TestRun",
    "ToolFailed",
    "ToolRefused",
    "ToolResult",
    "answer",
    "blocked",
    "failed",
    "hang",
    "run_workflow",
    "silent",
    "timed_out",
]
