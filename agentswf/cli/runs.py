"""Finding the run an `awf` command means, and asking a live one over its operator socket.

What the run answers is `answered` before a command reads it: a refusal (a process of one of
the run's agents asking, a call that isn't waiting) is `Refused`, which `awf` says in one line
on standard error and exits `EXIT_REFUSED` with, whatever the command; a value is read as the
type the run sends (`value_of`), so an answer that isn't one is a refusal too, never a traceback.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypeVar

import msgspec

from ..engine.operator_wire import NOT_A_PARTICIPANT, OperatorRequest, OperatorResponse, ask_run
from ..engine.record.attempts import RecordRefused, read_attempts
from ..engine.record.layout import DEFAULT_RUN_ROOT, TEMPORAL_FILE, find_run, read_json
from ..engine.record.lines import ApprovalRequest
from .failures import Refused, UsageFailure
from .shown import shown

LIVE_RUN_HELP = "the run's id or directory (default: the one live run)"  # a command's RUN, of a live run
T = TypeVar("T")


def answered(response: OperatorResponse) -> OperatorResponse:
    """`response`, when the run did what was asked. Otherwise raises `Refused` with the run's words,
    or `UsageFailure` for a `--as KEY` that names no participant (the person's mistake, not a refusal)."""
    if response.ok:
        return response
    if isinstance(response.value, dict) and response.value.get("code") == NOT_A_PARTICIPANT:
        raise UsageFailure(response.message)
    raise Refused(response.message)


def value_of(response: OperatorResponse, kind: type[T]) -> T:
    """The value the run `answered` with, read as `kind`; a value that isn't one (a socket an
    agent put in the run's place can answer anything) is `Refused`."""
    try:
        return msgspec.convert(answered(response).value, kind)
    except msgspec.ValidationError as error:
        raise Refused(f"the run's answer can't be read: {error}") from None


class LatestLine(msgspec.Struct):
    """An agent's latest line of output and when it said it (engine/operator.py's `_latest`)."""

    line: str
    at: float


class AgentStanding(msgspec.Struct):
    """An agent in a live run's answer to `Status` (engine/operator.py), as awf reads it."""

    key: str
    in_turn: bool = False
    tools: list[str] = []
    owes: list[str] = []
    awaits: str | None = None
    awaits_until: float | None = None
    said: LatestLine | None = None


class RunStanding(msgspec.Struct):
    """A live run's answer to `Status`: read as this before `awf status` or the live view shows it,
    since a socket an agent put in the run's place can answer any JSON."""

    agents: list[AgentStanding] = []
    participants: list[str] = []
    pending: list[ApprovalRequest] = []


def pending_line(request: ApprovalRequest) -> str:
    """A call waiting for approval as `awf pending` lists it, on one line: each of its fields
    (the agent's input above all) `shown`."""
    given = msgspec.json.encode(request.input).decode()
    why = f"  ({request.reason})" if request.reason else ""
    return shown(f"{request.call_id}  {request.agent} → {request.tool}  {given}{why}")


def run_root_of(options: argparse.Namespace) -> Path:
    return Path(options.run_root) if options.run_root else DEFAULT_RUN_ROOT


def run_dir_of(options: argparse.Namespace, run: str | None) -> Path:
    """The run named (by id, `<workflow>/<id>` or directory, or a workflow's name for its latest run), or the latest."""
    root = run_root_of(options)
    run_dir = find_run(root, run)
    if run_dir is None and run is not None and "/" not in run:
        run_dir = latest_run_of(root, run)
    if run_dir is None and run is None:
        raise UsageFailure(f"no record of any run under {root}")
    if run_dir is None:
        raise UsageFailure(
            f"no record of run {run!r} under {root}: give a run's id (awf ls lists them), its directory, "
            "or a workflow's name for its latest run"
        )
    return run_dir


def latest_run_of(root: Path, workflow: str) -> Path | None:
    """The latest run of `workflow` under the run root (by when its run.json was last written), or None."""
    runs = [path.parent for path in (root / workflow).glob("*/run.json")]
    return max(runs, key=lambda path: (path / "run.json").stat().st_mtime_ns) if runs else None


def is_live(run_dir: Path) -> bool:
    """The run has not recorded its ending, and its operator socket is there."""
    if (run_dir / "output.json").exists():
        return False
    try:
        control = read_json(run_dir / "run.json").get("control")
    except (OSError, msgspec.DecodeError, AttributeError):
        return False
    return bool(control) and Path(control).is_socket()


def was_on_temporal(run_dir: Path) -> bool:
    """The run was started on Temporal (`awf run --engine temporal`), whether it has ended or not."""
    return (run_dir / TEMPORAL_FILE).exists()


def on_temporal(run_dir: Path) -> bool:
    """A run on Temporal that hasn't recorded its ending: it has no operator socket, only what
    Temporal says of it."""
    return was_on_temporal(run_dir) and not (run_dir / "output.json").exists()


def refuse_on_temporal(run_dir: Path, command: str) -> None:
    """A command the Temporal engine doesn't serve yet says so, rather than that the run has ended."""
    if not on_temporal(run_dir):
        return
    raise UsageFailure(
        f"run {run_dir.name} runs on Temporal, which awf {command} doesn't reach yet; awf status {run_dir.name} asks how it stands"
    )


def all_runs(root: Path) -> list[Path]:
    """Every run's directory under `root`, oldest first."""
    runs = []
    for path in root.glob("*/*/run.json"):
        try:
            runs.append((path.stat().st_mtime_ns, path.parent))
        except OSError:
            continue  # removed meanwhile
    return [run_dir for _, run_dir in sorted(runs)]


def live_run_dir(options: argparse.Namespace) -> Path:
    """The run named, or else the one live run under the run root."""
    if options.run is not None:
        return run_dir_of(options, options.run)
    root = run_root_of(options)
    runs = all_runs(root)
    live = sorted(path for path in runs if is_live(path))
    if not live:
        on_it = [path.name for path in runs if on_temporal(path)]
        temporal = f"; run {on_it[-1]} is on Temporal: name it (awf status {on_it[-1]})" if on_it else ""
        raise UsageFailure(
            f"no run is live under {root} (--run-root names another place); awf logs shows the latest run{temporal}"
        )
    if len(live) > 1:
        names = ", ".join(f"{path.name} ({path.parent.name})" for path in live)
        raise UsageFailure(f"{len(live)} live runs under {root}: {names}; name one")
    return live[0]


def ask_live_run(options: argparse.Namespace, request: OperatorRequest, run_dir: Path | None = None) -> OperatorResponse:
    run_dir = run_dir or live_run_dir(options)
    refuse_on_temporal(run_dir, getattr(options, "command", "status"))
    control = read_json(run_dir / "run.json").get("control")
    if (run_dir / "output.json").exists() or not control:
        raise UsageFailure(f"run {run_dir.name} has ended; only a live run can be asked (awf logs {run_dir.name} shows it)")
    try:
        return ask_run(control, request)
    except OSError as error:
        raise UsageFailure(f"run {run_dir.name} isn't answering ({error}); it may have ended") from None


def recorded_file(run_dir: Path, name_it: str) -> str:
    """The workflow file the run's last attempt was started from, as its record says; where it
    says none, `name_it` is the command that names one."""
    try:
        attempts = read_attempts(run_dir)
    except (OSError, msgspec.DecodeError, RecordRefused) as error:
        raise UsageFailure(f"run {run_dir.name}'s record can't be read: {error}") from None
    file = attempts[-1].file if attempts else None
    if file is None:
        raise UsageFailure(f"run {run_dir.name} has no workflow file on record: name it, {name_it}")
    return file
