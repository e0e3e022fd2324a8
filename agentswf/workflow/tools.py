"""`tool(...)`: a function of the workflow that an agent calls while it works.

A tool's input is a msgspec Struct, given as `input=` or derived from the handler's own
annotated parameters (descriptions from `Annotated[T, "…"]` or the docstring), as the
WorkflowAI SDK does. The limits of seed 004 are checked when an agent opens with its
tools, so a mistake fails there and not in the middle of a turn.
"""

from __future__ import annotations

import inspect
import math
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any

import msgspec

from ..engine.tools.call import ToolCall
from ..engine.tools.tool import DEFAULT_TOOL_TIMEOUT_SECONDS, NO_INPUT, Tool
from ..errors import DefinitionError
from ..wire.common import MAX_TOOL_NAME_CHARS, is_tool_name
from .durations import Duration, to_seconds

MAX_TOOLS_PER_AGENT = 16
MAX_DESCRIPTION_BYTES = 1024
MAX_INPUT_SCHEMA_BYTES = 8192


def _docstring_params(doc: str) -> dict[str, str]:
    """Parameter descriptions from a docstring's `Args:` section or `:param x:` lines."""
    found: dict[str, str] = {}
    in_args = False
    for raw in doc.splitlines():
        line = raw.strip()
        if line.startswith(":param "):
            name, _, text = line[len(":param ") :].partition(":")
            found[name.strip().split()[-1]] = text.strip()
        elif line.lower() in ("args:", "arguments:", "parameters:"):
            in_args = True
        elif in_args and ":" in line and not line.endswith(":"):
            name, _, text = line.partition(":")
            found[name.strip().split(" ")[0]] = text.strip()
        elif in_args and not line:
            in_args = False
    return found


def _summary(doc: str | None) -> str:
    text = inspect.cleandoc(doc or "")
    return text.split("\n\n")[0].strip()


def _is_call_annotation(annotation: Any) -> bool:
    """`ToolCall`, or `ToolCall | None` (a handler that also runs outside a call)."""
    if annotation is ToolCall or (isinstance(annotation, str) and annotation.strip("'\"").endswith("ToolCall")):
        return True
    args = typing.get_args(annotation)
    return ToolCall in args and all(arg in (ToolCall, type(None)) for arg in args)


def _derive_input(handler: Callable[..., Any], name: str) -> tuple[type, str | None]:
    """A Struct made from the handler's annotated parameters, and which one takes the call."""
    try:
        hints = typing.get_type_hints(handler, include_extras=True)
    except Exception as error:
        raise DefinitionError(f"tool {name}: its parameters' annotations can't be read: {error}") from None
    described = _docstring_params(inspect.getdoc(handler) or "")
    fields: list[Any] = []
    call_param = None
    for param in inspect.signature(handler).parameters.values():
        annotation = hints.get(param.name, param.annotation)
        if _is_call_annotation(annotation):
            call_param = param.name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise DefinitionError(f"tool {name}: *{param.name} can't be an input field; name each one")
        if annotation is inspect.Parameter.empty:
            raise DefinitionError(
                f"tool {name}: parameter {param.name} needs a type annotation, so its input can be checked"
            )
        annotation = _with_description(annotation, described.get(param.name))
        if param.default is inspect.Parameter.empty:
            fields.append((param.name, annotation))
        else:
            fields.append((param.name, annotation, param.default))
    # One title for every derived input: a reopened agent's new handler, named otherwise but
    # taking the same parameters, has the same schema.
    struct = msgspec.defstruct("Input", fields, forbid_unknown_fields=True)
    return struct, call_param


def _with_description(annotation: Any, docstring_text: str | None) -> Any:
    """`Annotated[T, "text"]` (or a docstring line) as `Annotated[T, Meta(description=…)]`."""
    if typing.get_origin(annotation) is Annotated:
        base, *extras = typing.get_args(annotation)
        texts = [extra for extra in extras if isinstance(extra, str)]
        metas = [extra for extra in extras if not isinstance(extra, str)]
        if texts:
            metas.append(msgspec.Meta(description=" ".join(texts)))
        return Annotated[(base, *metas)] if metas else base
    if docstring_text:
        return Annotated[annotation, msgspec.Meta(description=docstring_text)]
    return annotation


def _call_param(handler: Callable[..., Any], input_type: type) -> str | None:
    params = list(inspect.signature(handler).parameters.values())
    try:
        hints = typing.get_type_hints(handler)
    except Exception:
        hints = {}
    for param in params:
        if _is_call_annotation(hints.get(param.name, param.annotation)):
            return param.name
    if len(params) >= 2:
        return params[1].name
    return None


def _make_tool(
    handler: Callable[..., Any],
    *,
    description: str | None,
    input: type | None,
    output: Any,
    timeout: Duration | bool | None,
    allowed_agents: Sequence[str] | None,
    sensitive_fields: Sequence[str],
    max_attempts: int,
    backoff: Duration | None,
    requires_approval: bool,
) -> Tool:
    if not callable(handler):
        raise DefinitionError(f"a tool's handler must be a function, not {handler!r}")
    label = getattr(handler, "__name__", "tool")
    text = description if description is not None else _summary(handler.__doc__)
    if timeout is False:
        seconds: float | None = None
    elif timeout is None or timeout is True:
        seconds = DEFAULT_TOOL_TIMEOUT_SECONDS
    else:
        seconds = to_seconds(timeout, what=f"tool {label}'s timeout")
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise DefinitionError(f"tool {label}: max_attempts must be a whole number of at least 1")
    params = list(inspect.signature(handler).parameters.values())
    if input is not None:
        if not (isinstance(input, type) and issubclass(input, msgspec.Struct)):
            raise DefinitionError(f"tool {label}: input must be a msgspec Struct type, not {input!r}")
        input_type, keyword, call_param = input, False, _call_param(handler, input)
        if call_param is None and len(params) == 0:
            raise DefinitionError(f"tool {label}: a tool with input needs a handler that takes it")
    elif not params:
        input_type, keyword, call_param = NO_INPUT, False, None
    else:
        input_type, call_param = _derive_input(handler, label)
        keyword = True
        if not input_type.__struct_fields__:
            input_type, keyword = NO_INPUT, False
    _check_takes(handler, label, input_type, keyword, call_param)
    try:
        return Tool(
            handler=handler,
            description=text,
            input=input_type,
            output=output,
            timeout=seconds,
            allowed_agents=frozenset(allowed_agents) if allowed_agents is not None else None,
            sensitive_fields=frozenset(sensitive_fields),
            max_attempts=max_attempts,
            backoff=0.0 if backoff is None else to_seconds(backoff, what=f"tool {label}'s backoff"),
            requires_approval=requires_approval,
            keyword_call=keyword,
            call_param=call_param,
        )
    except (TypeError, ValueError) as error:
        raise DefinitionError(f"tool {label}: its input can't be a schema: {error}") from None


def _check_takes(handler: Callable[..., Any], label: str, input_type: type, keyword: bool, call_param: str | None) -> None:
    """DefinitionError unless the handler can take what `Tool.invoke` will give it: a call would
    otherwise fail every time, its error sent to the agent, in a run that goes on `completed`."""
    try:
        signature = inspect.signature(handler, eval_str=True)  # shown as written, not as strings
    except Exception:  # an annotation that doesn't resolve
        signature = inspect.signature(handler)
    takes_input = input_type is not NO_INPUT
    try:
        if keyword:
            fields: tuple[str, ...] = getattr(input_type, "__struct_fields__", ())
            signature.bind(**dict.fromkeys(fields), **({call_param: None} if call_param else {}))
        else:
            signature.bind(*([None] if takes_input else []), *([None] if call_param else []))
    except TypeError as error:
        given = f"an {input_type.__name__}" if takes_input else "nothing"
        raise DefinitionError(
            f"tool {label}: its handler {label}{signature} can't take {given}"
            f"{' and the ToolCall' if call_param else ''} as a call gives it: {error}"
        ) from None
    if takes_input and not keyword:
        first = next(iter(signature.parameters.values()))
        try:
            annotation = typing.get_type_hints(handler).get(first.name, Any)
        except Exception:  # an annotation that doesn't resolve is the handler's own business
            return
        if annotation is not Any and isinstance(annotation, type) and not issubclass(input_type, annotation):
            raise DefinitionError(
                f"tool {label}: its input is {input_type.__name__}, but its handler's {first.name} is a "
                f"{annotation.__name__}"
            )


def tool(
    handler: Callable[..., Any] | None = None,
    *,
    description: str | None = None,
    input: type | None = None,
    output: Any = None,
    timeout: Duration | bool | None = None,
    allowed_agents: Sequence[str] | None = None,
    sensitive_fields: Sequence[str] = (),
    max_attempts: int = 1,
    backoff: Duration | None = None,
    requires_approval: bool = False,
) -> Any:
    """Define a tool from `handler`, or, without one, a decorator that does.

    `timeout` is each call's budget (30 s by default; `False` leaves only the turn's
    deadline). `max_attempts` above 1 retries a handler that raised, after `backoff`,
    so give it only to handlers that are safe to run twice. `output` validates what the
    handler returns. `allowed_agents` limits which agents may call it; `sensitive_fields`
    are redacted in the record and logs; `requires_approval` makes every call wait for a
    person's decision.
    """
    options = dict(
        description=description,
        input=input,
        output=output,
        timeout=timeout,
        allowed_agents=allowed_agents,
        sensitive_fields=sensitive_fields,
        max_attempts=max_attempts,
        backoff=backoff,
        requires_approval=requires_approval,
    )
    if handler is None:
        return lambda fn: _make_tool(fn, **options)  # type: ignore[arg-type]
    return _make_tool(handler, **options)  # type: ignore[arg-type]


def check_tools(agent: str, tools: Mapping[str, Tool]) -> dict[str, Tool]:
    """The agent's tools, after checking every limit; raises DefinitionError naming the first broken one."""
    if not isinstance(tools, Mapping):
        raise DefinitionError(f"agent {agent}: tools must be a dict of name to tool(...)")
    if len(tools) > MAX_TOOLS_PER_AGENT:
        raise DefinitionError(f"agent {agent} has {len(tools)} tools; an agent holds at most {MAX_TOOLS_PER_AGENT}")
    checked: dict[str, Tool] = {}
    for name, value in tools.items():
        if not isinstance(value, Tool):
            raise DefinitionError(f"agent {agent}: tool {name!r} must be made with tool(...), not {value!r}")
        if not isinstance(name, str) or not is_tool_name(name):
            raise DefinitionError(
                f"{name!r} is not a tool name: lowercase letters, digits and '_', starting with a letter, "
                f"at most {MAX_TOOL_NAME_CHARS} characters"
            )
        size = len(value.description.encode())
        if not value.description.strip() or size > MAX_DESCRIPTION_BYTES:
            raise DefinitionError(
                f"tool {name}: its description must be non-empty and at most {MAX_DESCRIPTION_BYTES} bytes "
                f"(it is {size}); it is what the agent reads to decide when to call it"
            )
        schema = value.taught.schema
        schema_size = len(msgspec.json.encode(schema))
        if schema.get("type") != "object" or schema_size > MAX_INPUT_SCHEMA_BYTES:
            raise DefinitionError(
                f"tool {name}: its input schema must be an object of at most {MAX_INPUT_SCHEMA_BYTES} bytes "
                f"(it is {schema_size})"
            )
        if value.timeout is not None and not math.isfinite(value.timeout):
            raise DefinitionError(f"tool {name}: timeout must be finite, or False for the turn's deadline")
        checked[name] = value
    return checked

