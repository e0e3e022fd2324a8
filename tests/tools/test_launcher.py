"""`wfa tool` through real launcher processes of shell agents: what it prints and exits with."""

from __future__ import annotations

import datetime
import errno

import anyio
import msgspec
import pytest

from agentswf import tool
from agentswf.launcher import client
from agentswf.launcher.place import SOCKET_NAME

from .kit import Finding, answer_line, call_tool, run_wf, saved, shell_agent, tool_lines

pytestmark = pytest.mark.anyio


class Label(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    labels: list[str]


def _gate(tmp_path):
    """A handler that marks it started, then runs until the script touches $OUT/release."""
    count = {"n": 0}

    async def slow(x: str) -> str:
        count["n"] += 1
        (tmp_path / "started").write_text("1")
        with anyio.fail_after(8):
            while not (tmp_path / "release").exists():
                await anyio.sleep(0.02)
        return f"slow {x} #{count['n']}"

    return count, tool(slow, description="A slow tool.")


WAIT_STARTED = 'while [ ! -f "$OUT/started" ]; do sleep 0.02; done'


async def test_a_result_is_printed_as_the_agent_reads_it_and_exits_0(tmp_path):
    tools = {
        "text": tool(lambda: "two\nlines", description="Text."),
        "obj": tool(lambda: {"a": [1, 2], "b": None}, description="An object."),
        "num": tool(lambda: 3, description="A number."),
        "nothing": tool(lambda: None, description="Nothing."),
    }
    body = "\n".join(
        [call_tool("text", "text"), call_tool("obj", "obj"), call_tool("num", "num"),
         call_tool("nothing", "nothing"), answer_line()]
    )

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=shell_agent(tmp_path, "a", body), tools=tools)
        turn = await agent.run("Call.", timeout=15)
        return turn.outcome.kind if turn.outcome.answered else repr(turn.outcome)

    result = await run_wf(fn, tmp_path)
    assert result.value == "answered", result.reason
    text, obj, num, nothing = (saved(tmp_path, tag) for tag in ("text", "obj", "num", "nothing"))
    assert (text.rc, text.out, text.err) == (0, "two\nlines", "")
    assert obj.rc == 0 and msgspec.json.decode(obj.out) == {"a": [1, 2], "b": None} and obj.err == ""
    assert (num.rc, num.out.strip(), num.err) == (0, "3", "")
    assert (nothing.rc, nothing.out, nothing.err) == (0, "", "")


async def test_a_failed_call_exits_1_with_its_message_on_stderr(tmp_path):
    class Thing:
        pass

    def raises() -> str:
        raise ValueError("src/a.ts:3 is already recorded")

    tools = {
        "raises": tool(raises, description="Raises."),
        "a_set": tool(lambda: {1, 2}, description="A set."),
        "an_object": tool(lambda: Thing(), description="An object."),
        "a_date": tool(lambda: datetime.date(2024, 1, 2), description="A date."),
        "huge": tool(lambda: "x" * (64 * 1024 + 10), description="Too much."),
        "just_fits": tool(lambda: "x" * (64 * 1024 - 2), description="Just fits."),
    }
    body = "\n".join([call_tool(name, name) for name in tools] + [answer_line()])

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=shell_agent(tmp_path, "a", body), tools=tools)
        turn = await agent.run("Call.", timeout=15)
        return turn.outcome.kind

    result = await run_wf(fn, tmp_path)
    assert result.value == "answered", result.reason  # a failed call fails the call, not the turn or run
    raised = saved(tmp_path, "raises")
    assert raised.rc == 1 and raised.out == ""
    assert "src/a.ts:3 is already recorded" in raised.err
    for name in ("a_set", "an_object", "a_date"):
        got = saved(tmp_path, name)
        assert got.rc == 1 and got.out == "" and "isn't JSON" in got.err, (name, got)
    huge = saved(tmp_path, "huge")
    assert huge.rc == 1 and huge.out == "" and "65536" in huge.err
    fits = saved(tmp_path, "just_fits")
    assert fits.rc == 0 and fits.out == "x" * (64 * 1024 - 2)


async def test_no_tool_name_is_a_usage_error_exit_2(tmp_path):
    count = {"n": 0}

    def ping() -> str:
        count["n"] += 1
        return "pong"

    body = "\n".join([call_tool("bare", ""), answer_line()])

    async def fn(wf):
        agent = await wf.agents.open(
            "a", runtime=shell_agent(tmp_path, "a", body), tools={"ping": tool(ping, description="Ping.")}
        )
        turn = await agent.run("Call.", timeout=15)
        return turn.outcome.kind if turn.outcome.answered else repr(turn.outcome)

    result = await run_wf(fn, tmp_path)
    assert result.value == "answered", result.reason
    bare = saved(tmp_path, "bare")
    assert bare.rc == 2 and bare.out == ""
    assert "tool name" in bare.err and "usage" in bare.err
    assert count["n"] == 0 and tool_lines(tmp_path / "runs") == []


async def test_a_call_outside_a_turn_finds_nobody_listening(tmp_path):
    """Agent a's turn has ended: its socket is closed (an idle agent holds no descriptor),
    so a call reaches nothing, and the handler never runs."""
    count = {"n": 0}

    def ping() -> str:
        count["n"] += 1
        return "pong"

    async def fn(wf):
        a = await wf.agents.open(
            "a", runtime=shell_agent(tmp_path, "a", answer_line()), tools={"ping": tool(ping, description="Ping.")}
        )
        first = await a.run("Answer.", timeout=15)
        socket = str(a.launcher.with_name(SOCKET_NAME))
        try:
            await anyio.to_thread.run_sync(client.call, socket, client.build_request(["tool", "ping"], lambda: ""))
        except client.Unreached as error:
            return [first.outcome.kind, list(error.args[1:])]
        return [first.outcome.kind, "reached"]

    kind, late = (await run_wf(fn, tmp_path)).value
    assert kind == "answered"
    assert late == [errno.ECONNREFUSED]  # what the client reads as "your turn is over or the run is over"
    assert count["n"] == 0


async def test_a_call_after_the_answer_is_accepted_is_refused_result_accepted(tmp_path):
    count = {"n": 0}

    def ping() -> str:
        count["n"] += 1
        return "pong"

    body = "\n".join([answer_line(), call_tool("after", "ping")])

    async def fn(wf):
        agent = await wf.agents.open(
            "a", runtime=shell_agent(tmp_path, "a", body), tools={"ping": tool(ping, description="Ping.")}
        )
        return (await agent.run("Answer.", timeout=15)).outcome.kind

    result = await run_wf(fn, tmp_path)
    assert result.value == "answered", result.reason
    after = saved(tmp_path, "after")
    assert after.rc == 3 and after.out == "" and "result-accepted" in after.err
    assert count["n"] == 0


async def test_unknown_tool_is_refused_listing_the_tools(tmp_path):
    tools = {
        "ping": tool(lambda: "pong", description="Ping."),
        "list_findings": tool(lambda: "", description="List."),
    }
    body = "\n".join([call_tool("unk", "nope"), answer_line()])

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=shell_agent(tmp_path, "a", body), tools=tools)
        turn = await agent.run("Call.", timeout=15)
        return turn.outcome.kind if turn.outcome.answered else repr(turn.outcome)

    result = await run_wf(fn, tmp_path)
    assert result.value == "answered", result.reason
    unk = saved(tmp_path, "unk")
    assert unk.rc == 3 and unk.out == ""
    assert "unknown-tool" in unk.err and "'nope'" in unk.err
    assert "ping" in unk.err and "list_findings" in unk.err


async def test_invalid_input_is_refused_before_the_handler_runs(tmp_path):
    count = {"n": 0}

    def add(finding: Finding) -> str:
        count["n"] += 1
        return "ok"

    body = "\n".join(
        [
            call_tool("zero", "add --file 'a.py' --line '0' --problem 'x'"),
            call_tool("extra", "add --file 'a.py' --line '2' --problem 'x' --color 'red'"),
            call_tool("missing", "add --file 'a.py'"),
            answer_line(),
        ]
    )

    async def fn(wf):
        agent = await wf.agents.open(
            "a",
            runtime=shell_agent(tmp_path, "a", body),
            tools={"add": tool(add, input=Finding, description="Add.")},
        )
        turn = await agent.run("Call.", timeout=15)
        return turn.outcome.kind if turn.outcome.answered else repr(turn.outcome)

    result = await run_wf(fn, tmp_path)
    assert result.value == "answered", result.reason
    for tag in ("zero", "extra", "missing"):
        got = saved(tmp_path, tag)
        assert got.rc == 3 and got.out == "" and "invalid-input" in got.err, (tag, got)
        assert "did not run" in got.err
    assert "line" in saved(tmp_path, "zero").err
    assert "color" in saved(tmp_path, "extra").err
    assert count["n"] == 0
    # recorded, if at all, as refused: the handler never ran
    assert {(line["outcome"], line["code"]) for line in tool_lines(result.run_dir)} <= {("refused", "invalid-input")}


async def test_denied_by_the_allowlist_or_a_policy_exits_3(tmp_path):
    from agentswf.engine.tools.policy import deny

    count = {"n": 0}

    def ping() -> str:
        count["n"] += 1
        return "pong"

    def no_secret(call):
        return deny("secrets are not for agents") if call.tool == "secret" else None

    tools = {
        "ping": tool(ping, description="Ping.", allowed_agents=["someone-else"]),
        "secret": tool(ping, description="Secret."),
    }
    body = "\n".join([call_tool("ping", "ping"), call_tool("secret", "secret"), answer_line()])

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=shell_agent(tmp_path, "a", body), tools=tools)
        turn = await agent.run("Call.", timeout=15)
        return turn.outcome.kind if turn.outcome.answered else repr(turn.outcome)

    result = await run_wf(fn, tmp_path, policies=[no_secret])
    assert result.value == "answered", result.reason
    ping_, secret = saved(tmp_path, "ping"), saved(tmp_path, "secret")
    assert ping_.rc == 3 and "denied" in ping_.err and "not for agent a" in ping_.err
    assert secret.rc == 3 and "denied" in secret.err and "secrets are not for agents" in secret.err
    assert count["n"] == 0


async def test_a_call_over_its_timeout_exits_4_and_may_have_run(tmp_path):
    seen = {}

    async def sleepy() -> str:
        seen["started"] = True
        try:
            await anyio.sleep(5)
        except anyio.get_cancelled_exc_class():
            seen["cancelled"] = True
            raise
        return "late"

    body = "\n".join([call_tool("slow", "sleepy"), answer_line()])

    async def fn(wf):
        agent = await wf.agents.open(
            "a",
            runtime=shell_agent(tmp_path, "a", body),
            tools={"sleepy": tool(sleepy, description="Sleeps.", timeout="0.2s")},
        )
        turn = await agent.run("Call.", timeout=15)
        return turn.outcome.kind if turn.outcome.answered else repr(turn.outcome)

    with anyio.fail_after(4):
        result = await run_wf(fn, tmp_path)
    assert result.value == "answered", result.reason
    slow = saved(tmp_path, "slow")
    assert slow.rc == 4 and slow.out == ""
    assert "timed-out" in slow.err and "may have run" in slow.err.lower()
    assert seen == {"started": True, "cancelled": True}
    [line] = tool_lines(result.run_dir)
    assert line["outcome"] == "timed-out"
    assert 0.15 < line["ended_at"] - line["started_at"] < 1.5


async def test_result_and_waiting_are_refused_tool_running_while_a_call_runs(tmp_path):
    count, slow = _gate(tmp_path)
    body = "\n".join(
        [
            "(" + call_tool("slow", "slow --x '1'") + ") &",
            WAIT_STARTED,
            '"$WFA" result "$WFA_CALL_ID" </dev/null >"$OUT/res.out" 2>"$OUT/res.err"; echo $? >"$OUT/res.rc"',
            '"$WFA" waiting "$WFA_CALL_ID" --reason \'busy\' >"$OUT/wait.out" 2>"$OUT/wait.err"; echo $? >"$OUT/wait.rc"',
            'touch "$OUT/release"',
            "wait",
            answer_line(),
        ]
    )

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=shell_agent(tmp_path, "a", body), tools={"slow": slow})
        turn = await agent.run("Call.", timeout=15)
        return turn.outcome.kind if turn.outcome.answered else repr(turn.outcome)

    result = await run_wf(fn, tmp_path)
    assert result.value == "answered", result.reason
    res, wait = saved(tmp_path, "res"), saved(tmp_path, "wait")
    assert res.rc == 1 and "tool-running" in res.err
    assert wait.rc == 1 and "tool-running" in wait.err
    assert saved(tmp_path, "slow") == type(res)(0, "slow 1 #1", "")
    assert count["n"] == 1


async def test_a_different_call_while_one_runs_is_tool_busy(tmp_path):
    count, slow = _gate(tmp_path)
    other = {"n": 0}

    def ping() -> str:
        other["n"] += 1
        return "pong"

    body = "\n".join(
        [
            "(" + call_tool("first", "slow --x '1'") + ") &",
            WAIT_STARTED,
            call_tool("other_tool", "ping"),
            call_tool("other_input", "slow --x '2'"),
            'touch "$OUT/release"',
            "wait",
            call_tool("again", "ping"),
            answer_line(),
        ]
    )

    async def fn(wf):
        agent = await wf.agents.open(
            "a",
            runtime=shell_agent(tmp_path, "a", body),
            tools={"slow": slow, "ping": tool(ping, description="Ping.")},
        )
        turn = await agent.run("Call.", timeout=15)
        return turn.outcome.kind if turn.outcome.answered else repr(turn.outcome)

    result = await run_wf(fn, tmp_path)
    assert result.value == "answered", result.reason
    for tag in ("other_tool", "other_input"):
        got = saved(tmp_path, tag)
        assert got.rc == 3 and got.out == "" and "tool-busy" in got.err and "slow" in got.err, (tag, got)
    assert saved(tmp_path, "first").out == "slow 1 #1"
    assert saved(tmp_path, "again").out == "pong"  # once the first answered, calls run again
    assert count["n"] == 1 and other["n"] == 1


async def test_the_same_call_while_it_runs_joins_it_and_gets_its_answer(tmp_path):
    count, slow = _gate(tmp_path)
    body = "\n".join(
        [
            "(" + call_tool("first", "slow --x '1'") + ") &",
            WAIT_STARTED,
            "(" + call_tool("second", "slow --x '1'") + ") &",
            "sleep 0.5",
            'touch "$OUT/release"',
            "wait",
            'rm "$OUT/release"',
            "(sleep 0.3; touch \"$OUT/release\") &",
            call_tool("after", "slow --x '1'"),
            "wait",
            answer_line(),
        ]
    )

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=shell_agent(tmp_path, "a", body), tools={"slow": slow})
        turn = await agent.run("Call.", timeout=15)
        return turn.outcome.kind if turn.outcome.answered else repr(turn.outcome)

    result = await run_wf(fn, tmp_path)
    assert result.value == "answered", result.reason
    first, second = saved(tmp_path, "first"), saved(tmp_path, "second")
    assert first.rc == 0 and second.rc == 0
    assert first.out == second.out == "slow 1 #1"
    # a call made after it ended runs the handler again
    assert saved(tmp_path, "after").out == "slow 1 #2"
    assert count["n"] == 2
    assert len(tool_lines(result.run_dir)) == 2


async def test_flags_json_heredoc_and_name_alone(tmp_path):
    got = []

    def add_finding(finding: Finding) -> str:
        got.append(finding)
        return "ok"

    def label_item(item: Label) -> dict:
        got.append(item)
        return {"labelled": item.id, "labels": item.labels}

    tools = {
        "add_finding": tool(add_finding, input=Finding, description="Record one finding."),
        "label_item": tool(label_item, input=Label, description="Label an item."),
        "list_findings": tool(lambda: f"{len(got)} so far", description="The findings."),
    }
    body = "\n".join(
        [
            call_tool("flags", "add_finding --file 'src/report.ts' --line '41' --problem 'formatDate is '\\''never'\\'' called'"),
            call_tool("json", "label_item", '{"id": "b2", "labels": ["ops", "cron"]}'),
            call_tool("alone", "list_findings"),
            answer_line(),
        ]
    )

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=shell_agent(tmp_path, "a", body), tools=tools)
        turn = await agent.run("Call.", timeout=15)
        return turn.outcome.kind if turn.outcome.answered else repr(turn.outcome)

    result = await run_wf(fn, tmp_path)
    assert result.value == "answered", result.reason
    flags, json_, alone = saved(tmp_path, "flags"), saved(tmp_path, "json"), saved(tmp_path, "alone")
    assert (flags.rc, flags.out) == (0, "ok"), flags
    assert json_.rc == 0 and msgspec.json.decode(json_.out) == {"labelled": "b2", "labels": ["ops", "cron"]}
    assert (alone.rc, alone.out) == (0, "2 so far"), alone
    assert got == [
        Finding(file="src/report.ts", line=41, problem="formatDate is 'never' called"),
        Label(id="b2", labels=["ops", "cron"]),
    ]


async def test_a_shell_agent_calls_a_tool_without_input_by_its_name_alone_as_taught(tmp_path):
    body = "\n".join(
        ['"$WFA" tool ping >"$OUT/alone.out" 2>"$OUT/alone.err"; echo $? >"$OUT/alone.rc"', answer_line()]
    )

    async def fn(wf):
        agent = await wf.agents.open(
            "a", runtime=shell_agent(tmp_path, "a", body), tools={"ping": tool(lambda: "pong", description="Ping.")}
        )
        return (await agent.run("Call.", timeout=15)).outcome.kind

    result = await run_wf(fn, tmp_path)
    assert result.value == "answered", result.reason
    assert saved(tmp_path, "alone") == type(saved(tmp_path, "alone"))(0, "pong", "")
