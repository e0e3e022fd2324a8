"""A disk that fails the record is an error in the log, never a crash of the run.

The disk is made to fail by patching the record's writers for one file: root writes
through read-only directories. A real full disk (a small tmpfs) is in test_disk_full.py.
"""

from __future__ import annotations

import anyio
import pytest

from agentswf import tool, workflow
from agentswf.engine.record import layout as records
from agentswf.engine.record.layout import read_json
from agentswf.testing import answer, run_workflow

pytestmark = pytest.mark.anyio


@workflow(name="unrecorded", description="A turn whose answer can't be recorded.")
async def unrecorded(wf):
    agent = await wf.agents.open("a", runtime="codex")
    return (await agent.run("Answer.", timeout="5s", nudge=False)).outcome.kind


async def test_an_answer_that_cant_be_recorded_is_refused_and_the_run_ends_failed(tmp_path, monkeypatch):
    real = records._stage

    def failing(path, data, exclusive):
        if path.name == "result.json":
            raise OSError(28, "No space left on device")
        return real(path, data, exclusive)

    monkeypatch.setattr(records, "_stage", failing)
    responses = []

    async def a(turn):
        responses.append(await turn.result("done"))

    run = await run_workflow(unrecorded, agents={"a": answer(a)}, run_root=tmp_path)
    assert [turn["outcome"]["kind"] for turn in run.turns] == ["unanswered"]  # nothing is taken that isn't on disk
    assert responses[0].code == "internal-error" and "couldn't record" in responses[0].error
    assert run.outcome == "failed"  # the run went on to its end, and says its record is incomplete
    assert run.reason.startswith("the run's record is incomplete: 1 write to it failed")
    assert "result.json" in run.reason


def fail_lines_of(monkeypatch, name: str) -> None:
    """Every line appended to the record's `name` fails, as on a full disk."""
    real = records.LineLog.write

    def write(log, data):
        if log.path.name == name:
            raise OSError(28, "No space left on device")
        return real(log, data)

    monkeypatch.setattr(records.LineLog, "write", write)


@tool(description="Echo a number.")
def echo(n: int) -> int:
    ran.append(n)
    return n


ran: list[int] = []


@workflow(name="unrecorded-call", description="A tool call whose line can't be written.")
async def unrecorded_call(wf):
    agent = await wf.agents.open("a", runtime="codex", tools={"echo": echo})
    return (await agent.run("Call echo.", timeout="5s", nudge=False)).outcome.kind


async def test_a_tool_call_that_cant_be_recorded_is_answered_internal_error_and_the_run_fails(
    tmp_path, monkeypatch
):
    fail_lines_of(monkeypatch, "tools.jsonl")
    ran.clear()
    answers = []

    async def a(turn):
        answers.append(await turn.request("tool", name="echo", args=[], input='{"n": 3}'))
        return "done"

    run = await run_workflow(unrecorded_call, agents={"a": answer(a)}, run_root=tmp_path)
    assert ran == [3]  # the handler ran, but its answer isn't given: it isn't on the record
    [response] = answers
    assert response.code == "internal-error" and response.exit == 4 and "may have run" in response.error
    assert run.outcome == "failed" and "record is incomplete" in run.reason and "tools.jsonl" in run.reason
    assert read_json(run.run_dir / "output.json")["outcome"] == "failed"


@workflow(name="unrecorded-message", description="A message whose line can't be written.")
async def unrecorded_message(wf):
    agent = await wf.agents.open("a", runtime="codex")
    await wf.route(agent, wf, purpose="Tell the workflow")
    turn = await agent.run("Tell the workflow.", timeout="5s", nudge=False)
    delivered.append(await wf.race(wf.receive(), anyio.sleep(60)))  # None: nothing came in a minute (virtual)
    return turn.outcome.kind


delivered: list = []


@pytest.mark.virtual_time
async def test_a_message_that_cant_be_recorded_is_not_sent_and_the_run_fails(tmp_path, monkeypatch):
    fail_lines_of(monkeypatch, "messages.jsonl")
    delivered.clear()
    sent = []

    async def a(turn):
        sent.append(await turn.send("workflow", "hello"))
        return "done"

    run = await run_workflow(unrecorded_message, agents={"a": answer(a)}, run_root=tmp_path)
    [response] = sent
    assert response.code == "internal-error" and "wasn't sent" in response.error
    assert delivered == [None]  # what isn't on the record isn't delivered either
    assert run.outcome == "failed" and run.reason.startswith("the run's record is incomplete")
    assert "messages.jsonl" in run.reason and "had ended" not in run.reason  # the workflow itself completed
