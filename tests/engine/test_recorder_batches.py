"""The Recorder appends in batches: one write per file, each file's order kept, no ask answered
before its line is written (kill -9 right after the answer finds it on disk), a failed batch
failing every ask in it, whole files written beside the batches, and fsyncs by group commit."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentswf.actors import Supervisor
from agentswf.engine.outcomes import Answered, Turn
from agentswf.engine.record import layout as records
from agentswf.engine.record import recorder
from agentswf.engine.record.layout import GROUP_COMMIT_SECONDS, GroupCommit, read_lines
from agentswf.engine.record.lines import CandidateSeen, Logged, ResultAccepted, ToolCalled
from agentswf.engine.record.recorder import Appends, Recorder, RecordGaps
from agentswf.errors import ActorCrashed

AGENTS = 40
CALLS = 15


def call(agent: int, i: int) -> ToolCalled:
    return ToolCalled(
        call_id=f"{agent}-{i}", turn_call_id=f"t{agent}", agent=f"a{agent}", tool="echo", input={"i": i},
        outcome="ok", result=i, started_at=1.0, ended_at=2.0,
    )


def count_writes(monkeypatch) -> dict[str, int]:
    writes: dict[str, int] = {}
    real = records.LineLog.write

    def write(log, data):
        writes[log.path.name] = writes.get(log.path.name, 0) + 1
        return real(log, data)

    monkeypatch.setattr(records.LineLog, "write", write)
    return writes


def on_disk(path: Path) -> set[str]:
    return {line["call_id"] for line in read_lines(path)}


@pytest.mark.anyio
async def test_concurrent_asks_are_batched_in_order_and_answered_only_once_written(tmp_path, monkeypatch):
    writes = count_writes(monkeypatch)
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, capacity=1024)
        unwritten_when_answered = []

        async def agent(n: int) -> None:
            for i in range(CALLS):
                assert await ref.ask(call(n, i)) is True
                if f"{n}-{i}" not in on_disk(tmp_path / "tools.jsonl"):
                    unwritten_when_answered.append((n, i))
                await ref.tell(Logged(1.0, "step", {"agent": n, "i": i}))

        async with anyio.create_task_group() as tg:
            for n in range(AGENTS):
                tg.start_soon(agent, n)
        assert await ref.ask(RecordGaps()) is None
    assert unwritten_when_answered == []
    lines = list(read_lines(tmp_path / "tools.jsonl"))
    assert len(lines) == AGENTS * CALLS
    for n in range(AGENTS):  # each asker's lines in the order it asked
        assert [line["input"]["i"] for line in lines if line["agent"] == f"a{n}"] == list(range(CALLS))
    logged = list(read_lines(tmp_path / "log.jsonl"))
    for n in range(AGENTS):
        assert [line["fields"]["i"] for line in logged if line["fields"]["agent"] == n] == list(range(CALLS))
    assert writes["tools.jsonl"] < AGENTS * CALLS / 4  # batches, not a write a line
    assert writes["log.jsonl"] < AGENTS * CALLS / 4


@pytest.mark.anyio
async def test_a_failed_batch_write_fails_every_ask_in_it_and_leaves_whole_lines(tmp_path, monkeypatch):
    real = records._write_all
    failed_batches: list[int] = []

    def torn_write(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}").endswith("tools.jsonl") and data.count(b"\n") > 1 and not failed_batches:
            failed_batches.append(data.count(b"\n"))
            real(fd, data[: len(data) // 2])  # part of it reached the file, then the disk filled
            raise OSError(28, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(records, "_write_all", torn_write)
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, capacity=1024)
        answers: dict[str, bool] = {}

        async def agent(n: int) -> None:
            for i in range(3):
                answers[f"{n}-{i}"] = await ref.ask(call(n, i))

        async with anyio.create_task_group() as tg:
            for n in range(AGENTS):
                tg.start_soon(agent, n)
        gaps = await ref.ask(RecordGaps())
    [size] = failed_batches
    refused = {key for key, ok in answers.items() if not ok}
    assert len(refused) == size  # every ask of the failed batch, and only those
    data = (tmp_path / "tools.jsonl").read_bytes()
    assert data.endswith(b"\n") and len(data.splitlines()) == AGENTS * 3 - size  # cut back off whole
    assert on_disk(tmp_path / "tools.jsonl") == set(answers) - refused
    assert gaps.startswith("the run's record is incomplete: 1 write to it failed") and "tools.jsonl" in gaps


@pytest.mark.anyio
async def test_a_calls_candidates_file_is_closed_once_written(tmp_path):
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, capacity=64)
        for n in range(20):
            await ref.ask(CandidateSeen(f"c{n}", 1.0, ["result"], '"x"', False, "not json"))
        held = [
            target for fd in os.listdir("/proc/self/fd")
            if "candidates" in (target := _target(fd))
        ]
        assert held == []  # an fd per call would grow with the calls a run has had
        assert await ref.ask(RecordGaps()) is None
    assert len(list(read_lines(tmp_path / "calls" / "c7" / "candidates.jsonl"))) == 1


def _target(fd: str | int) -> str:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return ""


@pytest.mark.anyio
async def test_a_whole_file_being_written_holds_up_no_one_elses_lines(tmp_path, monkeypatch):
    release = threading.Event()
    real = recorder.fsync_each

    def slow(fds):
        if any(".result.json." in _target(fd) for fd in fds):  # result.json's temp file, on its disk
            release.wait(10)
        return real(fds)

    monkeypatch.setattr(recorder, "fsync_each", slow)
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, capacity=64)
        accepted: list[bool] = []

        async def accept() -> None:
            accepted.append(await ref.ask(ResultAccepted("c1", "done")))

        async with anyio.create_task_group() as tg:
            tg.start_soon(accept)
            with anyio.fail_after(5):
                assert await ref.ask(call(2, 0)) is True  # answered while result.json is stuck on its disk
            assert accepted == []
            release.set()
        assert accepted == [True]
        assert await ref.ask(RecordGaps()) is None
    assert records.read_json(tmp_path / "calls" / "c1" / "result.json")["value"] == "done"


@pytest.mark.anyio
async def test_whole_files_queued_together_go_to_one_thread_and_each_ask_waits_for_its_own(tmp_path, monkeypatch):
    """Many agents' result.json queued while one is being written: a few thread hops, not one a file."""
    release = threading.Event()
    batches: list[list[str]] = []
    real = recorder.fsync_each

    def counted(fds):
        results = [Path(path).parent.name for path in map(_target, fds) if ".result.json." in path]
        if results:  # a batch of result.json's temp files (their directories are fsynced in a hop of their own)
            batches.append(results)
            if len(batches) == 1:
                release.wait(10)
        return real(fds)

    monkeypatch.setattr(recorder, "fsync_each", counted)
    files = 40
    monkeypatch.setattr(records, "SYNC_FDS_AT_ONCE", files)  # a writer's files in one hop: the held batch is the first's
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, capacity=64)
        accepted: dict[str, bool] = {}

        async def accept(i: int) -> None:
            accepted[f"c{i}"] = await ref.ask(ResultAccepted(f"c{i}", i))

        async with anyio.create_task_group() as tg:
            for i in range(files):
                tg.start_soon(accept, i)
            with anyio.fail_after(5):
                while sum(map(len, batches)) < files or len(accepted) < files - len(batches[0]):
                    await anyio.sleep(0.01)  # every file taken, and all answered but the held batch's
            await anyio.sleep(0.05)
            assert len(accepted) == files - len(batches[0])  # the held batch's asks wait for their files
            release.set()
        assert accepted == {f"c{i}": True for i in range(files)}
    assert sorted(name for batch in batches for name in batch) == sorted(accepted)
    assert len(batches) <= files // 4  # one hop for many files, not one a file (how many depends on the load)
    assert [records.read_json(tmp_path / "calls" / f"c{i}" / "result.json")["value"] for i in range(files)] == list(range(files))


KILLED = """
import sys, anyio
from pathlib import Path
from agentswf.actors import Supervisor
from agentswf.engine.record.recorder import Appends, Recorder, ToolCalled

async def main():
    appends = Appends()
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, Path(sys.argv[1]), None, appends, capacity=64)
        ask = ref.ask if sys.argv[3] == "mailbox" else appends.ask
        for i in range(50):
            line = ToolCalled(call_id=f"c{i}", turn_call_id="t", agent="a", tool="echo", input={"i": i},
                              outcome="ok", started_at=1.0, ended_at=2.0)
            assert await ask(line)
            print(i, flush=True)  # the agent is told
        await anyio.sleep(60)

anyio.run(main, backend=sys.argv[2])
"""


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("through", ["mailbox", "appends"])
def test_kill_9_right_after_an_answer_finds_the_line_on_disk(tmp_path, backend, through):
    run = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(tmp_path), backend, through],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert run.stdout is not None
        told = [run.stdout.readline() for _ in range(30)]
        run.send_signal(signal.SIGKILL)  # after the 30th answer, with the Recorder likely mid-batch
        run.wait(10)
        told += run.stdout.read().splitlines()
    finally:
        run.kill()
        run.wait()
    told_ids = {f"c{int(line)}" for line in told if line.strip()}
    assert len(told_ids) >= 30
    assert told_ids <= on_disk(tmp_path / "tools.jsonl")  # every answered call is on the record


@given(st.lists(st.floats(0, 100, exclude_min=True), min_size=1, max_size=30), st.floats(0.1, 5))
def test_group_commit_syncs_each_line_within_its_interval_and_no_more_often(times, interval):
    """A fake clock: lines appended at `times`, a syncer that fsyncs when `due_in` says 0."""
    times.sort()
    commit = GroupCommit(interval)
    assert commit.due_in(0.0) is None  # nothing written: no fsync
    unsynced: list[float] = []
    syncs: list[float] = []
    waited: list[float] = []
    clock = 0.0

    def run_syncer_until(later: float) -> float:
        now = clock
        while (due := commit.due_in(now)) is not None and now + due <= later:
            now += due  # it slept as long as it was told, then fsynced all unsynced
            commit.syncing()
            syncs.append(now)
            waited.extend(now - t for t in unsynced)
            unsynced.clear()
        return later

    for t in times:
        clock = run_syncer_until(t)
        commit.appended(t)
        unsynced.append(t)
    run_syncer_until(float("inf"))
    assert not unsynced and max(waited) <= interval + 1e-9  # every line fsynced within the interval
    assert all(b - a > interval - 1e-9 for a, b in itertools.pairwise(syncs))  # one fsync covers all in between


def test_a_turns_end_makes_the_group_commit_due_at_once():
    commit = GroupCommit(1.0)
    commit.ask()
    assert commit.due_in(0.0) is None  # a turn ended with nothing unsynced: nothing to do
    commit.appended(10.0)
    assert commit.due_in(10.0) == 1.0
    commit.ask()
    assert commit.due_in(10.0) == 0.0
    commit.syncing()
    commit.appended(11.0)
    assert commit.due_in(11.5) == 0.5  # the next one waits its interval again


@pytest.mark.virtual_time
async def test_appended_lines_are_fsynced_at_a_turns_end(tmp_path, monkeypatch):
    """Before the group commit's interval is over: half of it waited, a quarter more to sync in."""
    synced: list[str] = []
    real = recorder.fsync_each

    def sync(fds):
        synced.extend(Path(_target(str(fd))).name for fd in fds)
        return real(fds)

    monkeypatch.setattr(recorder, "fsync_each", sync)
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, capacity=64)
        assert await ref.ask(call(1, 0))
        await anyio.sleep(GROUP_COMMIT_SECONDS / 2)
        assert synced == []  # within the interval and no turn ended: not yet
        turn = Turn(agent="a", n=1, call_id="c1", outcome=Answered(value="x"), started_at=1.0, ended_at=2.0)
        await ref.ask(recorder.TurnEnded(turn))
        with anyio.fail_after(GROUP_COMMIT_SECONDS / 4):
            while "tools.jsonl" not in synced:
                await anyio.sleep(0.01)
        assert "turns.jsonl" in synced and tmp_path.name in synced  # the new files' directory too


@pytest.mark.anyio
async def test_a_record_that_cant_be_encoded_fails_its_own_ask_only(tmp_path):
    appends = Appends()
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, None, appends, capacity=64)
        bad = ToolCalled(call_id="bad", turn_call_id="t", agent="a", tool="echo", input={}, outcome="ok",
                         result=object(), started_at=1.0, ended_at=2.0)
        answers = []

        async def ask(line: ToolCalled) -> None:
            try:
                answers.append(await appends.ask(line))
            except ActorCrashed as error:  # as the Recorder's ask raises: the handler's error its cause
                assert isinstance(error.__cause__, TypeError)
                answers.append("raised")

        async with anyio.create_task_group() as tg:
            for line in (call(1, 0), bad, call(1, 1)):
                tg.start_soon(ask, line)
        assert sorted(map(str, answers)) == ["True", "True", "raised"]
        with pytest.raises(Exception, match="object"):
            await ref.ask(bad)  # through the mailbox: the ask fails, as any handler's error does
        assert await ref.ask(call(1, 2)) is True  # and the Recorder goes on
        assert await ref.ask(RecordGaps()) is None
    assert on_disk(tmp_path / "tools.jsonl") == {"1-0", "1-1", "1-2"}


@pytest.mark.anyio
async def test_appends_once_the_recorder_has_stopped_are_refused_not_left_waiting(tmp_path):
    from agentswf.errors import ActorStopped

    appends = Appends()
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, None, appends, capacity=64)
        assert await appends.ask(call(1, 0)) is True
        await ref.stop()
    with anyio.fail_after(2), pytest.raises(ActorStopped):
        await appends.ask(call(1, 1))
    assert on_disk(tmp_path / "tools.jsonl") == {"1-0"}


@pytest.mark.anyio
@pytest.mark.parametrize("through", ["mailbox", "appends"])
async def test_a_turns_usage_is_accounted_however_its_line_is_asked(tmp_path, through):
    from agentswf.harnesses.usage import Usage

    appends = Appends()
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, None, appends, capacity=64)
        ask = ref.ask if through == "mailbox" else appends.ask
        turn = Turn(agent="a", n=1, call_id="c1", outcome=Answered(value="x"), started_at=1.0, ended_at=2.0,
                    usage=Usage(input_tokens=7, output_tokens=1))
        await ask(recorder.TurnEnded(turn))
        assert await ref.ask(RecordGaps()) is None  # usage.json written too
    usage = records.read_json(tmp_path / "usage.json")
    assert usage["turns"] == 1 and usage["total"]["input_tokens"] == 7


def spy_fsyncs(monkeypatch) -> list[str]:
    """Every fsync'd file's path, in order (its fd's name as the kernel has it), from any thread."""
    synced: list[str] = []
    real = os.fsync

    def fsync(fd):
        real(fd)
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


@pytest.mark.virtual_time
@pytest.mark.parametrize("through", ["mailbox", "appends"])
async def test_call_and_usage_json_are_fsynced_by_the_group_commit_at_a_turns_end(tmp_path, monkeypatch, through):
    """Written whole with no fsync of their own, they are in the commit a turn's end asks for, with
    their directories, before the group commit's interval is over."""
    synced = spy_fsyncs(monkeypatch)
    appends = Appends()
    call_dir = tmp_path / "calls" / "c1"
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, None, appends, capacity=64)
        ask = ref.ask if through == "mailbox" else appends.ask
        assert await ref.ask(recorder.CallOpened("c1", "a", 1, "Answer.", None, None)) is True
        assert records.read_json(call_dir / "call.json")["prompt"] == "Answer."  # written before the ask is answered
        await anyio.sleep(GROUP_COMMIT_SECONDS / 2)
        assert synced == []  # no fsync of its own, and no turn ended yet
        turn = Turn(agent="a", n=1, call_id="c1", outcome=Answered(value="x"), started_at=1.0, ended_at=2.0)
        await ask(recorder.TurnEnded(turn))
        wanted = {str(call_dir / "call.json"), str(tmp_path / "usage.json"), str(call_dir), str(tmp_path / "calls"),
                  str(tmp_path / "turns.jsonl"), str(tmp_path)}
        with anyio.fail_after(GROUP_COMMIT_SECONDS / 4):
            while not wanted <= set(synced):
                await anyio.sleep(0.01)
    assert records.read_json(tmp_path / "usage.json")["turns"] == 1
    assert not [path for path in tmp_path.rglob("*") if path.name.endswith(".tmp")]


@pytest.mark.anyio
async def test_result_json_is_fsynced_with_its_directory_before_the_answer_is_accepted(tmp_path, monkeypatch):
    synced = spy_fsyncs(monkeypatch)
    call_dir = tmp_path / "calls" / "c1"
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, capacity=64)
        assert await ref.ask(recorder.CallOpened("c1", "a", 1, "Answer.", None, None)) is True
        assert await ref.ask(ResultAccepted("c1", "done")) is True
        when_accepted = list(synced)
        assert await ref.ask(ResultAccepted("c1", "again")) is False  # created once, exclusively
    assert any(Path(path).parent == call_dir and Path(path).name.startswith(".result.json.") for path in when_accepted)
    assert str(call_dir) in when_accepted  # its link's directory entry too
    assert records.read_json(call_dir / "result.json")["value"] == "done"


@pytest.mark.anyio
@pytest.mark.parametrize("through", ["mailbox", "appends"])
async def test_a_file_removed_under_the_run_is_a_gap_and_its_next_line_starts_it_afresh(tmp_path, through):
    """`rm -rf` or `git clean` of the record mid-run: the group commit finds the file gone (what was
    written to it since is lost), the run's record says so, and the lines after it land in a new file."""
    appends = Appends()
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, None, appends, capacity=64)
        ask = ref.ask if through == "mailbox" else appends.ask
        assert await ask(call(0, 0)) is True
        assert await ref.ask(RecordGaps()) is None  # fsynced
        (tmp_path / "tools.jsonl").unlink()
        assert await ask(call(0, 1)) is True  # written to the removed file, as the open file it is
        gaps = await ref.ask(RecordGaps())  # the commit finds it gone
        assert gaps is not None and "1 write to it failed" in gaps
        assert "tools.jsonl: the record's file was removed while the run wrote to it" in gaps
        assert await ask(call(0, 2)) is True
        assert await ref.ask(RecordGaps()) == gaps  # no new gap
    assert on_disk(tmp_path / "tools.jsonl") == {"0-2"}


@pytest.mark.anyio
async def test_a_run_log_replaced_by_a_rename_over_it_is_a_gap_not_a_file_fsynced_in_its_place(tmp_path):
    """A rename over tools.jsonl leaves the Recorder's open file linked nowhere; the file now at the
    path opens and fsyncs fine, so the commit checks the open file's link count, not only the path."""
    appends = Appends()
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, None, appends, capacity=64)
        assert await appends.ask(call(0, 0)) is True
        assert await ref.ask(RecordGaps()) is None
        (tmp_path / "other").write_text("")
        (tmp_path / "other").rename(tmp_path / "tools.jsonl")
        assert await appends.ask(call(0, 1)) is True  # to the open file, which no path names now
        gaps = await ref.ask(RecordGaps())
        assert gaps is not None and "tools.jsonl: the record's file was removed while the run wrote to it" in gaps
        assert await appends.ask(call(0, 2)) is True  # appended to the file at its path now
        assert await ref.ask(RecordGaps()) == gaps
    assert on_disk(tmp_path / "tools.jsonl") == {"0-2"}
