"""The ACP client's sans-IO rules: they choose by kind, never by id (its lines: tests/harnesses/test_jsonrpc.py)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from agentswf.harnesses.acp_rpc import (
    AgentCapabilities,
    Permissions,
    capabilities,
    choose,
    command_of,
    cost_of,
    is_wfa_command,
    model_choice,
    model_option,
    turn_tokens,
)
from agentswf.harnesses.acp_turn import MAX_TRANSCRIPT_ENTRIES, Turn
from agentswf.harnesses.jsonrpc import Notice, Request
from agentswf.harnesses.usage import Usage

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


options = st.lists(
    st.fixed_dictionaries({"optionId": st.text(max_size=5), "kind": st.sampled_from(
        ["allow_once", "allow_always", "reject_once", "reject_always", "other"])}),
    max_size=6,
)  # fmt: skip


@given(options, st.booleans())
def test_a_permission_is_answered_by_kind_never_always(offered, allow):
    outcome = choose(offered, allow)["outcome"]
    wanted = "allow_once" if allow else "reject_once"
    if outcome["outcome"] == "cancelled":
        assert not any(o["kind"] == wanted and o["optionId"] not in shared(offered, wanted) for o in offered)
        return
    same = [o["kind"] for o in offered if o["optionId"] == outcome["optionId"]]
    assert set(same) == {"allow_once" if allow else "reject_once"}  # no option of another kind shares its id
    first = next(o for o in offered if o["kind"] == same[0] and o["optionId"] not in shared(offered, same[0]))
    assert first["optionId"] == outcome["optionId"]  # the first of its kind, whatever the ids say


def shared(offered: list[dict[str, str]], kind: str) -> set[str]:
    return {o["optionId"] for o in offered if o["kind"] != kind}


LAUNCHER = "/tmp/awf-x/a1/wfa"


@given(st.text(max_size=40))
def test_a_wfa_command_is_the_launcher_and_nothing_chained(rest):
    command = f"{LAUNCHER} {rest}"
    if is_wfa_command(command, LAUNCHER):
        assert not any(c in rest for c in ";&|<>`$()\n\\")


def test_wfa_commands_and_others():
    assert is_wfa_command(f"{LAUNCHER} result c1 --verdict approve", LAUNCHER)
    assert is_wfa_command(f"'{LAUNCHER}' result c1 --note 'two words'", LAUNCHER)
    for other in (f"{LAUNCHER} result c1; rm -rf ~", f"{LAUNCHER} result $(id)", f"{LAUNCHER}x result",
                  f"echo {LAUNCHER}", f"{LAUNCHER} result c1 > /etc/x", "", "'unterminated"):  # fmt: skip
        assert not is_wfa_command(other, LAUNCHER), other


def test_the_command_a_tool_call_runs():
    assert command_of({"rawInput": {"command": "echo hi"}}) == "echo hi"
    assert command_of({"rawInput": {"command": ["/bin/bash", "-lc", "echo hi"]}}) == "echo hi"  # codex-acp
    assert command_of({"rawInput": {"command": ["ls", "-l", "a b"]}}) == "ls -l 'a b'"
    assert command_of({"kind": "execute", "title": "echo hi"}) == "echo hi"  # gemini's title
    assert command_of({"kind": "edit", "title": "a.py"}) is None


def test_permissions_by_kind_and_title():
    assert Permissions().allows("execute", "anything")
    assert not Permissions().allows("edit", "a.py")
    assert not Permissions(allow=()).allows("execute", "ls")
    rules = Permissions(allow=("read", "execute:git *", "*:ok"))
    assert rules.allows("read", "x") and rules.allows("execute", "git status") and rules.allows("edit", "ok")
    assert not rules.allows("execute", "rm -rf /")


def test_capabilities_and_models_read_plainly():
    said = {"agentCapabilities": {"loadSession": True, "sessionCapabilities": {"resume": {}, "fork": {}}},
            "agentInfo": {"name": "OpenCode", "version": "1.18.33"}}  # fmt: skip
    assert capabilities(said) == AgentCapabilities(load=True, resume=True, fork=True, name="OpenCode", version="1.18.33")
    assert capabilities({"agentCapabilities": {"loadSession": "yes", "sessionCapabilities": {"resume": True}}}) == AgentCapabilities()
    assert capabilities([]) == AgentCapabilities()
    assert model_option({"configOptions": [{"id": "mode"}, {"id": "model"}]}) == "config"
    assert model_option({"models": {"currentModelId": "x"}}) == "models"
    assert model_option({"sessionId": "s"}) is None


def test_each_agents_usage_where_it_reports_it():
    response = {"stopReason": "end_turn", "usage": {"inputTokens": 203, "outputTokens": 84, "cachedReadTokens": 5}}
    assert turn_tokens(response, None, ("response",)) == Usage(203, 84, 5)
    quota = {"_meta": {"quota": {"token_count": {"input_tokens": 7, "output_tokens": 3}}}}
    assert turn_tokens(quota, None, ("response", "quota")) == Usage(7, 3)
    assert turn_tokens({}, Usage(1, 2), ("response", "meta")) == Usage(1, 2)
    assert turn_tokens({"usage": {"inputTokens": -5, "outputTokens": True}}, None, ("response",)) == Usage()
    assert cost_of({"cost": {"amount": 0.5, "currency": "USD"}}) == 0.5
    assert [cost_of({"cost": c}) for c in ({"amount": 1, "currency": "EUR"}, {"amount": -1, "currency": "USD"},
                                             {"amount": float("inf"), "currency": "USD"}, "1")] == [None] * 4  # fmt: skip


def update(what: str, **fields: Any) -> Notice:
    return Notice("session/update", {"sessionId": "s", "update": {"sessionUpdate": what, **fields}})


def test_the_turn_keeps_its_session_s_updates_from_its_prompt_on_and_sums_per_call_usage():
    received: list[int] = []
    turn = Turn(LAUNCHER, Permissions(), lambda: received.append(1))
    turn.session = "s"
    turn.notice(update("agent_message_chunk", content={"type": "text", "text": "replayed"}))
    turn.prompting = True
    for _ in range(2):
        turn.notice(update("agent_message_chunk", content={"type": "text", "text": ""},
                           _meta={"usage": {"inputTokens": 100, "outputTokens": 20}}))  # fmt: skip
    turn.notice(update("agent_message_chunk", content={"type": "text", "text": "Done."}))
    turn.notice(Notice("session/update", {"sessionId": "other", "update": {"sessionUpdate": "usage_update",
                                                                           "cost": {"amount": 9, "currency": "USD"}}}))  # fmt: skip
    assert received == [1] and turn.per_call == Usage(200, 40) and turn.cost is None
    assert [entry.get("text") for entry in turn.transcript] == ["Done."]  # "replayed" was the session's, before the prompt
    assert json.loads(turn.record().splitlines()[0]) == {"before_prompt": 1}


def test_the_transcript_is_bounded():
    turn = Turn(LAUNCHER, Permissions())
    turn.prompting = True
    for n in range(MAX_TRANSCRIPT_ENTRIES + 5):
        turn.notice(update("tool_call", toolCallId=f"t{n}", title="x" * 10_000, kind="execute"))
    lines = turn.record().splitlines()
    assert len(lines) == MAX_TRANSCRIPT_ENTRIES + 1 and json.loads(lines[-1]) == {"dropped": 5}
    assert max(len(line) for line in lines) < 1000


def test_a_permission_merges_what_the_tool_call_said_before():
    turn = Turn(LAUNCHER, Permissions(allow=()))
    turn.prompting = True
    turn.notice(update("tool_call_update", toolCallId="t1", title="Terminal", kind="execute",
                       rawInput={"command": f"{LAUNCHER} result c1 --verdict approve"}))  # fmt: skip
    asked = Request(1, "session/request_permission", {"toolCall": {"toolCallId": "t1"}, "options": [
        {"optionId": "a", "kind": "allow_always"}, {"optionId": "o", "kind": "allow_once"}]})  # fmt: skip
    assert turn.request(asked) == {"outcome": {"outcome": "selected", "optionId": "o"}}
    assert turn.transcript[-1]["why"] == "the agent's wfa"


def test_a_long_command_is_never_taken_for_wfa_and_a_tool_calls_input_isnt_kept():
    turn = Turn(LAUNCHER, Permissions(allow=()))
    turn.prompting = True
    chained = f"{LAUNCHER} result c1 --note {'x' * 10_000}; rm -rf ~"
    turn.notice(update("tool_call", toolCallId="t1", kind="execute", title="Shell", rawInput={"command": chained}))
    turn.notice(update("tool_call_update", toolCallId="t2", kind="execute", title=chained))
    assert max(len(msgspec.json.encode(call)) for call in turn._calls.values()) < 1000
    for key in ("t1", "t2"):  # asked with no command of its own: what the updates said is all there is
        asked = Request(1, "session/request_permission", {"toolCall": {"toolCallId": key}, "options": [
            {"optionId": "o", "kind": "allow_once"}, {"optionId": "r", "kind": "reject_once"}]})  # fmt: skip
        assert turn.request(asked) == {"outcome": {"outcome": "selected", "optionId": "r"}}, key


update_bodies = st.fixed_dictionaries(
    {"sessionUpdate": st.sampled_from(["agent_message_chunk", "tool_call", "tool_call_update", "usage_update", "plan", 7])},
    optional={name: json_values for name in ("toolCallId", "title", "kind", "status", "rawInput", "content", "_meta",
                                             "cost", "used", "size")},
)  # fmt: skip
tool_calls = st.fixed_dictionaries({}, optional={name: json_values for name in ("toolCallId", "title", "kind", "rawInput")})


@given(st.lists(update_bodies | tool_calls.map(lambda call: {"toolCall": call, "options": []}), max_size=12))
def test_the_turn_takes_any_updates_and_requests_and_keeps_a_json_record(messages):
    turn = Turn(LAUNCHER, Permissions(allow=()))
    turn.prompting = True
    for message in messages:
        if "toolCall" in message:
            answered = turn.request(Request(1, "session/request_permission", message))
            assert answered == {"outcome": {"outcome": "cancelled"}}  # no options offered
        else:
            turn.notice(Notice("session/update", {"update": message}))
    for line in turn.record().split("\n"):  # JSON lines: a str's splitlines would split inside a string at \x85 or \u2028
        if line:
            assert isinstance(msgspec.json.decode(line), dict)
    assert turn.per_call is None or all(
        count is None or count >= 0 for count in (turn.per_call.input_tokens, turn.per_call.output_tokens))


def test_a_model_is_chosen_by_its_id_or_its_name():
    qwen = {"configOptions": [{"id": "model", "currentValue": "$runtime|openai|a(openai)", "options": [
        {"value": "$runtime|openai|a(openai)", "name": "a"}, {"value": "$runtime|openai|b(openai)", "name": "b"}]}]}  # fmt: skip
    assert model_choice(qwen, "b") == ("$runtime|openai|b(openai)", "$runtime|openai|a(openai)")
    assert model_choice(qwen, "a")[0] == model_choice(qwen, "a")[1]  # already the current one: nothing to set
    grouped = {"configOptions": [{"id": "model", "currentValue": "x", "options": [
        {"group": "zen", "name": "Zen", "options": [{"value": "fake/fake-model", "name": "Fake"}]}]}]}  # fmt: skip
    assert model_choice(grouped, "Fake") == ("fake/fake-model", "x")
    gemini = {"models": {"currentModelId": "gemini-2.5-flash", "availableModels": [{"modelId": "gemini-2.5-pro", "name": "Pro"}]}}
    assert model_choice(gemini, "gemini-2.5-pro") == ("gemini-2.5-pro", "gemini-2.5-flash")
    assert model_choice({}, "anything") == ("anything", None)
    assert model_choice({"configOptions": "x", "models": []}, "m") == ("m", None)
