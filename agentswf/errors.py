"""Every exception agentswf raises, in one hierarchy.

Catch ``AgentswfError`` to catch every error. ``StopRequested`` is not an error: like trio's
``Cancelled`` it derives from ``BaseException``, so a workflow's ``except Exception`` or
``except WorkflowError`` lets a stop through to end the run. The tree::

    Exception
    └── AgentswfError
        ├── ActorError                  the actor kernel
        │   ├── ActorStopped            the actor had stopped (or stopped before it answered)
        │   ├── ActorCrashed            the handler raised answering (the actor goes on), or
        │   │                           the actor crashed before it answered; the cause is chained
        │   ├── MailboxFull             the mailbox was full and its policy is to fail
        │   ├── AskTimeout              no answer within the ask's timeout (also a TimeoutError)
        │   └── UnhandledMessage        the actor has no handler for that message type (also a TypeError)
        ├── WorkflowError               a workflow used the API wrongly, or its run could not go on
        │   ├── DefinitionError         a workflow, agent, tool or schema is not well formed (also a ValueError)
        │   ├── AgentClosed             an operation on an agent that was closed
        │   ├── TurnNotAnswered         ``turn.value`` of a turn that was not answered (also a ValueError)
        │   ├── MessageRefused          a participant's send or reply was refused; ``code`` says why
        │   ├── DeadlineExceeded        a wait outlived its deadline (also a TimeoutError)
        │   └── RunKeyError             a Temporal deployment's run key is missing, unfit, or not the run's
        │       └── PayloadKeyError     its payload key is malformed, or a payload's key isn't held
        ├── HarnessError                an agent CLI could not be found or started
        │   └── SandboxRefused          a sandbox would not start an attempt: what it must hold, it can't
        └── TestScriptError             a scripted test agent was missing, or left turns unused (also an AssertionError)
    BaseException
    └── StopRequested                   raised by ``wf.stop``: ends the run ``stopped``; not an error

Usage errors carry a message that says what to do next. Errors a turn can meet
(an agent that never answers, a CLI that fails) are not exceptions: they are the
turn's outcome.
"""

from __future__ import annotations

from typing import Any


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


class TurnNotAnswered(WorkflowError, ValueError):
    """``turn.value`` of a turn that was not answered; ``turn`` is that turn (its ``outcome``
    says how it ended). Also a ValueError, which ``turn.value`` raised before it had its own."""

    def __init__(self, turn: Any) -> None:
        super().__init__(f"turn {turn.n} of {turn.agent} ended {turn.outcome.kind}: {turn.outcome.reason}")
        self.turn = turn


class MessageRefused(WorkflowError):
    """A participant's send or reply was refused; ``code`` is the refusal code (``none-owed``,
    ``expired``, …)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class DeadlineExceeded(WorkflowError, TimeoutError):
    """A wait outlived its deadline."""


class RunKeyError(WorkflowError):
    """A Temporal deployment's run key is missing, unfit, or not the one a run holds; the message says what to do."""


class PayloadKeyError(RunKeyError):
    """A Temporal deployment's payload key (AGENTSWF_PAYLOAD_KEY) is malformed, or a payload came
    encrypted with a key this process doesn't hold; the message names the variable or the key's id."""


# Harnesses and tests --------------------------------------------------------------------


class HarnessError(AgentswfError):
    """An agent CLI could not be found or started; the message says how to install it."""


class SandboxRefused(HarnessError):
    """A sandbox would not start an agent's attempt: what it holds for it (a repository's git
    controls) it can't hold in whole; the message says what to look at. The turn fails saying so."""


class TestScriptError(AgentswfError, AssertionError):
    """A scripted test agent was missing, or its script had turns left over."""

    __test__ = False


# A stop, which is not an error ----------------------------------------------------------


class StopRequested(BaseException):
    """Raised by ``wf.stop(reason)``; the run ends ``stopped``.

    A ``BaseException``, not an ``AgentswfError``, as trio's ``Cancelled`` is: a workflow's
    ``except Exception`` or ``except WorkflowError`` around a call that stops lets the stop go
    on to end the run. Don't catch it; a workflow that does ends ``failed`` ("stop was caught")."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def leaf_errors(error: BaseException) -> list[BaseException]:
    """The errors inside `error`, however deep its exception groups nest."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaf_errors(inner)]
    return [error]


def stop_among(error: BaseException) -> StopRequested | None:
    """The stop `error` is or holds, however deep its exception groups nest."""
    return next((leaf for leaf in leaf_errors(error) if isinstance(leaf, StopRequested)), None)
