"""People and the workflow as participants: from code, through `awf inbox/send/reply`, and wf.receive/race/select."""

from __future__ import annotations

import sys

import anyio
import anyio.lowlevel
import pytest

from agentswf import ToolCall, tool, workflow
from agentswf.engine.mail.rules import MAX_ROUTE_MESSAGES, MAX_UNREAD_MESSAGES
from agentswf.engine.operator import for_a_person
from agentswf.errors import DefinitionError, MessageRefused, WorkflowError
from agentswf.testing import answer, run_workflow

from .kit import agent, run_wf, sent_mail

pytestmark = pytest.mark.anyio
AWF = [sys.executable, "-m", "agentswf"]


def wf_def(fn, name="people"):
    return workflow(name=name, description="A messaging test workflow.")(fn)


async def test_a_participant_answers_from_code(tmp_path):
    seen = {}

    async def implementer(turn):
        if "coordinator's reply" in turn.prompt:
            return turn.prompt.split("<<<\n")[-1].split("\n>>>")[0]
        peers = await turn.peers()
        seen["peers"] = peers["peers"]
        asked = await turn.send("coordinator", "May I merge?", await_reply=True)
        seen["ack"] = asked.stdout
        return None

    async def flow(wf):
        implementer_ = await wf.agents.open("implementer", runtime="codex")
        coordinator = await wf.participants.open("coordinator")
        assert await wf.participants.open("coordinator") is coordinator
        with pytest.raises(DefinitionError):
            await wf.agents.open("coordinator", runtime="codex")  # one key namespace
        await wf.route(implementer_, coordinator, purpose="Ask before merging")
        assert await coordinator.inbox() == []
        with pytest.raises(MessageRefused) as refused:
            await coordinator.reply("implementer", "nobody asked")
        assert refused.value.code == "none-owed"
        async with anyio.create_task_group() as group:

            async def answer_it():
                question = await coordinator.receive()
                assert (question.sender, question.to, question.kind, question.text) == (
                    "implementer", "coordinator", "question", "May I merge?",
                )
                assert question.purpose == "Ask before merging"
                read = await coordinator.reply("implementer", "Merge it.")
                assert read in ("now: your reply starts its next turn", "when its current turn ends")
                with pytest.raises(MessageRefused) as again:
                    await coordinator.reply("implementer", "Merge it, again.")
                assert again.value.code == "none-owed"

            group.start_soon(answer_it)
            turn = await implementer_.run("Ask, then merge.")
        return turn.value

    run = await run_workflow(wf_def(flow), agents={"implementer": answer(implementer)}, run_root=tmp_path)
    assert run.value == "Merge it."
    assert seen["peers"] == [
        {"peer": "coordinator", "can": "send", "kind": "participant", "queued": 0, "purpose": "Ask before merging"}
    ]
    assert "it reads it when they read their inbox" in seen["ack"]


async def test_a_participant_sends_an_agent_a_message_which_starts_a_turn(tmp_path):
    async def reader(turn):
        assert turn.started_by == "message" and "A message from person:\n<<<\nPlease look at PR 7.\n>>>" in turn.prompt
        (tmp_path / "read").touch()

    async def flow(wf):
        reader_ = await wf.agents.open("reader", runtime="codex")
        person = await wf.participants.open("person")
        await wf.route(person, reader_, purpose="Requests")
        assert await person.send("reader", "Please look at PR 7.") == "now, in a turn of its own"
        with pytest.raises(MessageRefused) as refused:
            await person.send("nobody", "hello")
        assert refused.value.code == "no-route"
        with anyio.fail_after(10):
            while not (tmp_path / "read").exists():
                await anyio.sleep(0.02)

    await run_workflow(wf_def(flow), agents={"reader": answer(reader)}, run_root=tmp_path)


async def test_awf_inbox_and_awf_reply_answer_a_live_run(tmp_path):
    body = r"""
case "$PROMPT" in *"coordinator's reply"*) answer "$(printf '%s' "$PROMPT" | sed -n '3p')"; exit 0 ;; esac
w ask send --await-reply coordinator 'May I merge?'
"""
    results = {}

    async def person(run_id):
        root = str(tmp_path / "runs")
        empty = await anyio.run_process(
            [*AWF, "inbox", run_id, "--as", "stranger", "--run-root", root], check=False
        )
        results["stranger"] = empty
        inbox = await anyio.run_process(
            [*AWF, "inbox", run_id, "--as", "coordinator", "--wait", "5s", "--run-root", root], check=False
        )
        results["inbox"] = inbox
        replied = await anyio.run_process(
            [*AWF, "reply", run_id, "implementer", "Merge it.", "--as", "coordinator", "--run-root", root], check=False
        )
        results["reply"] = replied
        again = await anyio.run_process(
            [*AWF, "reply", run_id, "implementer", "--as", "coordinator", "Again.", "--run-root", root], check=False  # the message after --as
        )
        results["again"] = again
        as_agent = await anyio.run_process(
            [*AWF, "send", run_id, "coordinator", "I am not you.", "--as", "implementer", "--run-root", root], check=False
        )
        results["as_agent"] = as_agent
        nothing = await anyio.run_process(
            [*AWF, "inbox", run_id, "--as", "coordinator", "--wait", "0.2s", "--run-root", root], check=False
        )
        results["nothing"] = nothing

    async def flow(wf):
        implementer = await wf.agents.open("implementer", runtime=agent(tmp_path, "implementer", body))
        coordinator = await wf.participants.open("coordinator")
        await wf.route(implementer, coordinator, purpose="Ask before merging")
        async with anyio.create_task_group() as group:
            group.start_soon(person, wf.run_id)
            turn = await implementer.run("Ask, then merge.")
        return turn.value

    result = await run_wf(flow, tmp_path)
    assert result.value == "Merge it."
    assert results["stranger"].returncode == 2 and b"not a participant" in results["stranger"].stderr  # a usage error
    assert results["as_agent"].returncode == 2 and b"implementer is not a participant" in results["as_agent"].stderr
    inbox = results["inbox"]
    assert inbox.returncode == 0, inbox.stderr
    assert inbox.stdout.decode() == (
        "from implementer (a question: awf reply implementer --as coordinator):\n    May I merge?\n\n"  # the body indented under awf's header
    )
    assert results["reply"].returncode == 0, results["reply"].stderr
    assert results["reply"].stdout.decode().startswith("awf: replied to implementer")
    assert results["again"].returncode == 1 and b"refused (none-owed)" in results["again"].stderr
    assert b"use awf send implementer --as coordinator." in results["again"].stderr  # a person's command, not wfa's
    assert b"wfa" not in results["again"].stderr
    assert results["nothing"].returncode == 1 and b"no messages within 0.2s" in results["nothing"].stderr
    assert [(s, t, kind) for s, t, kind, _ in sent_mail(result)] == [
        ("implementer", "coordinator", "question"),
        ("coordinator", "implementer", "reply"),
    ]


async def test_awf_send_as_a_participant_starts_an_agents_turn(tmp_path):
    body = 'printf "%s" "$PROMPT" >"$OUT/got"; touch "$OUT/read"\n'

    async def flow(wf):
        reader = await wf.agents.open("reader", runtime=agent(tmp_path, "reader", body))
        person = await wf.participants.open("person")
        await wf.route(person, reader, purpose="Requests")
        root = str(tmp_path / "runs")
        done = await anyio.run_process(
            [*AWF, "send", wf.run_id, "reader", "--as", "person", "--run-root", root], input=b"Look at PR 7.\n",
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.decode() == "awf: sent to reader; it reads it now, in a turn of its own\n"
        with anyio.fail_after(10):
            while not (tmp_path / "read").exists():
                await anyio.sleep(0.02)

    await run_wf(flow, tmp_path)
    assert "A message from person:\n<<<\nLook at PR 7.\n>>>" in (tmp_path / "got").read_text()


async def test_wf_receive_gets_what_agents_send_the_workflow_and_wf_reply_answers(tmp_path):
    async def worker(turn):
        if "workflow's reply" in turn.prompt:
            return "told"
        assert (await turn.send("workflow", "progress: half done")).ok
        assert (await turn.send("workflow", "Shall I go on?", await_reply=True)).ok

    async def flow(wf):
        worker_ = await wf.agents.open("worker", runtime="codex")
        await wf.route(worker_, wf, purpose="Report to the workflow")
        got = []
        async with anyio.create_task_group() as group:

            async def listen():
                got.append(await wf.receive())
                got.append(await wf.receive())
                await wf.reply("worker", "Go on.")

            group.start_soon(listen)
            turn = await worker_.run("Work.")
        return [(m.sender, m.to, m.kind, m.text) for m in got] + [turn.value]

    run = await run_workflow(wf_def(flow), agents={"worker": answer(worker)}, run_root=tmp_path)
    assert run.value == [
        ("worker", "workflow", "message", "progress: half done"),
        ("worker", "workflow", "question", "Shall I go on?"),
        "told",
    ]


async def test_race_and_select_return_the_first_and_cancel_the_rest(tmp_path):
    cancelled = []

    async def slow(name):
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            cancelled.append(name)
            raise
        return name

    async def flow(wf):
        person = await wf.participants.open("person")
        await wf.route(person, wf, purpose="Tell the workflow")
        await person.send("workflow", "first")
        mail = await wf.race(wf.receive(), slow("race-loser"))
        name, value = await wf.select(timer=anyio.sleep(0.05), mail=wf.receive(), never=slow("select-loser"))
        assert (name, value) == ("timer", None)
        # The receive that lost the select took nothing: the next message still reaches the workflow.
        await person.send("workflow", "second")
        with anyio.fail_after(5):
            second = await wf.receive()
        with pytest.raises(DefinitionError):
            await wf.race()
        return [mail.text, second.text]

    result = await run_wf(flow, tmp_path)
    assert result.value == ["first", "second"]
    assert cancelled == ["race-loser", "select-loser"]


async def test_receive_race_and_select_raise_inside_a_tool_handler(tmp_path):
    async def agent_script(turn):
        outputs = [(await turn.tool(name)).output for name in ("receive", "race", "select", "participant")]
        return outputs

    def make_tools(wf, people):
        async def attempt(make):
            inner = anyio.lowlevel.checkpoint()
            try:
                await make(inner)
            except WorkflowError as error:
                return str(error)
            finally:
                inner.close()
            return "no error"

        async def receive(call: ToolCall) -> str:
            return await attempt(lambda inner: wf.receive())

        async def race(call: ToolCall) -> str:
            return await attempt(lambda inner: wf.race(inner))

        async def select(call: ToolCall) -> str:
            return await attempt(lambda inner: wf.select(now=inner))

        async def participant(call: ToolCall) -> str:
            return await attempt(lambda inner: people[0].receive())

        return {
            name: tool(fn, description=f"Tries {name} inside a handler.")
            for name, fn in (("receive", receive), ("race", race), ("select", select), ("participant", participant))
        }

    participant_holder = []

    async def flow(wf):
        participant_holder.append(await wf.participants.open("person"))
        worker = await wf.agents.open("worker", runtime="codex", tools=make_tools(wf, participant_holder))
        turn = await worker.run("Try them.", schema=list[str])
        return turn.value

    run = await run_workflow(wf_def(flow), agents={"worker": answer(agent_script)}, run_root=tmp_path)
    for text, what in zip(run.value, ("wf.receive", "wf.race", "wf.select", "receive")):
        assert text.startswith(f"{what} can't be used inside a tool handler (")


async def test_a_route_carries_at_most_40_messages(tmp_path):
    outcomes = []
    people = {}

    async def chatty(turn):
        for _ in range(MAX_ROUTE_MESSAGES):
            outcomes.append((await turn.send("person", "news")).code)
            await people["person"].inbox()  # read, so its inbox never fills
        outcomes.append((await turn.send("person", "one too many")).code)
        return "done"

    async def flow(wf):
        people["person"] = person = await wf.participants.open("person")
        chatty_ = await wf.agents.open("chatty", runtime="codex")
        await wf.route(chatty_, person, purpose="News")
        assert (await chatty_.run("Tell the person.")).value == "done"
        for bad in (
            dict(purpose="Too many", max_messages=MAX_ROUTE_MESSAGES + 1),
            dict(purpose="None", max_messages=0),
            dict(purpose="x" * 201),
            dict(purpose="two\nlines"),
            dict(purpose=" "),
        ):
            with pytest.raises(DefinitionError):
                await wf.route(chatty_, "workflow", **bad)
        with pytest.raises(DefinitionError):
            await wf.route(chatty_, person, purpose="A second open route between the same two")
        await wf.route(chatty_, "workflow", purpose="x" * 200, max_messages=1)

    await run_workflow(wf_def(flow), agents={"chatty": answer(chatty)}, run_root=tmp_path)
    assert outcomes == [None] * MAX_ROUTE_MESSAGES + ["limit"]


async def test_a_participants_unread_messages_are_limited_too(tmp_path):
    codes = []

    async def chatty(turn):
        for _ in range(MAX_UNREAD_MESSAGES + 1):
            codes.append((await turn.send("person", "news")).code)
        return "done"

    async def flow(wf):
        person = await wf.participants.open("person")
        chatty_ = await wf.agents.open("chatty", runtime="codex")
        await wf.route(chatty_, person, purpose="News")
        await chatty_.run("Tell.")
        return len(await person.inbox())

    run = await run_workflow(wf_def(flow), agents={"chatty": answer(chatty)}, run_root=tmp_path)
    assert codes == [None] * MAX_UNREAD_MESSAGES + ["inbox-full"]
    assert run.value == MAX_UNREAD_MESSAGES


async def test_race_raises_the_first_error_as_itself(tmp_path):
    async def boom():
        raise ValueError("lost")

    async def flow(wf):
        try:
            await wf.race(boom(), anyio.sleep(10))
        except ValueError as error:
            return str(error)
        return "no error"

    run = await run_workflow(wf_def(flow), agents={}, run_root=tmp_path)
    assert run.value == "lost"


@pytest.mark.parametrize(
    ("refusal", "told"),
    [
        ("b asked you nothing open, or was answered already; to message it, use wfa send b.",
         "b asked you nothing open, or was answered already; to message it, use awf send b --as boss."),
        ("you can only reply to b (wfa reply b), not send it messages of your own.",
         "you can only reply to b (awf reply b --as boss), not send it messages of your own."),
        ("there is no route to b; wfa peers lists the peers you can message.",
         "there is no route to b; the workflow's wf.route calls say whom a participant can message."),
    ],
)
def test_a_refusal_told_to_a_person_names_the_persons_command(refusal, told):
    assert for_a_person(refusal, "boss") == told
