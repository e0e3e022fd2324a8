"""The broker: output validation, allowlists, policies, approval, redaction, logging, retries."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from agentswf import ToolCall, tool, workflow
from agentswf.engine.operator_wire import Approve, Pending, Reject, ask_run
from agentswf.engine.record.layout import read_json, read_lines
from agentswf.engine.tools.policy import allow, deny, log, redact, require_approval
from agentswf.testing import ToolFailed, ToolRefused, ToolResult, answer, run_workflow

from .kit import cancel_after, tool_lines

pytestmark = pytest.mark.anyio


class Refund(msgspec.Struct, forbid_unknown_fields=True):
    order_id: str
    amount: float
    card: str = ""


class Receipt(msgspec.Struct):
    refund_id: str
    status: str


def _wf(fn, policies=()):
    return workflow(name="t", description="A test workflow.", policies=policies)(fn)


async def _pending(wf, count=1):
    with anyio.fail_after(5):
        while len(pending := await wf.approvals.pending()) < count:
            await anyio.sleep(0.01)
    return pending


# Output validation ---------------------------------------------------------------------


async def test_a_result_not_fitting_output_fails_the_call(tmp_path):
    seen = []

    async def script(turn):
        seen.append(await turn.tool("good", {"order_id": "o1", "amount": 5}))
        seen.append(await turn.tool("bad", {"order_id": "o1", "amount": 5}))
        return "done"

    async def fn(wf):
        tools = {
            "good": tool(lambda r: {"refund_id": f"re_{r.order_id}", "status": "ok"}, input=Refund,
                         output=Receipt, description="Good."),
            "bad": tool(lambda r: {"refund_id": 3}, input=Refund, output=Receipt, description="Bad."),
        }
        agent = await wf.agents.open("a", runtime="shell:true", tools=tools)
        return (await agent.run("Go.")).outcome.kind

    run = await run_workflow(_wf(fn), agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == "answered"
    assert seen[0] == ToolResult(output={"refund_id": "re_o1", "status": "ok"})
    assert isinstance(seen[1], ToolFailed) and seen[1].outcome == "failed"
    assert "output schema" in seen[1].error and "refund_id" in seen[1].error


async def test_a_result_that_isnt_json_fails_the_call_but_a_struct_is_json(tmp_path):
    import datetime

    seen = []

    async def script(turn):
        for name in ("a_set", "a_date", "nan", "int_keys", "a_struct"):
            seen.append(await turn.tool(name))
        return "done"

    async def fn(wf):
        tools = {
            "a_set": tool(lambda: {"ids": {1, 2}}, description="d"),
            "a_date": tool(lambda: datetime.datetime(2024, 1, 1), description="d"),
            "nan": tool(lambda: float("nan"), description="d"),
            "int_keys": tool(lambda: {1: "a"}, description="d"),
            "a_struct": tool(lambda: Receipt("r", "ok"), description="d"),
        }
        agent = await wf.agents.open("a", runtime="shell:true", tools=tools)
        return (await agent.run("Go.")).outcome.kind

    run = await run_workflow(_wf(fn), agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == "answered"
    *bad, good = seen
    for got in bad:
        assert isinstance(got, ToolFailed) and "isn't JSON" in got.error, got
    assert good == ToolResult(output={"refund_id": "r", "status": "ok"})


# Allowlists and policies ---------------------------------------------------------------


async def test_allowed_agents_and_policies_deny_wins_over_allow(tmp_path):
    ran = []

    def refund(r: Refund, call: ToolCall) -> str:
        ran.append((call.agent, r.order_id))
        return "refunded"

    def policy(call):
        if call.input.get("amount", 0) > 100:
            return [allow(), deny("refunds over 100 need a manager")]
        return allow()

    def both_allow(call):
        return allow()

    seen: dict = {"specialist": [], "triager": []}

    def script(key):
        async def play(turn):
            seen[key].append(await turn.tool("refund", {"order_id": "small", "amount": 5}))
            seen[key].append(await turn.tool("refund", {"order_id": "big", "amount": 500}))
            return "done"

        return play

    async def fn(wf):
        refund_tool = tool(refund, input=Refund, description="Refund.", allowed_agents=["specialist"])
        agents = [
            await wf.agents.open(key, runtime="shell:true", tools={"refund": refund_tool})
            for key in ("specialist", "triager")
        ]
        for agent in agents:
            await agent.run("Go.")
        return "ok"

    run = await run_workflow(
        _wf(fn, policies=[both_allow, policy]),
        agents={"specialist": answer(script("specialist")), "triager": answer(script("triager"))},
        run_root=tmp_path,
    )
    assert run.value == "ok"
    assert ran == [("specialist", "small")]
    assert seen["specialist"][0] == ToolResult(output="refunded")
    assert seen["specialist"][1] == ToolRefused(code="denied", error="refunds over 100 need a manager")
    for got in seen["triager"]:
        assert got == ToolRefused(code="denied", error="tool refund is not for agent triager")
    denied = [line for line in tool_lines(run.run_dir) if line["code"] == "denied"]
    assert len(denied) == 3 and all(line["outcome"] == "refused" for line in denied)


async def test_a_broken_policy_fails_the_call_not_the_run(tmp_path):
    def broken(call):
        raise RuntimeError("policy bug")

    seen = []

    async def fn(wf):
        agent = await wf.agents.open("a", runtime="shell:true", tools={"ping": tool(lambda: "pong", description="P.")})
        return (await agent.run("Go.")).outcome.kind

    async def script(turn):
        seen.append(await turn.tool("ping"))
        return "done"

    run = await run_workflow(_wf(fn, policies=[broken]), agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == "answered"
    assert isinstance(seen[0], ToolFailed) and "policy bug" in seen[0].error


# Approval ------------------------------------------------------------------------------


def _approval_policy(call):
    if call.tool == "refund":
        return [require_approval("refunds need a person"), redact("card")]
    return None


async def test_a_call_needing_approval_waits_until_code_approves_it(tmp_path):
    ran = []
    seen = []

    def refund(r: Refund) -> str:
        ran.append(r)
        return "refunded"

    async def script(turn):
        seen.append(await turn.tool("refund", {"order_id": "o1", "amount": 5, "card": "4242"}))
        return "done"

    async def fn(wf):
        agent = await wf.agents.open("a", runtime="shell:true", tools={"refund": tool(refund, input=Refund, description="R.")})
        requests = []

        async def approver():
            [request] = await _pending(wf)
            requests.append(request)
            assert ran == []  # the handler waits for the decision
            assert await wf.approvals.approve(request.call_id, reason="fine")
            assert not await wf.approvals.approve(request.call_id)  # nothing waits any more

        async def work(which):
            if which == "turn":
                return (await agent.run("Go.", timeout=10)).outcome.kind
            await approver()

        kind, _ = await wf.parallel(["turn", "approver"], work)
        return kind, msgspec.to_builtins(requests[0])

    run = await run_workflow(_wf(fn, policies=[_approval_policy]), agents={"a": answer(script)}, run_root=tmp_path)
    kind, request = run.value
    assert kind == "answered"
    assert seen == [ToolResult(output="refunded")]
    assert len(ran) == 1 and ran[0].card == "4242"  # the handler gets the real input
    assert request["tool"] == "refund" and request["agent"] == "a" and request["reason"] == "refunds need a person"
    assert request["input"] == {"order_id": "o1", "amount": 5.0, "card": "[redacted]"}
    [line] = tool_lines(run.run_dir)
    assert line["outcome"] == "result" and line["input"]["card"] == "[redacted]"
    assert line["approval"] == {"approved": True, "reason": "fine", "by": "workflow"}
    [decided] = read_lines(run.run_dir / "approvals.jsonl")
    assert decided["call_id"] == request["call_id"]


async def test_an_operator_approves_or_rejects_over_the_runs_control_socket(tmp_path):
    ran = []
    seen = []

    def refund(r: Refund) -> str:
        ran.append(r.order_id)
        return "refunded"

    async def script(turn):
        seen.append(await turn.tool("refund", {"order_id": "o1", "amount": 5, "card": "4242"}))
        seen.append(await turn.tool("refund", {"order_id": "o2", "amount": 7, "card": "4242"}))
        return "done"

    async def fn(wf):
        agent = await wf.agents.open("a", runtime="shell:true", tools={"refund": tool(refund, input=Refund, description="R.")})
        control = read_json(wf.run_dir / "run.json")["control"]
        answers = []

        async def operator():
            for request in (Approve, Reject):
                await _pending(wf)
                listed = await anyio.to_thread.run_sync(ask_run, control, Pending())
                [waiting] = listed.value
                assert waiting["input"]["card"] == "[redacted]"
                decision = request(call_id=waiting["call_id"], reason="not this one", by="alice")
                answers.append(await anyio.to_thread.run_sync(ask_run, control, decision))

        async def work(which):
            if which == "turn":
                return (await agent.run("Go.", timeout=10)).outcome.kind
            await operator()

        kind, _ = await wf.parallel(["turn", "operator"], work)
        unknown = await anyio.to_thread.run_sync(ask_run, control, Approve(call_id="nope"))
        return kind, [(a.ok, a.message) for a in answers], (unknown.ok, unknown.message)

    run = await run_workflow(_wf(fn, policies=[_approval_policy]), agents={"a": answer(script)}, run_root=tmp_path)
    kind, answers, unknown = run.value
    assert kind == "answered"
    assert [ok for ok, _ in answers] == [True, True]
    assert "approved" in answers[0][1] and "rejected" in answers[1][1]
    assert unknown == (False, "no call nope is waiting for approval")
    assert ran == ["o1"]
    assert seen[0] == ToolResult(output="refunded")
    assert seen[1] == ToolRefused(code="rejected", error="a person rejected this call: not this one")
    lines = tool_lines(run.run_dir)
    assert [line["outcome"] for line in lines] == ["result", "refused"]
    assert lines[1]["approval"]["by"] == "alice" and lines[1]["approval"]["approved"] is False


async def test_rejected_from_code_and_no_decision_in_time(tmp_path):
    seen = []

    async def script(turn):
        seen.append(await turn.tool("refund", {"order_id": "o1", "amount": 5}))
        seen.append(await turn.tool("quick", {"order_id": "o2", "amount": 5}))
        return "done"

    async def fn(wf):
        tools = {
            "refund": tool(lambda r: "x", input=Refund, description="R.", requires_approval=True),
            "quick": tool(lambda r: "x", input=Refund, description="Q.", requires_approval=True, timeout="0.3s"),
        }
        agent = await wf.agents.open("a", runtime="shell:true", tools=tools)

        async def work(which):
            if which == "turn":
                return (await agent.run("Go.", timeout=10)).outcome.kind
            [request] = await _pending(wf)
            await wf.approvals.reject(request.call_id, reason="ask the manager")

        kind, _ = await wf.parallel(["turn", "decider"], work)
        return kind, await wf.approvals.pending()

    run = await run_workflow(_wf(fn), agents={"a": answer(script)}, run_root=tmp_path)
    kind, pending = run.value
    assert kind == "answered" and pending == []  # the timed-out request was withdrawn
    assert seen[0] == ToolRefused(code="rejected", error="a person rejected this call: ask the manager")
    assert isinstance(seen[1], ToolFailed) and seen[1].outcome == "timed-out"
    assert "no decision" in seen[1].error


async def test_a_turn_ending_while_its_call_awaits_approval_frees_the_agent(tmp_path):
    seen = []

    async def first(turn):
        await turn.tool("refund", {"order_id": "o1", "amount": 5})
        await anyio.sleep_forever()

    async def second(turn):
        seen.append(await turn.tool("ping"))
        return "done"

    async def fn(wf):
        tools = {
            "refund": tool(lambda r: "x", input=Refund, description="R.", requires_approval=True),
            "ping": tool(lambda: "pong", description="P."),
        }
        agent = await wf.agents.open("a", runtime="shell:true", tools=tools)
        await cancel_after(0.3, lambda: agent.run("Go.", timeout=20))
        started = anyio.current_time()
        await agent.run("Again.", timeout=20)
        return anyio.current_time() - started, await wf.approvals.pending()

    run = await run_workflow(_wf(fn), agents={"a": [answer(first), answer(second)]}, run_root=tmp_path)
    elapsed, pending = run.value
    assert seen == [ToolResult(output="pong")]  # not tool-busy: the waiting call ended with its turn
    assert pending == [] and elapsed < 3
    [line, _] = tool_lines(run.run_dir)
    assert line["outcome"] == "timed-out" and "turn ended" in line["error"]


# Redaction and logging -----------------------------------------------------------------


async def test_sensitive_fields_and_redact_policies_keep_input_out_of_the_record(tmp_path):
    def token_policy(call):
        return [redact("token"), log("audit")] if call.tool == "close_ticket" else None

    class Close(msgspec.Struct):
        ticket: str
        token: str
        nested: dict = {}

    got = []

    def close_ticket(c: Close) -> dict:
        got.append(c)
        return {"closed": c.ticket, "token": c.token}

    async def script(turn):
        assert await turn.tool(
            "close_ticket", {"ticket": "T-1", "token": "s3cret", "nested": {"token": "deep", "ok": 1}}
        ) == ToolResult(output={"closed": "T-1", "token": "s3cret"})
        await turn.tool("pay", {"order_id": "o", "amount": 1, "card": "4242"})
        return "done"

    async def fn(wf):
        tools = {
            "close_ticket": tool(close_ticket, input=Close, description="Close."),
            "pay": tool(lambda r: "paid", input=Refund, description="Pay.", sensitive_fields=["card"]),
        }
        agent = await wf.agents.open("a", runtime="shell:true", tools=tools)
        return (await agent.run("Go.")).outcome.kind

    run = await run_workflow(_wf(fn, policies=[token_policy]), agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == "answered"
    assert got[0].token == "s3cret"
    close, pay = tool_lines(run.run_dir)
    assert close["input"] == {"ticket": "T-1", "token": "[redacted]", "nested": {"token": "[redacted]", "ok": 1}}
    assert close["result"] == {"closed": "T-1", "token": "[redacted]"}
    assert pay["input"]["card"] == "[redacted]" and pay["input"]["order_id"] == "o"
    everything = b"".join(path.read_bytes() for path in run.run_dir.rglob("*") if path.is_file())
    assert b"s3cret" not in everything and b"4242" not in everything and b"deep" not in everything
    [logged] = [line for line in run.logs if "close_ticket" in line["message"]]
    assert logged["fields"]["input"]["token"] == "[redacted]" and logged["fields"]["reason"] == "audit"
    assert logged["fields"]["agent"] == "a" and logged["fields"]["call_id"] == close["call_id"]
    assert not [line for line in run.logs if "pay" in line["message"]]  # only the logged tool


# Retries -------------------------------------------------------------------------------


def _flaky(fail_times: int, log_: list):
    def handler(n: int) -> str:
        log_.append(anyio.from_thread.run_sync(anyio.current_time))  # a sync handler runs in a worker thread, off the loop
        if len(log_) <= fail_times:
            raise RuntimeError(f"attempt {len(log_)} failed")
        return f"ok after {len(log_)}"

    return handler


@pytest.mark.virtual_time
async def test_retries_run_the_handler_again_after_a_backoff(tmp_path):
    times: dict = {"retried": [], "once": [], "all_fail": []}
    seen = []

    async def script(turn):
        seen.append(await turn.tool("retried", {"n": 1}))
        seen.append(await turn.tool("once", {"n": 1}))
        seen.append(await turn.tool("all_fail", {"n": 1}))
        return "done"

    async def fn(wf):
        tools = {
            "retried": tool(_flaky(2, times["retried"]), description="R.", max_attempts=3, backoff="5s"),
            "once": tool(_flaky(2, times["once"]), description="O."),
            "all_fail": tool(_flaky(9, times["all_fail"]), description="F.", max_attempts=3),
        }
        agent = await wf.agents.open("a", runtime="shell:true", tools=tools)
        return (await agent.run("Go.")).outcome.kind

    run = await run_workflow(_wf(fn), agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == "answered"
    assert seen[0] == ToolResult(output="ok after 3")
    assert seen[1] == ToolFailed(outcome="failed", error="attempt 1 failed")  # without max_attempts: final
    assert seen[2] == ToolFailed(outcome="failed", error="attempt 3 failed")  # the last error
    assert len(times["once"]) == 1 and len(times["all_fail"]) == 3
    first, second, third = times["retried"]
    assert (second - first, third - second) == (pytest.approx(5), pytest.approx(10))  # 5 s, then doubled
    retried, once, all_fail = tool_lines(run.run_dir)
    assert (retried["outcome"], retried["attempts"], retried["result"]) == ("result", 3, "ok after 3")
    assert (once["outcome"], once["attempts"]) == ("failed", 1)
    assert (all_fail["outcome"], all_fail["attempts"], all_fail["error"]) == ("failed", 3, "attempt 3 failed")


@pytest.mark.virtual_time
async def test_no_retry_past_the_calls_time(tmp_path):
    times: list = []
    seen = []

    async def script(turn):
        seen.append(await turn.tool("retried", {"n": 1}))
        return "done"

    async def fn(wf):
        tools = {"retried": tool(_flaky(9, times), description="R.", max_attempts=5, backoff="2m", timeout="5m")}
        agent = await wf.agents.open("a", runtime="shell:true", tools=tools)
        return (await agent.run("Go.")).outcome.kind

    run = await run_workflow(_wf(fn), agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == "answered"
    assert len(times) == 2  # at 0 and 2m; the next pause (4m) would pass the 5m budget
    assert seen == [ToolFailed(outcome="failed", error="attempt 2 failed")]


def test_policy_decisions_fold_into_one_verdict():
    from agentswf.engine.tools.policy import PolicyCall, decide

    call = PolicyCall("t", "a", {"x": 1})
    assert decide(call, []).allowed
    assert not decide(call, [lambda c: allow(), lambda c: deny("no")]).allowed
    assert decide(call, [lambda c: deny("first"), lambda c: deny("second")]).reason == "first"
    verdict = decide(
        call,
        [lambda c: [require_approval("why"), redact("x")], lambda c: [redact("y"), log("l")]],
        sensitive_fields=frozenset({"z"}),
    )
    assert verdict.allowed and verdict.needs_approval and verdict.approval_reason == "why"
    assert verdict.redacted == {"x", "y", "z"} and verdict.logged and verdict.log_reason == "l"
    assert not decide(call, [], allowed_agents=frozenset({"b"})).allowed
    assert decide(call, [], allowed_agents=frozenset({"a"}), requires_approval=True).needs_approval


@pytest.mark.virtual_time
async def test_no_retry_once_the_turn_has_ended(tmp_path):
    times: list = []

    async def script(turn):
        await turn.tool("retried", {"n": 1})
        await anyio.sleep_forever()

    async def fn(wf):
        tools = {"retried": tool(_flaky(9, times), description="R.", max_attempts=3, backoff="1m", timeout=False)}
        agent = await wf.agents.open("a", runtime="shell:true", tools=tools)
        await cancel_after(20, lambda: agent.run("Go.", timeout="1h"))
        await anyio.sleep(120)  # past the backoff: a retry would have run by now
        return len(times)

    run = await run_workflow(_wf(fn), agents={"a": answer(script)}, run_root=tmp_path)
    assert run.value == 1
    [line] = tool_lines(run.run_dir)
    assert line["attempts"] == 1 and line["outcome"] == "failed"
