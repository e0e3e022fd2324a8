"""The run's record on disk: its layout, and reading and writing it safely.

    <run root>/                      .awf/runs by default (awf run --run-root moves it)
      .gitignore                     `*`: records stay out of the project's history
      <workflow>/<run id>/
        run.json                     what the run was started with
        turns.jsonl                  one line per ended turn: agent, call id, outcome
        log.jsonl                    wf.log lines
        tools.jsonl                  every tool call: who, input (redacted), result or error, timing
        approvals.jsonl              every decision on a call that needed approval
        messages.jsonl               every message between agents and people: sent, then read
        refusals.jsonl               every process refused on the run's sockets for who it is
        calls/<call id>/
          call.json                  the turn's prompt, schema and deadline
          candidates.jsonl           every answer handed in, accepted or not, and why
          result.json                the accepted answer (created once, exclusively)
        output.json                  how the run ended, and its value; when the workflow raised,
                                     `where` (file:line) and its whole `traceback`

Whole files are written to a temp file, fsynced and renamed, so a reader sees the old
file or the new one; logs are append-only JSON lines, read back skipping a torn last
line. Only the Recorder actor writes here.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

RECORD_VERSION = 1
DEFAULT_RUN_ROOT = Path(".awf") / "runs"
_encoder = msgspec.json.Encoder()


def new_run_id(now: float | None = None) -> str:
    """Local time to the second and four hex digits, e.g. `20261129-153207-a7f3`."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return f"{stamp}-{secrets.token_hex(2)}"


def encode(value: Any) -> bytes:
    return _encoder.encode(value)


def write_whole(path: Path, data: bytes, *, exclusive: bool = False) -> None:
    """Write `path` whole: temp file, fsync, rename (or link, failing if it exists)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    with open(temp, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    try:
        if exclusive:
            os.link(temp, path)
        else:
            os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


class LineLog:
    """An append-only JSON-lines file, kept open by its one writer.

    On first use a torn last line (from a run that died mid-write) is ended, so the
    next record starts on a line of its own.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: Any = None

    def append(self, record: Any) -> None:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "ab+")
            if self._file.tell() > 0:
                self._file.seek(-1, os.SEEK_END)
                if self._file.read(1) != b"\n":
                    self._file.write(b"\n")
        self._file.write(encode(record) + b"\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def append_line(path: Path, record: Any) -> None:
    """Append one JSON line to `path` (opening and closing it)."""
    log = LineLog(path)
    try:
        log.append(record)
    finally:
        log.close()


def read_lines(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a JSON-lines file, skipping any line that is torn or not an object."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    for raw in data.splitlines():
        try:
            record = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            continue
        if isinstance(record, dict):
            yield record


def read_json(path: Path) -> Any:
    return msgspec.json.decode(path.read_bytes())


def find_run(run_root: Path, run: str | None) -> Path | None:
    """A run's directory: by path, by id (or `<workflow>/<id>`), or the latest if `run` is None."""
    if run is not None:
        direct = Path(run)
        if (direct / "run.json").exists():
            return direct
        if (run_root / run / "run.json").exists():
            return run_root / run
        matches = sorted(run_root.glob(f"*/{run}"))
        return matches[0] if len(matches) == 1 else None
    runs = [path.parent for path in run_root.glob("*/*/run.json")]
    if not runs:
        return None
    return max(runs, key=lambda path: (path / "run.json").stat().st_mtime_ns)
