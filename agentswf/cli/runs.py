"""Finding the run an `awf` command means, and asking a live one over its operator socket."""

from __future__ import annotations

import argparse
from pathlib import Path

import msgspec

from ..engine.operator import OperatorRequest, OperatorResponse, ask_run
from ..engine.records import DEFAULT_RUN_ROOT, find_run, read_json
from ..temporal.messages import RECORD_FILE as TEMPORAL_RECORD


class UsageFailure(Exception):
    """What `awf` prints before exiting 2."""


def run_root_of(options: argparse.Namespace) -> Path:
    return Path(options.run_root) if options.run_root else DEFAULT_RUN_ROOT


def run_dir_of(options: argparse.Namespace, run: str | None) -> Path:
    """The run named (by id, `<workflow>/<id>` or directory), or the latest."""
    root = run_root_of(options)
    run_dir = find_run(root, run)
    if run_dir is None:
        which = f"run {run!r}" if run else "any run"
        raise UsageFailure(f"no record of {which} under {root}")
    return run_dir


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
    return (run_dir / TEMPORAL_RECORD).exists()


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
