"""Whole files and group commits with only the fsyncs in a worker thread (records.write_wholes_synced, fsync_all).

Every other syscall of a file is made on the caller's thread: a syscall in a worker thread hands
the GIL to the loop's thread and takes it back, and at a dozen a file those hand-offs cost a
tenth of a run's CPU (issue 10).
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Sequence

import anyio
import pytest

from agentswf.actors import Supervisor
from agentswf.engine.outcomes import Answered, Turn
from agentswf.engine.record import layout as records
from agentswf.engine.record.layout import SYNC_FDS_AT_ONCE, fsync_all, fsync_each, read_json, write_wholes_synced
from agentswf.engine.record.lines import CallOpened, ResultAccepted, RunEnded, RunStarted, TurnEnded
from agentswf.engine.record.recorder import Recorder, RecordGaps

pytestmark = pytest.mark.anyio


def _target(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


async def in_thread(fds: Sequence[int]) -> list[OSError | None]:
    return await anyio.to_thread.run_sync(fsync_each, fds)


async def test_whole_files_are_written_exclusively_or_replaced_and_none_leaves_a_temp_file(tmp_path):
    (tmp_path / "old.json").write_bytes(b"old")
    (tmp_path / "taken.json").write_bytes(b"taken")
    errors = await write_wholes_synced(
        [(tmp_path / "new" / "a.json", b'{"a":1}', True), (tmp_path / "old.json", b'{"b":2}', False),
         (tmp_path / "taken.json", b'{"c":3}', True)],
        in_thread,
    )
    assert errors[:2] == [None, None]
    assert isinstance(errors[2], FileExistsError)
    assert read_json(tmp_path / "new" / "a.json") == {"a": 1} and read_json(tmp_path / "old.json") == {"b": 2}
    assert (tmp_path / "taken.json").read_bytes() == b"taken"  # an exclusive write never replaces
    assert [p.name for p in tmp_path.rglob(".*.tmp")] == []
    assert oct((tmp_path / "new" / "a.json").stat().st_mode & 0o777) == "0o600"


async def test_a_failed_fsync_fails_its_own_file_only_and_leaves_its_path_as_it_was(tmp_path):
    (tmp_path / "b.json").write_bytes(b"before")

    async def failing_b(fds: Sequence[int]) -> list[OSError | None]:
        done = await in_thread(fds)
        return [OSError(errno.EIO, "I/O error") if ".b.json." in _target(fd) else error for fd, error in zip(fds, done)]

    errors = await write_wholes_synced([(tmp_path / "a.json", b"1", False), (tmp_path / "b.json", b"2", False)], failing_b)
    assert errors[0] is None and isinstance(errors[1], OSError) and errors[1].errno == errno.EIO
    assert (tmp_path / "a.json").read_bytes() == b"1"
    assert (tmp_path / "b.json").read_bytes() == b"before"  # never put in place unsynced
    assert [p.name for p in tmp_path.glob(".*.tmp")] == []


async def test_a_failed_directory_fsync_fails_the_files_placed_in_it(tmp_path):
    async def failing_dirs(fds: Sequence[int]) -> list[OSError | None]:
        done = await in_thread(fds)
        return [OSError(errno.EIO, "I/O error") if os.path.isdir(_target(fd)) else error for fd, error in zip(fds, done)]

    errors = await write_wholes_synced([(tmp_path / "a.json", b"1", True)], failing_dirs)
    assert isinstance(errors[0], OSError) and errors[0].errno == errno.EIO


def watch_threads(monkeypatch) -> tuple[list[str], list[bool]]:
    """The os calls other than fsync made off this thread, and for each fsync whether it was."""
    main = threading.get_ident()
    elsewhere: list[str] = []
    for name in ("open", "write", "close", "link", "replace", "unlink", "fstat", "fchmod", "mkdir", "chmod"):
        real = getattr(os, name)

        def watched(*args, _real=real, _name=name, **kwargs):
            if threading.get_ident() != main:
                elsewhere.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(os, name, watched)
    fsynced: list[bool] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        fsynced.append(threading.get_ident() != main)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return elsewhere, fsynced


async def test_a_worker_thread_makes_only_the_fsyncs(tmp_path, monkeypatch):
    """The open, write, link, unlink and close of each file are on the caller's thread."""
    elsewhere, fsynced = watch_threads(monkeypatch)
    files = [(tmp_path / f"c{n}" / "result.json", b"{}", True) for n in range(5)]
    assert await write_wholes_synced(files, in_thread) == [None] * 5
    assert await fsync_all([str(path) for path, _, _ in files], in_thread) == []
    assert elsewhere == []
    assert fsynced and all(fsynced)


async def test_no_more_than_a_bounded_number_of_files_are_open_for_their_fsyncs(tmp_path):
    """Thousands of files in one commit take a few hops, never thousands of fds at once."""
    handed: list[int] = []
    held: list[int] = []
    before = len(os.listdir("/proc/self/fd"))

    async def counted(fds: Sequence[int]) -> list[OSError | None]:
        handed.append(len(fds))
        held.append(len(os.listdir("/proc/self/fd")) - before)
        return await in_thread(fds)

    n = SYNC_FDS_AT_ONCE * 2 + 3
    files = [(tmp_path / f"f{i}.json", b"1", False) for i in range(n)]
    assert await write_wholes_synced(files, counted) == [None] * n
    assert max(handed) <= SYNC_FDS_AT_ONCE
    handed.clear()
    assert await fsync_all([str(path) for path, _, _ in files], counted) == []
    assert max(handed) == SYNC_FDS_AT_ONCE and sum(handed) == n
    assert max(held) <= SYNC_FDS_AT_ONCE + 1  # and the listing's own


async def test_a_fifo_put_in_a_files_place_is_refused_without_a_wait(tmp_path):
    fifo = tmp_path / "call.json"
    os.mkfifo(fifo)
    with anyio.fail_after(5):
        failed = await fsync_all([str(fifo), str(tmp_path)], in_thread)
    assert [(path, error.errno) for path, error in failed] == [(fifo, errno.EINVAL)]


async def test_what_is_staged_when_a_commit_is_cancelled_is_closed_and_removed(tmp_path):
    before = len(os.listdir("/proc/self/fd"))

    async def stuck(fds: Sequence[int]) -> list[OSError | None]:
        await anyio.sleep(60)
        raise AssertionError("not cancelled")

    with anyio.CancelScope() as scope:
        scope.cancel()  # the run going down while a commit waits on its thread
        await write_wholes_synced([(tmp_path / "a.json", b"1", True)], stuck)
    assert scope.cancelled_caught
    assert not (tmp_path / "a.json").exists() and list(tmp_path.glob(".*.tmp")) == []
    assert len(os.listdir("/proc/self/fd")) == before


def test_sync_paths_on_this_thread_refuses_a_fifo(tmp_path):
    os.mkfifo(tmp_path / "x")
    failed = records.sync_paths([str(tmp_path / "x"), str(tmp_path)])
    assert [path.name for path, _ in failed] == ["x"]


def test_fsync_each_reports_each_fds_error():
    read, write = os.pipe()
    try:
        errors = fsync_each([read])  # a pipe can't be fsynced
        assert isinstance(errors[0], OSError)
    finally:
        os.close(read)
        os.close(write)


async def test_the_recorders_threads_make_only_its_fsyncs(tmp_path, monkeypatch):
    """run.json, a call, its answer, its turn's end and the run's end: every fsync in a thread, nothing else."""
    elsewhere, fsynced = watch_threads(monkeypatch)
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, capacity=64)
        await ref.tell(RunStarted("r", "w", None, str(tmp_path), 1.0, "sock"))
        assert await ref.ask(CallOpened("c1", "a", 1, "Go.", None, None)) is True
        assert await ref.ask(ResultAccepted("c1", "done")) is True
        turn = Turn(agent="a", n=1, call_id="c1", outcome=Answered(value="done"), started_at=1.0, ended_at=2.0)
        await ref.ask(TurnEnded(turn))
        assert await ref.ask(RecordGaps()) is None
        assert await ref.ask(RunEnded("answered", None, "done", 1.0, 2.0)) is True
    assert elsewhere == []
    assert len(fsynced) >= 6 and all(fsynced)  # run.json, result.json, output.json, each with its directory


async def test_a_link_put_in_a_files_place_is_refused_not_followed(tmp_path):
    """An agent swaps a file the commit will fsync for a link (to a file on a mount that never
    answers, say): it is refused as the FIFO is, and what it names is never opened."""
    target = tmp_path / "elsewhere"
    target.write_text("yours")
    link = tmp_path / "call.json"
    link.symlink_to(target)
    opened: list[str] = []

    async def counted(fds: Sequence[int]) -> list[OSError | None]:
        opened.extend(_target(fd) for fd in fds)
        return await in_thread(fds)

    failed = await fsync_all([str(link), str(tmp_path)], counted)
    assert [(path, error.errno) for path, error in failed] == [(link, errno.ELOOP)]
    assert opened == [str(tmp_path)]
