"""`awf check FILE`: a workflow's mistakes found at once, each with its line, before anything runs;
and a tool whose handler can't take its input refused where it is defined."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from agentswf import tool
from agentswf.errors import DefinitionError

MISTAKES = '''
import msgspec
from agentswf import Runtime, workflow

class NotASchema:
    pass

@workflow(name="bad", description="Many mistakes.")
async def bad(wf, n: int = 1) -> str:
    a = await wf.agents.open("a", runtime="claude-code")
    b = await wf.agents.open("b", runtime=Runtime(harness="codex", effort="extreme"))
    c = await wf.agents.open("c", runtime="shell:true", sandbox={"write": ["."], "network": ["https://x"]})
    await a.run("Review.", schema=list[NotASchema], timeout="20 minutes")
    return "ok"
'''

FINE = '''
import msgspec
from agentswf import workflow

class Verdict(msgspec.Struct):
    ok: bool

@workflow(name="fine", description="No mistake.")
async def fine(wf) -> bool:
    a = await wf.agents.open("a", runtime="shell:true")
    return (await a.run("Review.", schema=Verdict, timeout="20m")).value.ok
'''


def check(tmp_path: Path, source: str, *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "flow.py"
    path.write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "agentswf", "check", str(path), *args], capture_output=True, text=True, timeout=60,
        cwd=tmp_path, check=False,
    )  # fmt: skip


def test_every_mistake_is_found_at_once_with_its_line(tmp_path):
    done = check(tmp_path, MISTAKES, "--", "three")
    assert done.returncode == 2, done.stderr
    said = done.stderr
    assert "args: JSON is malformed" in said and "e.g. -- '3'" in said
    assert "flow.py:10: unknown runtime 'claude-code'" in said
    assert "flow.py:11: codex has no effort 'extreme'" in said
    assert "flow.py:12: sandbox network: 'https://x'" in said
    assert "flow.py:13: timeout must be" in said
    assert "flow.py:13: list[NotASchema] can't be a turn's schema" in said
    assert "6 problem(s)" in said


def test_a_file_without_mistakes_passes_and_nothing_runs(tmp_path):
    done = check(tmp_path, FINE)
    assert done.returncode == 0, done.stderr
    assert "no problem found" in done.stderr and not (tmp_path / ".awf").exists()


def test_a_tool_in_a_file_that_cant_load_is_named(tmp_path):
    source = FINE + "\nfrom agentswf import tool\nclose = tool(lambda a, b, c: None, description='Close.', input=Verdict)\n"
    done = check(tmp_path, source)
    assert done.returncode == 2 and "tool <lambda>: its handler" in done.stderr, done.stderr


class Item(msgspec.Struct):
    a: int
    b: int


def test_a_tool_whose_handler_cant_take_its_input_is_refused_where_it_is_defined():
    def close(a: int, b: int, c: int) -> None: ...

    with pytest.raises(DefinitionError, match=r"tool close: its handler close\(a: int, b: int, c: int\)"):
        tool(close, description="Close.", input=Item)

    def takes_other(item: str) -> None: ...

    with pytest.raises(DefinitionError, match="its input is Item, but its handler's item is a str"):
        tool(takes_other, description="Close.", input=Item)

    def fine(item: Item) -> None: ...

    assert tool(fine, description="Close.", input=Item).input is Item
