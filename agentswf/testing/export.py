"""`export_record`: a copy of a run's record fit to check in, and replay on another machine.

What a replay needs and nothing of this machine: the turns, their prompts, schemas and answers,
the tool calls (their inputs as the broker redacted them), the messages, approvals and sessions,
the spend and the ending; no operator socket, no process ids, no environment, no traceback, no
CLI's path, no attempt's output, no workflow file. In every string it keeps, the run's cwd is
written `.`, the home directory `~` and a turn's launcher `<wfa>`; a string that still holds an
absolute path under /tmp, /home, /root or the home directory is counted and said (`Exported.paths`),
since an agent's words can hold anything. `export.json` says the format (`EXPORT_FORMAT`).

The record read is hostile input (recorded.py reads it): an exported file is only ever one of the
names below, under a call id the run could have given, read as a regular file, never a link.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from ..replay.recorded import EXPORT_FILE, EXPORT_FORMAT, RecordUnreadable, read_object, read_objects, read_recorded

WHOLE_FILES = ("output.json", "usage.json")
LINE_FILES = ("turns.jsonl", "tools.jsonl", "approvals.jsonl", "messages.jsonl", "sessions.jsonl")
CALL_WHOLE_FILES = ("call.json", "result.json")
CALL_LINE_FILES = ("candidates.jsonl",)
LAUNCHER_PLACEHOLDER = "<wfa>"
_LAUNCHER = re.compile(r"/\S*/wfa\b")
_MACHINE_PATH = re.compile(r"(?<![\w.~])/(?:tmp|home|root|Users|var/folders)/")


@dataclass
class Exported:
    """What `export_record` wrote: the directory, its files, and the strings still holding a path of this machine."""

    directory: Path
    files: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)  # "file: a string's start", where a path of this machine is left


class _Scrub:
    def __init__(self, cwd: str, home: str, exported: Exported) -> None:
        self.cwd, self.home, self.exported = cwd, home, exported
        self.file = ""

    def text(self, value: str) -> str:
        value = _LAUNCHER.sub(LAUNCHER_PLACEHOLDER, value)
        if self.cwd and self.cwd != "/":
            value = value.replace(self.cwd, ".")
        if self.home and self.home != "/":
            value = value.replace(self.home, "~")
        if _MACHINE_PATH.search(value):
            self.exported.paths.append(f"{self.file}: {value[:80]!r}")
        return value

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            return {self.text(key): self.value(item) for key, item in value.items()}
        return value


def export_record(run_dir: Path, directory: Path) -> Exported:
    """Write `run_dir`'s record, scrubbed, into `directory` (new, or empty); raises RecordUnreadable
    for a record that can't be replayed, and FileExistsError for a directory that isn't empty."""
    recorded = read_recorded(run_dir)  # refuses what a replay would: checked before anything is written
    info = read_object(run_dir / "run.json") or {}
    if directory.exists() and any(directory.iterdir()):
        raise FileExistsError(f"{directory} is not empty: an export goes in a directory of its own")
    exported = Exported(directory)
    scrub = _Scrub(str(info.get("cwd") or ""), os.path.expanduser("~"), exported)
    directory.mkdir(parents=True, exist_ok=True)

    def whole(name: str, value: Any) -> None:
        scrub.file = name
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(msgspec.json.encode(scrub.value(value)))
        exported.files.append(name)

    def lines(name: str, values: list[dict[str, Any]]) -> None:
        if not values:
            return
        scrub.file = name
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"".join(msgspec.json.encode(scrub.value(value)) + b"\n" for value in values))
        exported.files.append(name)

    run = {key: info.get(key) for key in ("version", "run_id", "workflow", "args", "started_at")}
    whole("run.json", {**run, "cwd": ".", "control": None, "replay_of": None,
                       "clis": [_cli(cli) for cli in info.get("clis") or [] if isinstance(cli, dict)]})  # fmt: skip
    for name in WHOLE_FILES:
        value = read_object(run_dir / name)
        if value is not None:
            whole(name, _output(value) if name == "output.json" else value)
    for name in LINE_FILES:
        lines(name, list(read_objects(run_dir / name)))
    for turn in recorded.turns:
        if turn.kind != "turn":
            continue
        call = Path("calls") / turn.call_id  # a call id the run could have given: checked as the record was read
        for name in CALL_WHOLE_FILES:
            value = read_object(run_dir / call / name)
            if value is not None:
                whole(str(call / name), value)
        for name in CALL_LINE_FILES:
            lines(str(call / name), list(read_objects(run_dir / call / name)))
    whole(EXPORT_FILE, {"format": EXPORT_FORMAT, "workflow": recorded.workflow, "run_id": info.get("run_id"),
                        "exported_at": time.time()})  # fmt: skip
    return exported


def _cli(cli: dict[str, Any]) -> dict[str, Any]:
    """A CLI as run.json's `clis` has it, its executable's path made its name."""
    path = cli.get("path")
    return {**cli, "path": Path(path).name if isinstance(path, str) else None}


def _output(output: dict[str, Any]) -> dict[str, Any]:
    """output.json without the traceback (this machine's files), its `where` only the file's name."""
    where = output.get("where")
    kept = {key: value for key, value in output.items() if key not in ("traceback", "where")}
    if isinstance(where, str):
        kept["where"] = Path(where.split(":", 1)[0]).name + (":" + where.split(":", 1)[1] if ":" in where else "")
    return kept


__all__ = ["EXPORT_FORMAT", "Exported", "RecordUnreadable", "export_record"]
