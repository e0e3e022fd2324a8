"""agentswf: workflows of coding agents, written as async Python functions.

A workflow opens agents on agent CLIs (or any shell command), gives them turns, and
gets typed, validated answers back; the agent answers through one command, `wfa`.
"""

from .__about__ import __version__
from .engine.outcomes import Answered, Blocked, Cancelled, Failed, Outcome, TimedOut, Turn, Unanswered, Usage
from .errors import (
    AgentClosed,
    AgentswfError,
    DeadlineExceeded,
    DefinitionError,
    HarnessError,
    StopRequested,
    WorkflowError,
)
from .engine.toolcall import ToolCall
from .harnesses.runtime import Runtime
from .progress import show_progress
from .workflow import Agent, RunResult, Workflow, WorkflowDefinition, run, workflow
from .workflow.tools import Tool, tool

__all__ = [
    "Agent",
    "AgentClosed",
    "AgentswfError",
    "Answered",
    "Blocked",
    "Cancelled",
    "DeadlineExceeded",
    "DefinitionError",
    "Failed",
    "HarnessError",
    "Outcome",
    "RunResult",
    "Runtime",
    "StopRequested",
    "TimedOut",
    "Tool",
    "ToolCall",
    "Turn",
    "Unanswered",
    "Usage",
    "Workflow",
    "WorkflowDefinition",
    "WorkflowError",
    "__version__",
    "run",
    "show_progress",
    "tool",
    "workflow",
]
