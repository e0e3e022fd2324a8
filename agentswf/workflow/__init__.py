"""The author surface: @workflow, the Workflow context, agents and turns."""

from .agents import Agent, Agents
from .context import Workflow
from .definition import WorkflowDefinition, workflow
from .durations import to_seconds
from .running import RunResult, run

__all__ = ["Agent", "Agents", "RunResult", "Workflow", "WorkflowDefinition", "run", "to_seconds", "workflow"]
