"""Every exception agentswf raises, in one hierarchy.

Catch ``AgentswfError`` to catch them all. The tree::

    AgentswfError
    ├── ActorError                  the actor kernel
    │   ├── ActorStopped            the actor had stopped (or stopped before it answered)
    │   ├── ActorCrashed            the handler raised answering (the actor goes on), or
    │   │                           the actor crashed before it answered; the cause is chained
    │   ├── MailboxFull             the mailbox was full and its policy is to fail
    │   ├── AskTimeout              no answer within the ask's timeout (also a TimeoutError)
    │   └── UnhandledMessage        the actor has no handler for that message type
    ├── WorkflowError               a workflow used the API wrongly, or its run could not go on
    │   ├── DefinitionError         a workflow, agent, tool or schema is not well formed
    │   ├── AgentClosed             an operation on an agent that was closed
    │   ├── StopRequested           raised by ``wf.stop``: ends the run ``stopped``
    │   └── DeadlineExceeded        a wait outlived its deadline (also a TimeoutError)
    ├── HarnessError                an agent CLI could not be found or started
    │   └── SandboxRefused          a sandbox would not start an attempt: what it must hold, it can't
    └── TestScriptError             a scripted test agent was missing, or left turns unused

Usage errors carry a message that says what to do next. Errors a turn can meet
(an agent that never answers, a CLI that fails) are not exceptions: they are the
turn's outcome.
"""

from __future__ import annotations


class AgentswfError(Exception):
    """The root of every error agentswf raises."""


# Actor kernel ---------------------------------------------------------------------------


class ActorError(AgentswfError):
    """Something went wrong talking to an actor."""


class ActorStopped(ActorError):
    """The actor had stopped, or stopped before it answered this message."""


class ActorCrashed(ActorError):
    """The handler raised answering this ask (the actor goes on with its next message), or
    the actor crashed before it answered; ``__cause__`` is the error."""


class MailboxFull(ActorError):
    """The mailbox was at capacity and its overflow policy is to fail at once."""


class AskTimeout(ActorError, TimeoutError):
    """The actor did not answer within the ask's timeout; its late answer is discarded."""


class UnhandledMessage(ActorError, TypeError):
    """The actor has no handler for that message type."""


# Workflows ------------------------------------------------------------------------------


class WorkflowError(AgentswfError):
    """A workflow used the API wrongly, or its run could not go on."""


class DefinitionError(WorkflowError, ValueError):
    """A workflow, agent, tool or schema is not well formed; raised where it is defined."""


class AgentClosed(WorkflowError):
    """An operation was given to an agent that is closed."""


class StopRequested(WorkflowError):
    """Raised by ``wf.stop(reason)``; the run ends ``stopped``. Don't catch it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class DeadlineExceeded(WorkflowError, TimeoutError):
    """A wait outlived its deadline."""


class RunKeyError(WorkflowError):
    """A Temporal deployment's run key is missing, unfit, or not the one a run holds; the message says what to do."""


# Harnesses and tests --------------------------------------------------------------------


class HarnessError(AgentswfError):
    """An agent CLI could not be found or started; the message says how to install it."""


class SandboxRefused(HarnessError):
    """A sandbox would not start an agent's attempt: what it holds for it (a repository's git
    controls) it can't hold in whole; the message says what to look at. The turn fails saying so."""


class TestScriptError(AgentswfError, AssertionError):
    """A scripted test agent was missing, or its script had turns left over."""

    __test__ = False


def leaf_errors(error: BaseException) -> list[BaseException]:
    """The errors inside `error`, however deep its exception groups nest."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaf_errors(inner)]
    return [error]
