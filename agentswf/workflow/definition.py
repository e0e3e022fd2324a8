"""`@workflow`: an async function becomes a named, described workflow."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..engine.tools.policy import Policy
from ..errors import DefinitionError

if TYPE_CHECKING:
    from typing import TypeAlias

    from .context import Workflow

    WorkflowFunction: TypeAlias = Callable[[Workflow], Awaitable[Any]] | Callable[[Workflow, Any], Awaitable[Any]]
    """What `@workflow` decorates: `async def f(wf)` or `async def f(wf, args)`."""

MAX_NAME_CHARS = 128
_NAME_CHARACTERS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
NO_ARGS = object()


@dataclass(frozen=True)
class WorkflowDefinition:
    """A workflow: its identity (the name names its run folder), and its function."""

    fn: Callable[..., Awaitable[Any]]
    name: str
    description: str
    version: str | None
    args_type: Any  # NO_ARGS when the function takes only `wf`
    policies: tuple[Policy, ...] = ()
    args_default: Any = NO_ARGS  # the args parameter's Python default, taken when no args are given

    @property
    def takes_args(self) -> bool:
        return self.args_type is not NO_ARGS


def check_name(name: str) -> str:
    if (
        not isinstance(name, str)
        or not name
        or len(name) > MAX_NAME_CHARS
        or name.startswith(".")
        or not set(name) <= _NAME_CHARACTERS
    ):
        raise DefinitionError(
            f"{name!r} is not a workflow name: use letters, digits, '.', '_' and '-', "
            f"at most {MAX_NAME_CHARS} characters, not starting with '.'"
        )
    return name


def workflow(
    *, name: str, description: str, version: str | None = None, policies: Sequence[Policy] = ()
) -> Callable[[WorkflowFunction], WorkflowDefinition]:
    """Turn `async def f(wf)` or `async def f(wf, args)` into a WorkflowDefinition.

    `policies` see every tool call of the run: they may deny it, require a person's
    approval, redact input fields, or log it (see `agentswf.policy`).
    """
    check_name(name)
    if any(not callable(policy) for policy in policies):
        raise DefinitionError(f"workflow {name!r}: each policy must be a function of the call")
    if not isinstance(description, str) or not description.strip():
        raise DefinitionError(f"workflow {name!r} needs a description: one line saying what it does")

    def define(fn: WorkflowFunction) -> WorkflowDefinition:
        if not inspect.iscoroutinefunction(fn):
            raise DefinitionError(f"workflow {name!r} must be an async function: async def {fn.__name__}(wf)")
        params = list(inspect.signature(fn).parameters.values())
        if len(params) not in (1, 2):
            raise DefinitionError(f"workflow {name!r} must take (wf) or (wf, args), not {len(params)} parameters")
        args_type: Any = NO_ARGS
        default: Any = NO_ARGS
        if len(params) == 2:
            hints = typing.get_type_hints(fn, include_extras=True)
            args_type = hints.get(params[1].name, Any)
            if params[1].default is not inspect.Parameter.empty:
                default = params[1].default
        return WorkflowDefinition(fn, name, description.strip(), version, args_type, tuple(policies), default)

    return define
