"""A workflow's args as Python reads them: its parameter's default where none are given, a bare
word for a `str`, and a malformed argument that says what was expected, with an example."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from agentswf import workflow
from agentswf.cli.failures import UsageFailure
from agentswf.cli.run import parse_args
from agentswf.testing import run_workflow
from agentswf.workflow.running import decode_args

FILE = '''
import msgspec
from agentswf import workflow

@workflow(name="defaulted", description="Says which runtime it would use.")
async def defaulted(wf, runtime: str = "fake") -> str:
    return runtime
'''


@workflow(name="defaulted", description="Says which runtime it would use.")
async def defaulted(wf, runtime: str = "fake") -> str:
    return runtime


class Wide(msgspec.Struct):
    a: int = 1
    b: int = 2
    c: int = 3
    d: int = 4
    e: int = 5
    f: int = 6
    g: int = 7


@workflow(name="wide", description="Seven fields: one JSON value.")
async def wide(wf, args: Wide) -> int:
    return args.g


@workflow(name="counted", description="Takes a number.")
async def counted(wf, n: int) -> int:
    return n


def test_a_parameters_default_applies_when_no_args_are_given():
    assert parse_args(defaulted, []) is None
    assert decode_args(defaulted, None) == "fake"
    assert decode_args(defaulted, "codex") == "codex"


def test_a_bare_word_is_a_str_and_a_json_string_the_string_it_holds():
    assert parse_args(defaulted, ["codex"]) == "codex"
    assert parse_args(defaulted, ['"codex"']) == "codex"


def test_a_malformed_argument_says_what_was_expected_with_an_example():
    with pytest.raises(UsageFailure, match=r"e\.g\. -- '3'"):
        parse_args(counted, ["three"])
    with pytest.raises(UsageFailure, match=r"more than 6 fields.*is JSON"):
        parse_args(wide, ["--g", "9"])
    assert parse_args(wide, ['{"g": 9}']) == Wide(g=9)


@pytest.mark.anyio
async def test_run_workflow_takes_the_default_too():
    run = await run_workflow(defaulted, agents={})
    assert run.value == "fake"
    run = await run_workflow(defaulted, args="codex", agents={})
    assert run.value == "codex"


def test_awf_run_takes_the_default_and_a_bare_word(tmp_path: Path):
    path = tmp_path / "defaulted.py"
    path.write_text(FILE)
    for words, value in (([], "fake"), (["--", "codex"], "codex")):
        done = subprocess.run(
            [sys.executable, "-m", "agentswf", "run", str(path), *words], capture_output=True, text=True,
            timeout=60, cwd=tmp_path, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == value


@workflow(name="misspelt", description="Fails before any agent opens.")
async def misspelt(wf) -> str:
    agent = await wf.agents.open("a", runtime="claude-code")
    return (await agent.run("Review.")).value


@pytest.mark.anyio
async def test_run_workflow_reports_the_workflows_own_failure_before_a_script_it_never_reached():
    from agentswf.testing import answer

    run = await run_workflow(misspelt, agents={"a": answer("ok")})
    assert run.outcome == "failed" and "unknown runtime 'claude-code'" in (run.reason or "")
    with pytest.raises(AssertionError) as failed:
        run.value
    message = str(failed.value)
    assert message.index("unknown runtime") < message.index("never opened")  # its own failure first
    assert "test_workflow_args.py:" in message  # with its line


@workflow(name="unawaited", description="Forgets an await.")
async def unawaited(wf) -> str:
    agent = wf.agents.open("a", runtime="shell:true")
    return (await agent.run("Review.")).value  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_a_missing_await_is_named_as_such():
    run = await run_workflow(unawaited, agents={})
    assert run.outcome == "failed"
    assert "did you forget to await wf.agents.open(...)?" in (run.reason or ""), run.reason
