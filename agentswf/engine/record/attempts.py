"""A run's attempts, and the records that let a later attempt go on where one ended.

    <run dir>/
      attempts/<n>.json            one per attempt: the workflow file (and its sha256), the pid,
                                   when it started and ended, how, in which stage, each stage
                                   it ran, reused or was given, its turns and their usage, the
                                   run's sandbox and budget, which a continue keeps
      attempts/<n>.output.json     attempt n's output.json, moved aside when n + 1 started
      stages/<stage>.json          a stage that completed: its value, its agents' native
                                   sessions, its usage and timings (written before the next
                                   stage starts)
      replaced/<stage>.<n>.json    a stage record of attempt n that a later attempt ran again
      turn-ids.jsonl               every answered turn given an id: agent, id, prompt, schema, turn
      sessions.jsonl               every agent opened by an attempt: its harness, and in a
                                   continued attempt the native session it resumed, or why
                                   it started fresh

Whole files are written as record/layout.py writes them (temp file, fsync, rename, fsync of the
directory); an attempt is claimed by creating its file exclusively, so two attempts of one
run can't both start. These files are the attempt's own, written by `workflow.durable`
between the Recorder's, but for sessions.jsonl: its lines go through the Recorder's batches as
agents open (layout.py says before what they are written).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from ..outcomes import Usage
from .layout import LineLog, make_private_dirs, read_lines, regular_bytes, sync_paths, write_whole

ATTEMPTS_VERSION = 1
ATTEMPTS_DIR = "attempts"
STAGES_DIR = "stages"
REPLACED_DIR = "replaced"
TURN_IDS_FILE = "turn-ids.jsonl"
SESSIONS_FILE = "sessions.jsonl"
INTERRUPTED = "interrupted"  # an attempt that never recorded its ending (kill -9, a power cut)

StageHow = Literal["ran", "reused", "provided"]


Positive = Annotated[int, msgspec.Meta(ge=1)]  # an attempt's number, a pid: never 0 or -1 (os.kill's "every process")


class RecordRefused(Exception):
    """A record this version can't read, or an attempt that can't be claimed; the text says why."""


class AttemptRecord(msgspec.Struct, kw_only=True, omit_defaults=True):
    """`attempts/<n>.json`: one attempt of a run, written as it starts and again as it ends."""

    version: int = ATTEMPTS_VERSION
    n: Positive
    workflow: str
    file: str | None = None
    file_sha256: str | None = None
    pid: Positive
    process_start: int | None = None  # the kernel's start time of `pid`, to tell a reused pid apart
    started_at: float
    continues: Positive | None = None  # the attempt this one went on from
    file_changed: bool = False  # the workflow's file is not the one `continues` ran
    from_stage: str | None = None
    rerun: str | None = None
    replaced_from: float | None = None  # stage records and id'd turns from then on were run again
    ended_at: float | None = None
    outcome: str | None = None  # as output.json's, or "interrupted" (found so by the next attempt)
    reason: str | None = None
    stage: str | None = None  # the stage running (rewritten as each starts), or that was when it ended
    stages: dict[str, StageHow] = {}  # in the order entered
    turns: int = 0
    reused_turns: int = 0
    usage: Usage | None = None
    found_interrupted_at: float | None = None
    sandbox: dict[str, Any] | None = None  # the run's one sandbox (awf run --sandbox): read, write, network
    budget: dict[str, Any] | None = None  # the run's budget (awf run --budget), across its attempts


class SessionRecord(msgspec.Struct, frozen=True):
    agent: str
    harness: str
    session: str | None


class StageRecord(msgspec.Struct, kw_only=True):
    """`stages/<stage>.json`: a stage that completed, and what it is given back as."""

    version: int = ATTEMPTS_VERSION
    stage: str
    attempt: Positive
    outcome: Literal["succeeded"] = "succeeded"
    started_at: float
    ended_at: float
    value: Any = None
    provided: bool = False  # from --values: no turns, no cost
    sessions: list[SessionRecord] = []
    turns: int = 0
    usage: Usage | None = None
    file_sha256: str | None = None


def _read(path: Path) -> bytes:
    """A record file's bytes; RecordRefused for one that isn't a regular file (a FIFO would block its reader)."""
    try:
        data = regular_bytes(path)
    except OSError as error:
        if error.errno != errno.EFBIG:
            raise
        raise RecordRefused(f"{path} is not a record ({error.strerror})") from None
    if data is None:
        raise RecordRefused(f"{path} is not a record (not a regular file)")
    return data


def _decode(path: Path, data: bytes, kind: type[Any]) -> Any:
    try:
        raw = msgspec.json.decode(data)
    except msgspec.DecodeError as error:
        raise RecordRefused(f"{path} is not a record ({error})") from None
    if isinstance(raw, dict) and isinstance(raw.get("version"), int) and raw["version"] > ATTEMPTS_VERSION:
        raise RecordRefused(f"{path} was written by a newer agentswf (version {raw['version']}); upgrade to read it")
    try:
        return msgspec.convert(raw, kind)
    except msgspec.ValidationError as error:
        raise RecordRefused(f"{path} is not a record this version reads: {error}") from None


def read_attempts(run_dir: Path) -> list[AttemptRecord]:
    """Every attempt of the run, in order; a run recorded before attempts were has none."""
    directory = run_dir / ATTEMPTS_DIR
    if not directory.is_dir():
        return []
    found = []
    for path in directory.glob("*.json"):
        if path.stem.isdigit():
            record = _decode(path, _read(path), AttemptRecord)
            if record.n != int(path.stem):  # its number names the file the next attempt rewrites
                raise RecordRefused(f"{path} is not attempt {path.stem}'s record: it says attempt {record.n}")
            found.append(record)
    return sorted(found, key=lambda record: record.n)


def read_stages(run_dir: Path) -> dict[str, StageRecord]:
    """Each stage's record, by the stage it is of: the one its file is named for (a stage's name
    makes the paths it is moved by, so a record naming another, or a path, is refused)."""
    directory = run_dir / STAGES_DIR
    if not directory.is_dir():
        return {}
    records = {}
    for path in directory.glob("*.json"):
        record = _decode(path, _read(path), StageRecord)
        if record.stage != path.stem:
            raise RecordRefused(f"{path} is not a stage's record: it names stage {record.stage!r}, not {path.stem!r}")
        records[record.stage] = record
    return records


def attempt_path(run_dir: Path, n: int) -> Path:
    return run_dir / ATTEMPTS_DIR / f"{n}.json"


def claim_attempt(run_dir: Path, record: AttemptRecord) -> None:
    """Write attempt n's file exclusively: raises RecordRefused if another attempt took n first."""
    try:
        write_whole(attempt_path(run_dir, record.n), msgspec.json.encode(record), exclusive=True)
    except FileExistsError:
        raise RecordRefused(f"attempt {record.n} of this run was started by someone else just now") from None


def rewrite_attempt(run_dir: Path, record: AttemptRecord) -> None:
    write_whole(attempt_path(run_dir, record.n), msgspec.json.encode(record))


def write_stage(run_dir: Path, record: StageRecord) -> None:
    write_whole(run_dir / STAGES_DIR / f"{record.stage}.json", msgspec.json.encode(record))


def replace_stage(run_dir: Path, record: StageRecord) -> None:
    """Move a stage's record to replaced/ (a later attempt runs the stage again)."""
    make_private_dirs(run_dir / REPLACED_DIR)
    os.replace(run_dir / STAGES_DIR / f"{record.stage}.json", run_dir / REPLACED_DIR / f"{record.stage}.{record.attempt}.json")
    for directory in (run_dir / STAGES_DIR, run_dir / REPLACED_DIR):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def move_output_aside(run_dir: Path, n: int) -> None:
    """Attempt n's output.json goes to attempts/<n>.output.json: the run is not ended while n + 1 runs."""
    output = run_dir / "output.json"
    if output.exists():
        os.replace(output, run_dir / ATTEMPTS_DIR / f"{n}.output.json")


def append_synced(path: Path, record: Any) -> None:
    """One JSON line appended and fsynced, with its directory (the file may be new)."""
    log = LineLog(path)
    try:
        log.append(record)
    finally:
        log.close()
    failed = sync_paths([str(path), str(path.parent)])
    if failed:
        raise failed[0][1]


def read_turn_ids(run_dir: Path) -> list[dict[str, Any]]:
    return list(read_lines(run_dir / TURN_IDS_FILE))


def read_sessions(run_dir: Path) -> list[dict[str, Any]]:
    return list(read_lines(run_dir / SESSIONS_FILE))


def process_start(pid: int) -> int | None:
    """When the kernel started `pid` (clock ticks since boot), or None where /proc can't say."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def is_live(record: AttemptRecord) -> bool:
    """The attempt has not recorded its ending and its process is still there (the same process)."""
    if record.ended_at is not None:
        return False
    try:
        os.kill(record.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone's process by that pid: compare start times
    started = process_start(record.pid)
    return started is None or record.process_start is None or started == record.process_start
