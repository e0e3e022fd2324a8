"""Review, fix, review again: a reviewer hands in a typed verdict, a fixer says what it changed.

Runs offline: both agents are small scripts run as shell agents, answering through
`wfa` exactly as an LLM agent would. Swap their runtime for "claude" or "codex" and the
workflow stays the same.

    awf run examples/review_fix/review_fix.py            # up to 3 rounds
    awf run examples/review_fix/review_fix.py -- --rounds 1
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from agentswf import Runtime, Workflow, workflow

HERE = Path(__file__).resolve().parent


class Verdict(msgspec.Struct, forbid_unknown_fields=True):
    """The reviewer's answer: taught as flags, since it is a few simple fields."""

    verdict: Literal["approve", "changes"]
    problem: str = ""


class FixReport(msgspec.Struct, forbid_unknown_fields=True):
    """The fixer's answer: taught as JSON, since it holds a list."""

    files: list[str]
    summary: str


class Args(msgspec.Struct, forbid_unknown_fields=True):
    rounds: Annotated[int, msgspec.Meta(ge=1, le=5)] = 3


def script_agent(name: str) -> Runtime:
    return Runtime(harness="shell", command=(sys.executable, str(HERE / "agents" / f"{name}.py")))


@workflow(name="review-fix", description="A reviewer and a fixer take turns until the review approves.")
async def review_fix(wf: Workflow, args: Args) -> dict[str, Any]:
    workspace = Path(tempfile.mkdtemp(prefix="review-fix-"))
    shutil.copytree(HERE / "project", workspace, dirs_exist_ok=True)
    try:
        reviewer = await wf.agents.open(
            "reviewer",
            runtime=script_agent("reviewer"),
            cwd=workspace,
            instructions="You review changes to this Python project. Run its checks before you judge.",
        )
        fixer = await wf.agents.open("fixer", runtime=script_agent("fixer"), cwd=workspace)
        fixed: list[str] = []
        for round_ in range(1, args.rounds + 1):
            review = await reviewer.run("Review the project in your working directory.", schema=Verdict, timeout="2m")
            if not review.answered:
                wf.stop(f"the review ended {review.outcome.kind}: {review.outcome.reason}")
            verdict: Verdict = review.value
            wf.log("reviewed", round=round_, verdict=verdict.verdict)
            if verdict.verdict == "approve":
                return {"verdict": "approve", "rounds": round_, "fixed": fixed}
            fix = await fixer.run(f"Fix this problem, and nothing else: {verdict.problem}", schema=FixReport, timeout="5m")
            if not fix.answered:
                wf.stop(f"the fix ended {fix.outcome.kind}: {fix.outcome.reason}")
            fixed.extend(fix.value.files)
        wf.stop(f"no approval after {args.rounds} rounds")
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
