"""What every turn's prompt teaches about the agent's tools."""

from __future__ import annotations

import msgspec
import pytest

from agentswf import tool, workflow
from agentswf.testing import answer, run_workflow, silent

from .kit import dead_code

pytestmark = pytest.mark.anyio


class Label(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    labels: list[str]


def _launcher(prompt: str) -> str:
    """The launcher's absolute path, as the answer block shows it."""
    line = next(line for line in prompt.splitlines() if line.startswith("/") and " result " in line)
    return line.split(" result ")[0]


async def test_the_seeds_block_for_the_dead_code_workflow_exactly(tmp_path):
    prompts = []

    def reviewer(turn):
        prompts.append(turn.prompt)
        return "No dead code."

    await run_workflow(dead_code, agents={"reviewer": answer(reviewer)}, run_root=tmp_path)
    [prompt] = prompts
    wfa = _launcher(prompt)
    assert wfa.startswith("/") and wfa.endswith("/wfa")
    block = f"""You have tools the workflow runs for you. Call one with:

{wfa} tool <name> --<option> '<value>' ...

Put every value in single quotes; a ' inside a value is written '\\''.

- add_finding: Record one finding as soon as you are sure of it.
  {wfa} tool add_finding --file <text, at least 1 character> --line <integer, at least 1> --problem <text, at least 1 character>
- list_findings: The findings recorded so far, one per line.
  {wfa} tool list_findings
"""
    assert prompt.endswith(block)
    # after how to answer
    assert prompt.index(f"{wfa} result ") < prompt.index("You have tools")
    assert prompt.startswith("Find dead code in src/. Record each finding with add_finding as you go.")


async def test_a_list_input_is_taught_as_its_json_schema_with_a_heredoc(tmp_path):
    prompts = []

    def script(turn):
        prompts.append(turn.prompt)
        return "ok"

    @workflow(name="t", description="d")
    async def fn(wf):
        agent = await wf.agents.open(
            "a",
            runtime="shell:true",
            tools={
                "label_item": tool(lambda item: "ok", input=Label, description="Label one item."),
                "ping": tool(lambda: "pong", description="Ping."),
            },
        )
        await agent.run("Go.")

    await run_workflow(fn, agents={"a": answer(script)}, run_root=tmp_path)
    [prompt] = prompts
    wfa = _launcher(prompt)
    lines = prompt.splitlines()
    start = lines.index("- label_item: Label one item.")
    taught = lines[start + 1]
    prefix = "  Its input is JSON matching this schema: "
    assert taught.startswith(prefix)
    schema = msgspec.json.decode(taught[len(prefix) :])
    assert schema["properties"] == {"id": {"type": "string"}, "labels": {"type": "array", "items": {"type": "string"}}}
    assert schema["required"] == ["id", "labels"]
    assert lines[start + 2 : start + 5] == [f"{wfa} tool label_item <<'WF_JSON'", "<json>", "WF_JSON"]
    # the heredoc form is taught in the header too; the terminator is never indented
    assert f"{wfa} tool <name> <<'WF_JSON'" in lines
    assert "  WF_JSON" not in prompt
    # a tool without input: its name alone
    assert lines[lines.index("- ping: Ping.") + 1] == f"  {wfa} tool ping"
    assert "Put every value in single quotes; a ' inside a value is written '\\''." in lines


async def test_every_turn_and_the_check_in_teach_the_tools_and_an_agent_without_tools_is_taught_none(tmp_path):
    prompts: dict[str, list[str]] = {"a": [], "b": []}

    def record(key):
        def script(turn):
            prompts[key].append(turn.prompt)
            return "ok"

        return script

    def check_in(turn):
        prompts["a"].append(turn.prompt)

    @workflow(name="t", description="d")
    async def fn(wf):
        a = await wf.agents.open(
            "a", runtime="shell:true", tools={"ping": tool(lambda: "pong", description="Ping the workflow.")}
        )
        b = await wf.agents.open("b", runtime="shell:true")
        await a.run("First.")
        await a.run("Second.")
        await b.run("Plain.")

    await run_workflow(
        fn,
        agents={"a": [answer(record("a")), silent(), answer(record("a"))], "b": answer(record("b"))},
        run_root=tmp_path,
    )
    assert len(prompts["a"]) == 2  # the first turn, and the second turn's check-in
    for prompt in prompts["a"]:
        assert "- ping: Ping the workflow." in prompt and f"{_launcher(prompt)} tool ping" in prompt
    assert "You finished without handing in the answer" in prompts["a"][1]
    [plain] = prompts["b"]
    assert "tool" not in plain


async def test_optional_fields_are_taught_in_brackets(tmp_path):
    prompts = []

    def search(query: str, limit: int = 10) -> str:
        return "x"

    @workflow(name="t", description="d")
    async def fn(wf):
        agent = await wf.agents.open("a", runtime="shell:true", tools={"search": tool(search, description="Search.")})
        await agent.run("Go.")

    await run_workflow(fn, agents={"a": answer(lambda turn: prompts.append(turn.prompt) or "ok")}, run_root=tmp_path)
    wfa = _launcher(prompts[0])
    assert f"  {wfa} tool search --query <text> [--limit <integer>]" in prompts[0].splitlines()
