"""A finished run's record, read back as data: what `awf logs` and `awf trace` show.

The layout is documented in `agentswf.engine.record.layout`; this is its public reading side,
for tests and for tools of your own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..engine.record.layout import find_run, read_json, read_lines
from ..errors import WorkflowError
from ..workflow.running import RunResult

if TYPE_CHECKING:
    from .runs import TestRun


@dataclass(frozen=True)
class Record:
    """The record of one run, in `run_dir`. Each property reads the file when asked."""

    run_dir: Path

    @property
    def run(self) -> dict[str, Any]:
        """run.json: what the run was started with (workflow, args, cwd, start time)."""
        value: dict[str, Any] = read_json(self.run_dir / "run.json")
        return value

    @property
    def output(self) -> dict[str, Any] | None:
        """output.json: how the run ended, and its value; None while it runs (or if it was killed)."""
        path = self.run_dir / "output.json"
        if not path.exists():
            return None
        value: dict[str, Any] = read_json(path)
        return value

    @property
    def turns(self) -> list[dict[str, Any]]:
        """Every ended turn: agent, call id, number, outcome, usage."""
        return self._lines("turns.jsonl")

    @property
    def usage(self) -> dict[str, Any] | None:
        """usage.json: what the run spent, in all, by agent, key group and model, and per turn;
        None before a turn has ended."""
        path = self.run_dir / "usage.json"
        if not path.exists():
            return None
        value: dict[str, Any] = read_json(path)
        return value

    @property
    def tools(self) -> list[dict[str, Any]]:
        """Every tool call: who, input (redacted), result or error, timing."""
        return self._lines("tools.jsonl")

    @property
    def messages(self) -> list[dict[str, Any]]:
        """Every message event, `sent` then `read`, with its `mail`."""
        return self._lines("messages.jsonl")

    @property
    def approvals(self) -> list[dict[str, Any]]:
        """Every decision on a call that needed a person's approval."""
        return self._lines("approvals.jsonl")

    @property
    def logs(self) -> list[dict[str, Any]]:
        """The `wf.log` lines."""
        return self._lines("log.jsonl")

    def call(self, call_id: str) -> dict[str, Any]:
        """A turn's call.json: its prompt, schema and deadline."""
        value: dict[str, Any] = read_json(self.run_dir / "calls" / call_id / "call.json")
        return value

    def candidates(self, call_id: str) -> list[dict[str, Any]]:
        """Every answer handed in for the turn `call_id`, accepted or not, and why."""
        return self._lines(f"calls/{call_id}/candidates.jsonl")

    def _lines(self, name: str) -> list[dict[str, Any]]:
        return list(read_lines(self.run_dir / name))


class RunRecord(Protocol):
    """The `run_record` fixture's type: `run_record(run)`, or `run_record()` for the latest run."""

    def __call__(self, run: RunResult | TestRun | str | Path | None = None) -> Record: ...


def read_record(run: RunResult | TestRun | str | Path, *, run_root: str | Path = ".awf/runs") -> Record:
    """The record of `run`: a RunResult or TestRun, a run's directory, or a run id under `run_root`."""
    if isinstance(run, RunResult):
        return Record(run.run_dir)
    if not isinstance(run, (str, Path)):
        return Record(run.run_dir)
    found = find_run(Path(run_root), str(run))
    if found is None:
        raise WorkflowError(f"no run {run} under {run_root}")
    return Record(found)
