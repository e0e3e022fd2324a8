"""`run_workflow`: the real engine, with the named agents played by scripts."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.records import read_lines
from ..workflow.definition import WorkflowDefinition
from ..workflow.durations import Duration
from ..workflow.running import RunResult, run
from .scripted import ScriptBook, Scripts


@dataclass(frozen=True)
class TestRun:
    """A finished test run. `value` is the workflow's return value; it raises if the run didn't complete."""

    __test__ = False
    result: RunResult

    @property
    def outcome(self) -> str:
        return self.result.outcome

    @property
    def reason(self) -> str | None:
        return self.result.reason

    @property
    def value(self) -> Any:
        if self.result.outcome != "completed":
            raise AssertionError(f"the run ended {self.result.outcome}: {self.result.reason}")
        return self.result.value

    @property
    def run_dir(self) -> Path:
        return self.result.run_dir

    @property
    def turns(self) -> list[dict[str, Any]]:
        """The run's ended turns, as recorded in turns.jsonl."""
        return list(read_lines(self.run_dir / "turns.jsonl"))

    @property
    def logs(self) -> list[dict[str, Any]]:
        return list(read_lines(self.run_dir / "log.jsonl"))


async def run_workflow(
    definition: WorkflowDefinition,
    *,
    agents: dict[str, Scripts],
    args: Any = None,
    run_root: str | Path | None = None,
    cwd: str | Path | None = None,
    timeout: Duration | None = None,
    supports_waiting: bool = True,
    replay: str | Path | None = None,
) -> TestRun:
    """Run `definition` for real, its agents played by `agents` (key -> script or list).

    The record goes under `run_root`; when not given, a temporary directory removed when
    the test process exits (the record stays readable until then). Raises
    TestScriptError when an agent has no script, a list runs out or has entries left,
    and re-raises an error raised inside a script, such as a failed assert. With `replay`
    (a recorded run's directory) every tool call is answered from that record.
    """
    book = ScriptBook(dict(agents), supports_waiting=supports_waiting)
    if run_root is None:
        root: str | Path = tempfile.mkdtemp(prefix="awf-test-runs-")
        atexit.register(shutil.rmtree, root, ignore_errors=True)
    else:
        root = run_root
    result = await run(
        definition, args=args, run_root=root, cwd=cwd, timeout=timeout, harnesses=book.harness_for, replay=replay
    )
    book.check()
    return TestRun(result)
