"""Defining tools: handlers sync or async, input from a Struct or from the handler's
own annotated parameters, the call a handler is given, the limits checked at open, reopening."""

from __future__ import annotations

from typing import Annotated

import anyio
import anyio.lowlevel
import msgspec
import pytest

from agentswf import DefinitionError, ToolCall, tool, workflow
from agentswf.testing import ToolRefused, ToolResult, answer, run_workflow

from .kit import Finding

pytestmark = pytest.mark.anyio


def _wf(fn):
    return workflow(name="t", description="A test workflow.")(fn)


async def _run(fn, tmp_path, agents):
    return await run_workflow(_wf(fn), agents=agents, run_root=tmp_path)


# Handlers ------------------------------------------------------------------------------


async def test_sync_and_async_handlers_both_answer(tmp_path):
    def sync_add(a: int, b: int) -> int:
        return a + b

    async def async_add(a: int, b: int) -> int:
        await anyio.lowlevel.checkpoint()
        return a * b

    seen = []

    async def script(turn):
        seen.append(await turn.tool("sync_add", {"a": 2, "b": 3}))
        seen.append(await turn.tool("async_add", {"a": 2, "b": 3}))
        return "done"

    async def fn(wf):
        agent = await wf.agents.open(
            "a",
            runtime="shell:true",
            tools={
                "sync_add": tool(sync_add, description="Add."),
                "async_add": tool(async_add, description="Multiply."),
            },
        )
        return (await agent.run("Go.")).outcome.kind

    run = await _run(fn, tmp_path, {"a": answer(script)})
    assert run.value == "answered"
    assert seen == [ToolResult(output=5), ToolResult(output=6)]


async def test_the_decorator_form_and_the_docstring_as_description(tmp_path):
    @tool()
    def current_time(timezone: Annotated[str, "The timezone, e.g. Europe/Paris"]) -> str:
        """Return the current time in the given timezone in iso format.

        More details that are not the summary.
        """
        return f"noon in {timezone}"

    assert current_time.description == "Return the current time in the given timezone in iso format."
    schema = current_time.taught.schema
    assert schema["type"] == "object" and schema["required"] == ["timezone"]
    assert schema["properties"]["timezone"] == {"type": "string", "description": "The timezone, e.g. Europe/Paris"}

    @tool(description="Given explicitly.")
    async def other() -> str:
        """Not this."""
        return "x"

    assert other.description == "Given explicitly."
    assert not other.takes_input

    seen = []

    async def script(turn):
        seen.append(await turn.tool("current_time", {"timezone": "Europe/Paris"}))
        seen.append(await turn.tool("current_time", args=["--timezone", "UTC"]))
        return "done"

    async def fn(wf):
        agent = await wf.agents.open("a", runtime="shell:true", tools={"current_time": current_time})
        return (await agent.run("Go.")).outcome.kind

    assert (await _run(fn, tmp_path, {"a": answer(script)})).value == "answered"
    assert seen == [ToolResult(output="noon in Europe/Paris"), ToolResult(output="noon in UTC")]


def test_docstring_parameter_descriptions_reach_the_schema():
    def search(query: str, limit: int = 10, call: ToolCall | None = None) -> list:
        """Search the tickets.

        Args:
            query: What to look for.
            limit: At most this many.
        """
        return []

    def search_sphinx(query: str) -> list:
        """Search.

        :param query: The words to find.
        """
        return []

    made = tool(search)
    props = made.taught.schema["properties"]
    assert props["query"] == {"type": "string", "description": "What to look for."}
    assert props["limit"]["description"] == "At most this many." and props["limit"]["default"] == 10
    assert made.taught.schema["required"] == ["query"]
    assert tool(search_sphinx).taught.schema["properties"]["query"]["description"] == "The words to find."


def test_a_parameter_annotated_toolcall_is_not_an_input_field():
    def handler(name: str, call: ToolCall) -> str:
        return name

    made = tool(handler, description="d")
    assert set(made.taught.schema["properties"]) == {"name"}
    assert made.call_param == "call"


async def test_input_from_parameters_is_given_as_keywords_with_defaults(tmp_path):
    got = []

    def search(query: str, limit: int = 10) -> str:
        got.append((query, limit))
        return "ok"

    seen = []

    async def script(turn):
        seen.append(await turn.tool("search", {"query": "x"}))
        seen.append(await turn.tool("search", {"query": "y", "limit": 2}))
        seen.append(await turn.tool("search", {"limit": 2}))
        seen.append(await turn.tool("search", {"query": "z", "extra": 1}))
        return "done"

    async def fn(wf):
        agent = await wf.agents.open("a", runtime="shell:true", tools={"search": tool(search, description="S.")})
        return (await agent.run("Go.")).outcome.kind

    assert (await _run(fn, tmp_path, {"a": answer(script)})).value == "answered"
    assert got == [("x", 10), ("y", 2)]
    assert seen[:2] == [ToolResult(output="ok")] * 2
    assert isinstance(seen[2], ToolRefused) and seen[2].code == "invalid-input" and "query" in seen[2].error
    assert isinstance(seen[3], ToolRefused) and seen[3].code == "invalid-input" and "extra" in seen[3].error


async def test_without_input_the_handler_is_called_with_nothing(tmp_path):
    called = []

    async def script(turn):
        assert await turn.tool("ping") == ToolResult(output="pong")
        assert await turn.tool("ping", {}) == ToolResult(output="pong")
        refused = await turn.tool("ping", {"x": 1})
        assert isinstance(refused, ToolRefused) and refused.code == "invalid-input"
        return "done"

    async def fn(wf):
        tools = {"ping": tool(lambda: called.append(1) or "pong", description="Ping.")}
        agent = await wf.agents.open("a", runtime="shell:true", tools=tools)
        return (await agent.run("Go.")).outcome.kind

    assert (await _run(fn, tmp_path, {"a": answer(script)})).value == "answered"
    assert called == [1, 1]


async def test_the_handler_is_given_the_call_id_unique_in_the_run_and_the_agents_key(tmp_path):
    calls: list[ToolCall] = []

    def with_struct(finding: Finding, call: ToolCall) -> str:
        calls.append(call)
        return call.id

    def with_params(n: int, call: ToolCall) -> str:
        calls.append(call)
        return call.id

    def only_call(call: ToolCall) -> str:
        calls.append(call)
        return call.id

    tools = {
        "with_struct": tool(with_struct, input=Finding, description="S."),
        "with_params": tool(with_params, description="P."),
        "only_call": tool(only_call, description="C."),
    }

    async def script(turn):
        ids = [
            (await turn.tool("with_struct", {"file": "a", "line": 1, "problem": "p"})).output,
            (await turn.tool("with_params", {"n": 1})).output,
            (await turn.tool("only_call")).output,
            (await turn.tool("only_call")).output,
        ]
        return ",".join(ids)

    async def fn(wf):
        first = await wf.agents.open("rev-1", runtime="shell:true", tools=tools)
        second = await wf.agents.open("rev-2", runtime="shell:true", tools=tools)
        turns = await wf.parallel([first, second], lambda agent: agent.run("Go."))
        return [turn.outcome.value for turn in turns]

    run = await _run(fn, tmp_path, {"rev-1": answer(script), "rev-2": answer(script)})
    ids = [call.id for call in calls]
    assert len(ids) == 8 and len(set(ids)) == 8  # unique in the run
    assert sorted(run.value[0].split(",") + run.value[1].split(",")) == sorted(ids)
    assert sorted(call.agent for call in calls) == ["rev-1"] * 4 + ["rev-2"] * 4
    for call in calls:
        assert call.id in run.value[0 if call.agent == "rev-1" else 1].split(",")
    assert {call.tool for call in calls} == {"with_struct", "with_params", "only_call"}
    assert not any(call.cancelled for call in calls)  # each returned in time


# Defining mistakes ---------------------------------------------------------------------


def test_mistakes_in_a_tool_definition_raise_at_once():
    with pytest.raises(DefinitionError, match="msgspec Struct"):
        tool(lambda x: x, input=dict, description="d")
    with pytest.raises(DefinitionError, match="type annotation"):
        tool(lambda x: x, description="d")
    with pytest.raises(DefinitionError, match="max_attempts"):
        tool(lambda: 1, description="d", max_attempts=0)
    with pytest.raises(DefinitionError):
        tool(lambda: 1, description="d", timeout="soon")
    with pytest.raises(DefinitionError, match="function"):
        tool("not a function", description="d")


# Limits, checked when the agent opens ---------------------------------------------------


def _ok():
    return tool(lambda: "x", description="A tool.")


def _big_input_type():
    fields = [(f"field_number_{i:03d}", Annotated[str, msgspec.Meta(description="d" * 60)]) for i in range(80)]
    return msgspec.defstruct("Big", fields)


LIMIT_CASES = {
    "17 tools": ({f"t{i}": _ok() for i in range(17)}, "at most 16"),
    "uppercase": ({"Add": _ok()}, "not a tool name"),
    "starts with a digit": ({"1add": _ok()}, "not a tool name"),
    "49 characters": ({"a" * 49: _ok()}, "not a tool name"),
    "a dash": ({"add-finding": _ok()}, "not a tool name"),
    "empty name": ({"": _ok()}, "not a tool name"),
    "empty description": ({"t": tool(lambda: 1, description="")}, "description"),
    "blank description": ({"t": tool(lambda: 1, description="   ")}, "description"),
    "description of 1025 bytes": ({"t": tool(lambda: 1, description="é" * 512 + "x")}, "1024"),
    "input schema over 8192 bytes": ({"t": tool(lambda v: 1, input=_big_input_type(), description="d")}, "8192"),
    "not made with tool()": ({"t": lambda: 1}, "tool\\(...\\)"),
}


@pytest.mark.parametrize("case", list(LIMIT_CASES))
async def test_a_broken_limit_fails_at_open(tmp_path, case):
    tools, message = LIMIT_CASES[case]
    assert len(msgspec.json.encode(msgspec.json.schema(_big_input_type()))) > 8192

    async def fn(wf):
        with pytest.raises(DefinitionError, match=message):
            await wf.agents.open("a", runtime="shell:true", tools=tools)
        return "a" in wf.agents

    run = await _run(fn, tmp_path, {})  # no script: the agent never opens
    assert run.value is False  # nothing was opened


async def test_the_limits_themselves_are_allowed(tmp_path):
    def fits_schema():
        fields = [(f"f{i:03d}", str) for i in range(200)]
        made = msgspec.defstruct("Fits", fields)
        return made

    fits = fits_schema()
    assert len(msgspec.json.encode(tool(lambda v: 1, input=fits, description="d").taught.schema)) <= 8192
    tools = {f"t{i}": _ok() for i in range(14)}
    tools["a" * 48] = tool(lambda: 1, description="é" * 512)  # 1,024 bytes
    tools["x_9"] = tool(lambda v: 1, input=fits, description="d")

    async def fn(wf):
        agent = await wf.agents.open("a", runtime="shell:true", tools=tools)
        return sorted(agent.tools) == sorted(tools)

    assert (await _run(fn, tmp_path, {"a": answer("x")})).value is True


# Reopening -----------------------------------------------------------------------------


async def test_reopening_with_the_same_tools_keeps_them_and_the_new_handlers_replace_the_old(tmp_path):
    ran = []

    def first(n: int) -> str:
        ran.append("first")
        return "first"

    def second(n: int) -> str:
        ran.append("second")
        return "second"

    seen = []

    async def script(turn):
        seen.append(await turn.tool("count", {"n": 1}))
        return "done"

    async def fn(wf):
        a = await wf.agents.open("a", runtime="shell:true", tools={"count": tool(first, description="Count.")})
        again = await wf.agents.open("a", runtime="shell:true", tools={"count": tool(second, description="Count.")})
        assert again is a
        await a.run("Go.")
        kept = await wf.agents.open("a", runtime="shell:true")  # tools left out: it keeps what it has
        assert kept is a and set(kept.tools) == {"count"}
        await a.run("Go again.")
        return "ok"

    assert (await _run(fn, tmp_path, {"a": answer(script)})).value == "ok"
    assert ran == ["second", "second"]
    assert seen == [ToolResult(output="second")] * 2


class Other(msgspec.Struct):
    n: str


REOPEN_CASES = {
    "another name": {"total": tool(lambda n: n, input=msgspec.defstruct("N", [("n", int)]), description="Count.")},
    "another description": {"count": tool(lambda n: n, input=msgspec.defstruct("N", [("n", int)]), description="Other.")},
    "another schema": {"count": tool(lambda v: v, input=Other, description="Count.")},
    "one more tool": {
        "count": tool(lambda n: n, input=msgspec.defstruct("N", [("n", int)]), description="Count."),
        "more": tool(lambda: 1, description="More."),
    },
    "no tools": {},
}


@pytest.mark.parametrize("case", list(REOPEN_CASES))
async def test_reopening_with_other_tools_raises(tmp_path, case):
    N = msgspec.defstruct("N", [("n", int)])

    async def fn(wf):
        a = await wf.agents.open("a", runtime="shell:true", tools={"count": tool(lambda v: v.n, input=N, description="Count.")})
        with pytest.raises(DefinitionError, match="same names, descriptions and schemas"):
            await wf.agents.open("a", runtime="shell:true", tools=REOPEN_CASES[case])
        return set(a.tools)

    assert (await _run(fn, tmp_path, {"a": answer("x")})).value == {"count"}
