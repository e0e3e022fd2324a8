"""A disk that fails the record is an error in the log, never a crash of the run.

The disk is made to fail by patching the Recorder's whole-file write for result.json:
these tests run as root here, which writes through read-only directories, and no small
filesystem can be mounted to fill up.
"""

from __future__ import annotations

import pytest

from agentswf import workflow
from agentswf.engine import recorder
from agentswf.testing import answer, run_workflow

pytestmark = pytest.mark.anyio


@workflow(name="unrecorded", description="A turn whose answer can't be recorded.")
async def unrecorded(wf):
    agent = await wf.agents.open("a", runtime="codex")
    return (await agent.run("Answer.", timeout="5s", nudge=False)).outcome.kind


async def test_an_answer_that_cant_be_recorded_is_refused_and_the_run_ends_failed(tmp_path, monkeypatch):
    real = recorder.write_whole

    def failing(path, data, *, exclusive=False):
        if path.name == "result.json":
            raise OSError(28, "No space left on device")
        return real(path, data, exclusive=exclusive)

    monkeypatch.setattr(recorder, "write_whole", failing)
    responses = []

    async def a(turn):
        responses.append(await turn.result("done"))

    run = await run_workflow(unrecorded, agents={"a": answer(a)}, run_root=tmp_path)
    assert [turn["outcome"]["kind"] for turn in run.turns] == ["unanswered"]  # nothing is taken that isn't on disk
    assert responses[0].code == "internal-error" and "couldn't record" in responses[0].error
    assert run.outcome == "failed"  # the run went on to its end, and says its record is incomplete
    assert run.reason.startswith("the run's record is incomplete: 1 write to it failed")
    assert "result.json" in run.reason
