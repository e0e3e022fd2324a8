"""`Tool`: a tool as the engine holds it (its handler, what the agent reads about it, how the
broker treats its calls), and how its handler is called.

Made by `agentswf.tool(...)` (agentswf.workflow.tools, which checks it); here, below the
workflow, because the engine's ToolBroker and AgentActor hold tools too.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from ...wire.teaching import Taught

if TYPE_CHECKING:
    from .call import ToolCall

DEFAULT_TOOL_TIMEOUT_SECONDS = 30.0


class _NoInput(msgspec.Struct, forbid_unknown_fields=True):
    """A tool without input is called by its name alone."""


NO_INPUT: type = _NoInput  # named `_NoInput` still: the title of the schema an agent reads


@dataclass(frozen=True, eq=False)
class Tool:
    """A tool: its handler, what the agent reads about it, and how the broker treats its calls."""

    handler: Callable[..., Any]
    description: str
    input: type
    output: Any = None
    timeout: float | None = DEFAULT_TOOL_TIMEOUT_SECONDS  # None: only the turn's deadline
    allowed_agents: frozenset[str] | None = None
    sensitive_fields: frozenset[str] = frozenset()
    max_attempts: int = 1
    backoff: float = 0.0
    requires_approval: bool = False
    keyword_call: bool = False  # the input was derived from the handler's parameters
    call_param: str | None = None  # the parameter that receives the ToolCall
    taught: Taught = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "taught", Taught(self.input))

    @property
    def takes_input(self) -> bool:
        return self.input is not NO_INPUT

    @property
    def is_async(self) -> bool:
        """An `async def` handler (or a callable whose `__call__` is one): it runs on the run's loop.

        Any other handler runs in a worker thread, so a blocking one freezes nothing else.
        """
        return inspect.iscoroutinefunction(self.handler) or inspect.iscoroutinefunction(type(self.handler).__call__)

    def invoke(self, value: Any, call: ToolCall) -> Any:
        """Call the handler with `value` as its signature asks; may return an awaitable."""
        if self.keyword_call:
            kwargs = {name: getattr(value, name) for name in value.__struct_fields__}
            if self.call_param:
                kwargs[self.call_param] = call
            return self.handler(**kwargs)
        if self.call_param and self.takes_input:
            return self.handler(value, call)
        if self.call_param:
            return self.handler(call)
        return self.handler(value) if self.takes_input else self.handler()

    def same_as(self, other: Tool) -> bool:
        """The same tool as the agent sees it: description and input schema."""
        return self.description == other.description and self.taught.schema == other.taught.schema
