"""agentswf: workflows of coding agents, written as async Python functions.

A workflow opens agents on agent CLIs (or any shell command), gives them turns, and
gets typed, validated answers back; the agent answers through one command, `wfa`.

    @workflow(name=..., description=...)    an async function of `wf: Workflow` becomes a workflow
    await run(definition, args=...)         runs it under asyncio or trio: a RunResult
    run(..., continue_from=ContinueFrom(run, agent, turn))   forks a run at a turn (ReplayDiverged)
    load_workflow(path)                     the workflow a file defines, as `awf run` loads it
    wf.agents.open(key, runtime=...)        an Agent (wf.agents is Agents); Runtime sets the CLI
    await agent.run(prompt, schema=T)       a Turn[T]: its outcome is Answered[T], Unanswered,
                                            Blocked, TimedOut, Failed or Cancelled (an Outcome)
    tool(handler) / @tool(...)              a Tool an agent calls; its handler may take a ToolCall
    wf.route(a, b, purpose=...)             a Route: a may message b; a message reads as Mail
    wf.participants.open(key)               a Participant outside the run (wf.participants)
    wf.approvals                            Approvals: tool calls waiting for a person (ApprovalRequest)
    agent.usage, RunResult.usage            what an agent, and the run, spent (Usage, RunUsage; Prices)
    wf.sandboxes.open(key, write=[...])     a Sandbox to pass as agents.open(sandbox=...) (wf.sandboxes is Sandboxes)
    cwd=wf.worktree(name)                   a git worktree for an agent (wf.worktrees: Worktree;
                                            RunResult.worktrees: WorktreeEnd)

Errors all derive from AgentswfError. Policies are in `agentswf.policy`; test helpers
(scripted agents and participants, the pytest plugin) in `agentswf.testing`.
"""

from typing import TYPE_CHECKING

from .__about__ import __version__
from .lazy import public as _public

if TYPE_CHECKING:  # each imported when first named (agentswf/lazy.py): `awf ls` needs none of them
    from .engine.accounting import RunUsage
    from .engine.mail.words import Mail
    from .engine.outcomes import Answered, Blocked, Cancelled, Failed, Outcome, TimedOut, Turn, Unanswered, Usage
    from .engine.record.lines import ApprovalRequest
    from .engine.tools.call import ToolCall
    from .errors import (
        AgentClosed,
        AgentswfError,
        DeadlineExceeded,
        DefinitionError,
        HarnessError,
        MessageRefused,
        StopRequested,
        TurnNotAnswered,
        WorkflowError,
    )
    from .harnesses.acp_rpc import Permissions
    from .harnesses.pane_liveness import CheckIns
    from .harnesses.prices import Price, Prices
    from .harnesses.runtime import Runtime
    from .progress import show_progress
    from .replay.played import ReplayDiverged
    from .workflow.agents import Agent, Agents
    from .workflow.budgets import Budget, Spending, Spent
    from .workflow.context import Approvals, Workflow
    from .workflow.definition import WorkflowDefinition, workflow
    from .workflow.forking import ContinueFrom
    from .workflow.loading import load_workflow
    from .workflow.messaging import Participant, Participants, Route
    from .workflow.running import RunResult, run
    from .workflow.sandboxes import Sandbox, Sandboxes, SandboxSpec
    from .workflow.tools import Tool, tool
    from .workflow.worktrees import Worktree, WorktreeEnd

__all__ = [
    "Agent",
    "AgentClosed",
    "Agents",
    "AgentswfError",
    "Answered",
    "ApprovalRequest",
    "Approvals",
    "Blocked",
    "Budget",
    "Cancelled",
    "CheckIns",
    "ContinueFrom",
    "DeadlineExceeded",
    "DefinitionError",
    "Failed",
    "HarnessError",
    "Mail",
    "MessageRefused",
    "Outcome",
    "Participant",
    "Participants",
    "Permissions",
    "Price",
    "Prices",
    "ReplayDiverged",
    "Route",
    "RunResult",
    "RunUsage",
    "Runtime",
    "Sandbox",
    "SandboxSpec",
    "Sandboxes",
    "Spending",
    "Spent",
    "StopRequested",
    "TimedOut",
    "Tool",
    "ToolCall",
    "Turn",
    "TurnNotAnswered",
    "Unanswered",
    "Usage",
    "Workflow",
    "WorkflowDefinition",
    "WorkflowError",
    "Worktree",
    "WorktreeEnd",
    "__version__",
    "load_workflow",
    "run",
    "show_progress",
    "tool",
    "workflow",
]

_public(__name__, __file__)
