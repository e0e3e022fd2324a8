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

VERDICT = '''
import msgspec
from agentswf import workflow

class Verdict(msgspec.Struct):
    ok: bool
'''
"""A workflow file's start: its imports and the schema its turns take."""

FINE = VERDICT + '''
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


RUN_TIME_MISTAKES = VERDICT + '''
@workflow(name="late", description="Mistakes a run meets at once.")
async def late(wf) -> None:
    reviewer = await wf.agents.open("r", runtime="shell:true")
    await reviewer.run("Review.", schema=Verdict(True))
    await reviewer.run("Review.", budget=3)
    other = await wf.agents.open("o", runtime="shell:true", timeout="1m")
    await reviewer.run("Review.", timeout="1h")
'''


def test_an_instance_for_a_schema_and_an_unknown_keyword_are_found(tmp_path):
    done = check(tmp_path, RUN_TIME_MISTAKES)
    said = done.stderr
    assert done.returncode == 2, said
    assert "flow.py:11: schema=Verdict(True) is an instance of Verdict; a turn's schema is the type: schema=Verdict\n" in said
    assert "flow.py:12: reviewer.run() takes no budget=; it takes prompt, schema, timeout, deadline, id, nudge\n" in said
    assert "flow.py:13: wf.agents.open() takes no timeout=; it takes key, runtime, tools," in said
    assert "3 problem(s)" in said


def test_a_turn_timeout_past_the_runs_is_warned_of_naming_both_and_the_flag(tmp_path):
    source = FINE.replace('timeout="20m"', 'timeout="1h"')
    done = check(tmp_path, source)
    assert done.returncode == 0, done.stderr
    assert (
        "flow.py:11: warning: the turn's timeout='1h' is longer than the run's default timeout, 30m, which ends "
        "the turn first; give the run more: awf run --timeout 1h or longer\n"
    ) in done.stderr
    assert "warning" not in check(tmp_path, source, "--timeout", "2h").stderr  # as the run would be given
    assert "the run's timeout, 45m," in check(tmp_path, source, "--timeout", "45m").stderr

    run = subprocess.run(
        [sys.executable, "-m", "agentswf", "run", "flow.py", "--timeout", "2s"], capture_output=True, text=True,
        timeout=60, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert run.stderr.count("warning: the turn's timeout='1h' is longer than the run's timeout, 2s,") == 1, run.stderr


def test_the_closing_line_says_what_was_checked_by_kind(tmp_path):
    done = check(tmp_path, FINE)
    assert done.stderr == (
        f"awf: {tmp_path / 'flow.py'}: no problem found; checked 1 runtime, 1 schema, 1 timeout and 2 calls of agents' "
        "methods (what the workflow computes is checked when it runs)\n"
    )


def test_its_help_says_what_it_does_not_where_in_the_source(tmp_path):
    done = subprocess.run([sys.executable, "-m", "agentswf", "check", "--help"], capture_output=True, text=True, check=False)
    assert "checking.py" not in done.stdout and "--timeout" in done.stdout and "[-- args…]" in done.stdout
