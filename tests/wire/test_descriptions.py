"""A field's description reaches the agent: beside its flag, and inside the JSON Schema taught."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated, Literal

import msgspec
import pytest

from agentswf import tool, workflow
from agentswf.testing import run_workflow
from agentswf.wire.prompts import answer_block, tools_block
from agentswf.wire.teaching import MAX_FLAG_DESCRIPTION_CHARS, Taught

pytestmark = pytest.mark.anyio

WFA = Path("/run/wfa")


class Verdict(msgspec.Struct):
    verdict: Annotated[Literal["safe", "unsafe"], msgspec.Meta(description="whether the change is safe to merge")]
    notes: Annotated[str, msgspec.Meta(description="what a reviewer\n   should read first")] = ""
    score: int = 0


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Sub(msgspec.Struct):
    a: int


class Nested(msgspec.Struct):
    sub: Annotated[Sub, msgspec.Meta(description="the part that was checked")]
    color: Annotated[Color, msgspec.Meta(description="the part's colour")]
    items: Annotated[list[str], msgspec.Meta(description="what was found")]


def test_an_answer_fields_description_is_taught_beside_its_flag():
    block = answer_block(WFA, "c1", Taught(Verdict))
    lines = block.splitlines()
    assert "--verdict: whether the change is safe to merge" in lines
    assert "--notes: what a reviewer should read first" in lines  # one line, whitespace collapsed
    assert not any(line.startswith("--score:") for line in lines)  # no description, no line
    assert block.index("/run/wfa result c1 --verdict") < block.index("--verdict: whether")


def test_a_tool_parameters_annotated_description_is_taught():
    def label(item: Annotated[str, "the item's name"], count: int) -> str:
        """Label an item."""
        return "ok"

    block = tools_block(WFA, {"label": tool(label)})
    lines = block.splitlines()
    usage = lines.index("  /run/wfa tool label --item <text> --count <integer>")
    assert lines[usage + 1] == "    --item: the item's name"
    assert not any("--count:" in line for line in lines)


def test_the_seed_block_is_unchanged_without_descriptions():
    class Finding(msgspec.Struct):
        file: Annotated[str, msgspec.Meta(min_length=1)]
        line: Annotated[int, msgspec.Meta(ge=1)]

    block = answer_block(WFA, "c1", Taught(Finding))
    assert "What each flag is" not in block


def test_a_long_description_is_cut_to_one_short_line():
    class Long(msgspec.Struct):
        why: Annotated[str, msgspec.Meta(description="word " * 100)]

    [note] = Taught(Long).flag_notes()
    assert len(note) <= len("--why: ") + MAX_FLAG_DESCRIPTION_CHARS and note.endswith("…")
    assert "\n" not in note


def test_descriptions_stay_in_the_json_schema_taught_even_beside_a_reference():
    schema = Taught(Nested).schema
    properties = schema["properties"]
    assert properties["sub"]["description"] == "the part that was checked"
    assert properties["sub"]["properties"] == {"a": {"type": "integer"}}  # the reference is inlined
    assert properties["color"]["description"] == "the part's colour"
    assert properties["items"]["description"] == "what was found"
    block = answer_block(WFA, "c1", Taught(Nested))
    assert "the part that was checked" in block and "the part's colour" in block


def test_an_enum_fields_description_is_taught_as_a_flag():
    class Paint(msgspec.Struct):
        color: Annotated[Color, msgspec.Meta(description="the part's colour")]

    assert Taught(Paint).flag_notes() == ["--color: the part's colour"]


def test_a_schema_that_is_not_a_type_says_what_is_accepted():
    class Plain:
        pass

    for schema in (Plain, object, "str"):
        with pytest.raises(TypeError) as raised:
            Taught(schema)
        text = str(raised.value)
        assert "msgspec.Struct" in text and "schema_hook" not in text


async def test_a_turn_with_a_plain_class_as_schema_says_what_is_accepted(tmp_path):
    class Plain:
        pass

    @workflow(name="plain", description="A turn with a schema that isn't one.")
    async def plain(wf):
        agent = await wf.agents.open("a", runtime="claude")
        await agent.run("Go.", schema=Plain)

    run = await run_workflow(plain, agents={"a": []}, run_root=tmp_path)
    assert run.outcome == "failed"
    assert "msgspec.Struct" in run.reason and "schema_hook" not in run.reason

