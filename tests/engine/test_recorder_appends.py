"""The Recorder's `Appends`: an ask passes one schedule point, and the first asker of a take to
go on writes the whole take (the Recorder's batch write) before any of them is answered.

What holds for any mix of askers (hypothesis, both backends): every answered line is on disk
when its asker is told, each asker's lines keep its order, and a file takes about one write a
scheduling round, not one a line. And: an ask made before the Recorder has started waits for
it; asks are answered while the Recorder's own task is held up in a handler.
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

from agentswf.actors import Supervisor
from agentswf.engine import recorder, records
from agentswf.engine.approvals import ApprovalDecision
from agentswf.engine.recorder import (
    Appends,
    ApprovalDecided,
    MessageRead,
    Recorder,
    RecordGaps,
    RunStarted,
    ToolCalled,
)
from agentswf.engine.records import read_lines

KINDS = ("tools", "approvals", "messages")
"""Where an asker's line goes: each kind is a file of its own."""


def line(kind: str, asker: int, i: int) -> ToolCalled | ApprovalDecided | MessageRead:
    key = f"{asker}-{i}"
    if kind == "tools":
        return ToolCalled(call_id=key, turn_call_id="t", agent=f"a{asker}", tool="echo", input={"i": i},
                          outcome="ok", started_at=1.0, ended_at=2.0)
    if kind == "approvals":
        return ApprovalDecided(call_id=key, tool="echo", agent=f"a{asker}", decision=ApprovalDecision(True), at=1.0)
    return MessageRead(message_id=key, by=f"a{asker}", at=1.0)


def key_of(record: dict) -> str:
    return record.get("call_id") or record["message_id"]


def counted_writes(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    writes: dict[str, int] = {}
    real = records.LineLog.write

    def write(log: records.LineLog, data: bytes) -> None:
        writes[log.path.stem] = writes.get(log.path.stem, 0) + 1
        real(log, data)

    monkeypatch.setattr(records.LineLog, "write", write)
    return writes


async def ask_all(run_dir: Path, askers: list[list[str]]) -> list[str]:
    """Each asker asks its lines in turn; what was answered before it was on disk."""
    appends = Appends()
    unwritten: list[str] = []
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, run_dir, None, appends, capacity=64)

        async def asker(n: int, kinds: list[str]) -> None:
            for i, kind in enumerate(kinds):
                assert await appends.ask(line(kind, n, i)) is True
                if f"{n}-{i}" not in {key_of(r) for r in read_lines(run_dir / f"{kind}.jsonl")}:
                    unwritten.append(f"{n}-{i}")

        async with anyio.create_task_group() as tg:
            for n, kinds in enumerate(askers):
                tg.start_soon(asker, n, kinds)
        assert await ref.ask(RecordGaps()) is None
    return unwritten


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(st.sampled_from(KINDS), min_size=1, max_size=12), min_size=1, max_size=25))
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_any_mix_of_askers_is_told_only_once_written_in_order_about_a_write_a_round(backend, askers):
    with pytest.MonkeyPatch.context() as monkeypatch, tempfile.TemporaryDirectory() as root:
        writes = counted_writes(monkeypatch)
        run_dir = Path(root)
        assert anyio.run(ask_all, run_dir, askers, backend=backend) == []  # no one told before its line was written
        for kind in KINDS:
            on_disk = [key_of(r) for r in read_lines(run_dir / f"{kind}.jsonl")]
            for n, kinds in enumerate(askers):
                asked = [f"{n}-{i}" for i, k in enumerate(kinds) if k == kind]
                assert [key for key in on_disk if key.split("-")[0] == str(n)] == asked  # its order, each once
            # One take a scheduling round, one write a file a take (a write a line would be `len` of the file)
            rounds = max(len(kinds) for kinds in askers)
            assert writes.get(kind, 0) <= rounds + 1


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
async def test_asks_are_answered_while_the_recorders_own_task_is_held_up(tmp_path, monkeypatch):
    """run.json's whole write holds the Recorder's handler (and its mailbox); the askers write their own takes."""
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


@pytest.mark.anyio
async def test_a_batch_write_that_raises_tells_no_asker_of_its_take_it_was_written(tmp_path, monkeypatch):
    """Not the disk (an OSError is a failed line, answered False): a bug in the write itself."""
    real = Recorder._write_lines
    broken: list[int] = []

    def raising(self, path, data, now):
        if data.count(b"\n") > 1 and not broken:
            broken.append(data.count(b"\n"))
            raise RuntimeError("a bug in the write")
        return real(self, path, data, now)

    monkeypatch.setattr(Recorder, "_write_lines", raising)
    appends = Appends()
    outcomes: list[str] = []
    async with Supervisor("t") as sup:
        ref = sup.spawn(Recorder, tmp_path, None, appends, capacity=64)
        assert await appends.ask(line("tools", 0, 0)) is True  # started, and a line of one

        async def asker(n: int) -> None:
            try:
                outcomes.append(str(await appends.ask(line("tools", n, 0))))
            except Exception as error:
                outcomes.append(type(error).__name__)

        async with anyio.create_task_group() as tg:
            for n in range(1, 6):
                tg.start_soon(asker, n)
        assert await appends.ask(line("tools", 9, 0)) is True  # the next take is written as ever
        await ref.ask(RecordGaps())
    assert broken == [5]
    assert sorted(outcomes) == ["ActorCrashed"] * 4 + ["RuntimeError"]  # the writer raised, the others told so
    assert {key_of(r) for r in read_lines(tmp_path / "tools.jsonl")} == {"0-0", "9-0"}
