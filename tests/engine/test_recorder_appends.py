"""The Recorder's `Appends`: a write-through ask (`ActorRef.ask_inline`), so with nothing queued
in the Recorder's mailbox its line is handled in the asker's task at once (the Recorder's write,
on the loop's thread) and returns with no schedule point, and is a mailbox event all the same.

What holds for any mix of askers, through `Appends` and through the Recorder's mailbox
(hypothesis, both backends): every answered line is on disk when its asker is told, each once,
each asker's lines in its order. And: an ask never yields; lines the Recorder's batch holds are
written before an asked line; an ask made before the Recorder has started waits for it; asks are
answered while the Recorder's own task is held up in a handler; a write that raises (a bug, not
the disk) is raised to its own asker.
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentswf.actors import ActorRef, Supervisor, capture_trace
from agentswf.engine.record import layout as records
from agentswf.engine.record import recorder
from agentswf.engine.record.layout import read_lines
from agentswf.engine.record.lines import ApprovalDecided, ApprovalDecision, Logged, MessageRead, RunStarted, ToolCalled
from agentswf.engine.record.recorder import Appends, Recorder, RecordGaps

KINDS = ("tools", "approvals", "messages")
"""Where an asker's line goes: each kind is a file of its own."""
WAYS = ("appends", "mailbox", "yield")
"""What an asker does next: ask through `Appends`, ask the Recorder, or pass a schedule point."""


def line(kind: str, asker: int, i: int) -> ToolCalled | ApprovalDecided | MessageRead:
    key = f"{asker}-{i}"
    if kind == "tools":
        return ToolCalled(
            call_id=key,
            turn_call_id="t",
            agent=f"a{asker}",
            tool="echo",
            input={"i": i},
            outcome="ok",
            started_at=1.0,
            ended_at=2.0,
        )
    if kind == "approvals":
        return ApprovalDecided(call_id=key, tool="echo", agent=f"a{asker}", decision=ApprovalDecision(True), at=1.0)
    return MessageRead(message_id=key, by=f"a{asker}", at=1.0)


def key_of(record: dict) -> str:
    return record.get("call_id") or record["message_id"]


async def ask_all(run_dir: Path, askers: list[list[tuple[str, str]]]) -> list[str]:
    """Each asker asks its lines in turn, each through its way; what was answered before it was on disk."""
    appends = Appends()
    unwritten: list[str] = []
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, run_dir, None, appends, capacity=64)

        async def asker(n: int, steps: list[tuple[str, str]]) -> None:
            for i, (way, kind) in enumerate(steps):
                if way == "yield":
                    await anyio.lowlevel.checkpoint()
                    continue
                ask = appends.ask if way == "appends" else ref.ask
                assert await ask(line(kind, n, i)) is True
                if f"{n}-{i}" not in {key_of(r) for r in read_lines(run_dir / f"{kind}.jsonl")}:
                    unwritten.append(f"{n}-{i}")

        async with anyio.create_task_group() as tg:
            for n, steps in enumerate(askers):
                tg.start_soon(asker, n, steps)
        assert await ref.ask(RecordGaps()) is None
    return unwritten


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.sampled_from(WAYS), st.sampled_from(KINDS)), min_size=1, max_size=12),
        min_size=1,
        max_size=25,
    )
)
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_any_mix_of_askers_is_told_only_once_written_each_once_in_its_order(backend, askers):
    with tempfile.TemporaryDirectory() as root:
        run_dir = Path(root)
        assert anyio.run(ask_all, run_dir, askers, backend=backend) == []  # no one told before its line was written
        for kind in KINDS:
            on_disk = [key_of(r) for r in read_lines(run_dir / f"{kind}.jsonl")]
            for n, steps in enumerate(askers):
                asked = [f"{n}-{i}" for i, (way, k) in enumerate(steps) if k == kind and way != "yield"]
                assert [key for key in on_disk if key.split("-")[0] == str(n)] == asked  # its order, each once


@pytest.mark.anyio
async def test_an_ask_is_written_and_answered_without_a_schedule_point(tmp_path):
    """Stepped by hand: the ask's coroutine returns at its first step, its line already on disk."""
    appends = Appends()
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, None, appends, capacity=64)
        assert await appends.ask(line("tools", 0, 0)) is True  # the Recorder has started
        for i in range(1, 4):
            ask = appends.ask(line("tools", 0, i))
            with pytest.raises(StopIteration) as returned:
                ask.send(None)  # one step: it would yield to the loop here if it passed a schedule point
            assert returned.value.value is True
            assert f"0-{i}" in {key_of(r) for r in read_lines(tmp_path / "tools.jsonl")}
        assert await ref.ask(RecordGaps()) is None


@pytest.mark.anyio
async def test_an_asked_line_is_a_mailbox_event_of_the_recorder(tmp_path):
    appends = Appends()
    with capture_trace() as events:
        async with Supervisor("t") as sup:
            ref = sup.spawn(Recorder, tmp_path, None, appends, name="recorder", capacity=64)
            assert await appends.ask(line("tools", 0, 0)) is True
            assert await appends.ask(line("tools", 0, 1)) is True
            assert await ref.ask(RecordGaps()) is None
    handled = [e for e in events if e["event"] == "mailbox.handled" and e["message_type"] == "ToolCalled"]
    assert len(handled) == 2 and all(e["actor"] == "recorder" for e in handled)
    assert handled[1].get("inline") is True  # the Recorder was started and idle: handled in the asker's task


async def until_handled(ref: ActorRef, handled: int) -> None:
    """Until the actor has handled `handled` messages, with no time passing: on a virtual clock a
    checkpoint doesn't move it, so a batch held for `BATCH_WAIT_SECONDS` stays held."""
    while ref.statistics().handled < handled:
        await anyio.lowlevel.checkpoint()


@pytest.mark.virtual_time  # told lines stay in the batch (its wait doesn't pass) until something writes it
async def test_lines_the_recorders_batch_holds_are_written_before_an_asked_line(tmp_path):
    appends = Appends()
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, None, appends, capacity=64)
        assert await appends.ask(line("tools", 0, 0)) is True
        handled = ref.statistics().handled
        await ref.tell(line("tools", 0, 1))  # told: held in the batch for more lines
        await ref.tell(Logged(1.0, "step", {}))
        await until_handled(ref, handled + 2)  # the Recorder took both into its batch, held
        assert [key_of(r) for r in read_lines(tmp_path / "tools.jsonl")] == ["0-0"]
        assert await appends.ask(line("tools", 0, 2)) is True
        assert [key_of(r) for r in read_lines(tmp_path / "tools.jsonl")] == ["0-0", "0-1", "0-2"]
        assert len(list(read_lines(tmp_path / "log.jsonl"))) == 1  # the whole batch went with it
        assert await ref.ask(RecordGaps()) is None


@pytest.mark.anyio
async def test_an_ask_before_the_recorder_has_started_waits_for_it(tmp_path):
    appends = Appends()
    answers: list[bool | None] = []
    async with Supervisor("t") as sup, anyio.create_task_group() as tg:

        async def early() -> None:
            answers.append(await appends.ask(line("tools", 1, 0)))
            answers.append("1-0" in {key_of(r) for r in read_lines(tmp_path / "tools.jsonl")})

        tg.start_soon(early)
        await anyio.lowlevel.checkpoint()  # it asked, with no Recorder yet
        ref = sup.spawn(Recorder, tmp_path, None, appends, capacity=64)
        with anyio.fail_after(5):
            while len(answers) < 2:
                await anyio.sleep(0.01)
        assert await ref.ask(RecordGaps()) is None
    assert answers == [True, True]


@pytest.mark.anyio
async def test_a_message_whose_record_is_not_a_line_is_refused(tmp_path):
    appends = Appends()
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, None, appends, capacity=64)
        with pytest.raises(TypeError, match="RunStarted is not a line the Recorder appends"):
            await appends.ask(RunStarted("r", "w", None, str(tmp_path), 1.0, "sock"))
        assert await ref.ask(RecordGaps()) is None


@pytest.mark.anyio
async def test_asks_are_answered_while_the_recorders_own_task_is_held_up(tmp_path, monkeypatch):
    """run.json's whole write holds the Recorder's handler (and its mailbox); the askers write their own lines."""
    release, entered = threading.Event(), threading.Event()
    real = recorder.fsync_each

    def stuck(fds):
        entered.set()
        release.wait(10)
        return real(fds)

    monkeypatch.setattr(recorder, "fsync_each", stuck)
    appends = Appends()
    try:
        async with Supervisor("t") as sup:
            ref = sup.spawn(Recorder, tmp_path, None, appends, capacity=64)
            await ref.tell(RunStarted("r", "w", None, str(tmp_path), 1.0, "sock"))
            with anyio.fail_after(5):
                while not entered.is_set():
                    await anyio.sleep(0.01)
                async with anyio.create_task_group() as tg:
                    for n in range(10):
                        tg.start_soon(appends.ask, line("tools", n, 0))
            assert len(list(read_lines(tmp_path / "tools.jsonl"))) == 10
            release.set()
            assert await ref.ask(RecordGaps()) is None
    finally:
        release.set()
    assert records.read_json(tmp_path / "run.json")["run_id"] == "r"


@pytest.mark.virtual_time  # the batch's wait doesn't pass until the next ask
async def test_a_write_that_raises_is_raised_to_its_asker_and_no_mailbox_ask_of_its_batch_is_told_written(
    tmp_path, monkeypatch
):
    """Not the disk (an OSError is a failed line, answered False): a bug in the write itself."""
    real = Recorder._write_lines
    broken: list[str] = []

    def raising(self, path, data):
        if b'"0-2"' in data and not broken:
            broken.append(path)
            raise RuntimeError("a bug in the write")
        return real(self, path, data)

    monkeypatch.setattr(Recorder, "_write_lines", raising)
    appends = Appends()
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, None, appends, capacity=64)
        assert await appends.ask(line("tools", 0, 0)) is True
        handled = ref.statistics().handled
        await ref.tell(line("tools", 0, 1))  # held in the batch, which the next ask writes first
        await until_handled(ref, handled + 1)
        with pytest.raises(RuntimeError, match="a bug in the write"):
            await appends.ask(line("tools", 0, 2))
        assert await appends.ask(line("tools", 0, 3)) is True  # the next ask is written as ever
        assert await ref.ask(RecordGaps()) is None
    assert [key_of(r) for r in read_lines(tmp_path / "tools.jsonl")] == ["0-0", "0-3"]


@pytest.mark.anyio
async def test_a_failed_write_answers_its_ask_false_leaves_whole_lines_and_is_a_gap(tmp_path, monkeypatch):
    real = records._write_all
    failed: list[bytes] = []

    def full_disk(fd, data):
        if b'"0-1"' in data:
            failed.append(data)
            real(fd, data[: len(data) // 2])  # part of it reached the file, then the disk filled
            raise OSError(28, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(records, "_write_all", full_disk)
    appends = Appends()
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, None, appends, capacity=64)
        answers = [await appends.ask(line("tools", 0, i)) for i in range(3)]
        gaps = await ref.ask(RecordGaps())
    assert answers == [True, False, True] and len(failed) == 1
    data = (tmp_path / "tools.jsonl").read_bytes()
    assert data.endswith(b"\n") and [key_of(r) for r in read_lines(tmp_path / "tools.jsonl")] == ["0-0", "0-2"]
    assert len(data.splitlines()) == 2  # cut back off whole: no torn line left
    assert gaps is not None and "1 write to it failed" in gaps and "tools.jsonl" in gaps
