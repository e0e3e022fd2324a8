"""Shared pieces for the tool tests: the API.md's dead_code workflow, and shell agents."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Any

import msgspec

import agentswf
from agentswf import ToolCall, Workflow, tool, workflow
from agentswf.engine.record.layout import read_lines


class Finding(msgspec.Struct, forbid_unknown_fields=True):
    file: Annotated[str, msgspec.Meta(min_length=1)]
    line: Annotated[int, msgspec.Meta(ge=1)]
    problem: Annotated[str, msgspec.Meta(min_length=1)]


@workflow(name="dead-code", description="An agent records each finding through a tool.")
async def dead_code(wf: Workflow) -> dict:
    findings: list[Finding] = []

    def add_finding(finding: Finding, call: ToolCall) -> str:
        if any(f.file == finding.file and f.line == finding.line for f in findings):
            raise ValueError(f"{finding.file}:{finding.line} is already recorded")
        findings.append(finding)
        return f"Recorded; {len(findings)} so far."

    reviewer = await wf.agents.open(
        key="reviewer",
        runtime="codex",
        tools={
            "add_finding": tool(
                add_finding, input=Finding, description="Record one finding as soon as you are sure of it."
            ),
            "list_findings": tool(
                lambda: "\n".join(f"{f.file}:{f.line}  {f.problem}" for f in findings) or "None yet.",
                description="The findings recorded so far, one per line.",
            ),
        },
    )
    turn = await reviewer.run(
        prompt="Find dead code in src/. Record each finding with add_finding as you go.", timeout="20m"
    )
    return {"findings": findings, "ended": "answered" if turn.outcome.answered else turn.outcome.reason}


def shell_agent(tmp_path: Path, name: str, body: str) -> str:
    """A shell agent running `body` (sh) with $OUT the test's directory; its runtime alias."""
    script = tmp_path / f"{name}.sh"
    script.write_text(f"#!/bin/sh\nOUT={shlex.quote(str(tmp_path))}\n{body}\n")
    script.chmod(0o755)
    return f"shell:{script}"


def call_tool(tag: str, command: str, heredoc: str | None = None) -> str:
    """Shell lines running `"$WFA" tool <command>`, saving its exit code, stdout and stderr as $OUT/<tag>.*

    Without `heredoc` standard input is /dev/null (a shell agent's own stdin holds its prompt).
    """
    saving = f'>"$OUT/{tag}.out" 2>"$OUT/{tag}.err"'
    if heredoc is None:
        return f'"$WFA" tool {command} </dev/null {saving}; echo $? >"$OUT/{tag}.rc"'
    return f"\"$WFA\" tool {command} {saving} <<'WF_JSON'\n{heredoc}\nWF_JSON\necho $? >\"$OUT/{tag}.rc\""


def answer_line() -> str:
    return 'echo \'"done"\' | "$WFA" result "$WFA_CALL_ID" >/dev/null 2>&1'


class Saved(msgspec.Struct):
    rc: int
    out: str
    err: str


def saved(tmp_path: Path, tag: str) -> Saved:
    return Saved(
        int((tmp_path / f"{tag}.rc").read_text().strip()),
        (tmp_path / f"{tag}.out").read_text(),
        (tmp_path / f"{tag}.err").read_text(),
    )


async def run_wf(fn: Any, tmp_path: Path, *, policies: Any = (), **kwargs: Any) -> agentswf.RunResult:
    definition = workflow(name="t", description="A test workflow.", policies=policies)(fn)
    return await agentswf.run(definition, run_root=tmp_path / "runs", cwd=tmp_path, **kwargs)


def tool_lines(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "tools.jsonl"
    return list(read_lines(path)) if path.exists() else []


async def cancel_after(seconds: float, work: Any) -> None:
    """Await `work()`, cancelling it after `seconds` by hand: not a deadline it could see
    (a turn's deadline includes the effective deadline of the scope it is run in)."""
    import anyio

    async with anyio.create_task_group() as group:

        async def stop() -> None:
            await anyio.sleep(seconds)
            group.cancel_scope.cancel()

        group.start_soon(stop)
        await work()
        group.cancel_scope.cancel()
