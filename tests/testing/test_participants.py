"""Scripted participants answer through the operator socket; a run's record reads back."""

from __future__ import annotations

import json

import anyio
import pytest

from agentswf import Workflow, WorkflowDefinition, WorkflowError, workflow
from agentswf.testing import (
    Record,
    TestScriptError,
    answer,
    read_record,
    respond,
    run_workflow,
)


@workflow(name="ask-lead", description="An agent asks a person, then answers with what it heard.")
async def ask_lead(wf: Workflow) -> str:
    worker = await wf.agents.open("worker", runtime="shell:true")
    lead = await wf.participants.open("lead")
    await wf.route(worker, lead, purpose="Questions for the lead")
    turn = await worker.run("Ask the lead whether to ship, then say what it said.")
    return turn.value


async def worker(turn):
    if "Ship it" in turn.prompt:
        return "the lead said ship it"
    sent = await turn.send("lead", "Ship it?", await_reply=True)
    assert sent.ok, sent.stderr
    return None


def asking_for_status(name: str, *, both_ways: bool) -> WorkflowDefinition:
    @workflow(name=name, description="The workflow asks a person for the status.")
    async def status(wf: Workflow) -> list[str]:
        lead = await wf.participants.open("lead")
        await wf.route(wf, lead, purpose="Status", both_ways=both_ways)
        await wf.send("lead", "Status?")
        mail = await wf.receive()
        return [mail.sender, mail.text, mail.kind]

    return status


status = asking_for_status("status", both_ways=True)


async def test_a_question_gets_the_participants_reply(run_root):
    heard = []

    def lead(mail):
        heard.append((mail.sender, mail.text, mail.is_question))
        return "Ship it."

    run = await run_workflow(
        ask_lead, agents={"worker": answer(worker)}, participants={"lead": respond(lead)}, run_root=run_root
    )
    assert run.value == "the lead said ship it"
    assert heard == [("worker", "Ship it?", True)]
    sent = [line["mail"] for line in run.record.messages if line["event"] == "sent"]
    assert [(mail["sender"], mail["to"], mail["kind"]) for mail in sent] == [
        ("worker", "lead", "question"),
        ("lead", "worker", "reply"),
    ]


async def test_a_message_gets_a_message_back_and_an_async_script_works(run_root):
    async def lead(mail):
        return f"All good, {mail.sender}."

    run = await run_workflow(status, agents={}, participants={"lead": respond(lead)}, run_root=run_root)
    assert run.value == ["lead", "All good, workflow.", "message"]


async def test_a_refused_answer_fails_the_test(run_root):
    one_way = asking_for_status("status-one-way", both_ways=False)  # the lead can't write back
    with pytest.raises(TestScriptError, match=r"participant lead: its message to workflow was refused \(no-route\)"):
        await run_workflow(one_way, agents={}, participants={"lead": respond("All good.")}, run_root=run_root)


async def test_an_error_in_the_script_is_raised_as_itself_and_ends_the_run(run_root):
    def lead(mail):
        raise AssertionError(f"the lead didn't expect {mail.text!r}")

    with pytest.raises(AssertionError, match="the lead didn't expect 'Status\\?'"):
        await run_workflow(status, agents={}, participants={"lead": respond(lead)}, run_root=run_root)
    (ended,) = run_root.glob("status/*/output.json")
    assert read_record(ended.parent).output["outcome"] == "failed"


@workflow(name="no-lead", description="Never opens its participant; fails its own way.")
async def no_lead(wf: Workflow, args: str) -> int:
    if args == "fail":
        return {"a": 1}["b"]
    return 1


async def test_a_participant_never_opened_is_named_and_the_workflows_error_is_its_own(run_root):
    with pytest.raises(TestScriptError, match="participant lead has a script, but the workflow never opened it"):
        await run_workflow(no_lead, agents={}, args="ok", participants={"lead": respond("x")}, run_root=run_root)
    failed = await run_workflow(
        no_lead, agents={}, args="fail", participants={"lead": respond("x")}, run_root=run_root
    )
    assert failed.outcome == "failed"
    assert failed.reason == "KeyError: 'b'"


async def test_a_record_reads_back_by_result_directory_or_id(run_root, run_record):
    run = await run_workflow(
        ask_lead, agents={"worker": answer(worker)}, participants={"lead": respond("Ship it.")}, run_root=run_root
    )
    by_id = read_record(run.run_id, run_root=run_root)
    assert by_id == read_record(run) == read_record(run.result) == run_record() == Record(run.run_dir)
    assert by_id.run["workflow"] == "ask-lead" and by_id.output["outcome"] == "completed"
    assert len(by_id.turns) == 1, (by_id.turns, by_id.messages)  # the whole story, should it ever fail
    (turn,) = by_id.turns
    assert turn["agent"] == "worker"
    assert [candidate["accepted"] for candidate in by_id.candidates(turn["call_id"])] == [True]
    assert "Ask the lead" in by_id.call(turn["call_id"])["prompt"]
    with pytest.raises(WorkflowError, match="no run nope under"):
        read_record("nope", run_root=run_root)


async def test_a_participant_waits_for_the_runs_socket_to_be_bound(tmp_path):
    """The run's socket is bound as its actors start, maybe after its workflow has started."""
    (tmp_path / "run.json").write_text(json.dumps({"control": str(tmp_path / "op.sock")}))
    with anyio.move_on_after(0.3) as waited:
        await respond("x").play("lead", tmp_path)
    assert waited.cancelled_caught


def test_run_record_without_a_run_says_so(run_root, run_record):
    with pytest.raises(WorkflowError, match="no run was recorded under"):
        run_record()


async def test_a_script_for_a_participant_never_opened_is_named(run_root):
    """A misspelt participant key would otherwise only wait for a reply that never comes."""
    with pytest.raises(TestScriptError, match=r"participant laed has a script, but the workflow never opened it \(it opened: lead\)"):
        await run_workflow(
            ask_lead,
            agents={"worker": answer(worker)},
            participants={"laed": respond("Ship it.")},
            run_root=run_root,
            timeout="2s",
        )
