"""Why an attempt started is in the agent's environment (`WFA_ATTEMPT_REASON`), so a shell agent
needn't grep its prompt: decided from the attempt's prompt, purely, and given to every harness."""

from __future__ import annotations

import pytest

from agentswf.engine import turn as t
from agentswf.engine.mail.words import Mail

from ..harnesses.kit import N, run_wf, shell_agent


def start(prompt: t.Prompt, *, nudge: bool = False, by: t.TurnKind = "workflow") -> t.StartAttempt:
    return t.StartAttempt("c1", 1, nudge, prompt, by, None)


def mail(kind: str) -> Mail:
    return Mail(id="m1", sender="b", to="a", text="hi", kind=kind)  # type: ignore[arg-type]


def test_each_kind_of_attempt_has_its_reason():
    assert t.attempt_reason(start("Review.")) == "turn"
    assert t.attempt_reason(start("Answer now.", nudge=True)) == "nudge"
    assert t.attempt_reason(start(t.Continue((mail("reply"),), None), nudge=True)) == "reply"
    assert t.attempt_reason(start(t.Continue((mail("message"), mail("question")), None))) == "mail"
    assert t.attempt_reason(start(t.Continue((mail("message"),), None), by="message")) == "mail"
    assert t.attempt_reason(start(t.Remind("You owe b a reply.", None))) == "reminder"
    assert t.attempt_reason(start(t.CheckIn("Still there?", None))) == "check-in"


@pytest.mark.anyio
async def test_a_shell_agent_reads_why_its_attempt_started(tmp_path):
    body = 'echo "$WFA_ATTEMPT_REASON" >>"$OUT/reasons"; if [ "$WFA_NUDGE" = 1 ]; then "$WFA" result "$WFA_CALL_ID" --n 1; fi'

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=shell_agent(tmp_path, "a", body))
        return (await agent.run("Count.", schema=N, timeout=30)).value.n

    result = await run_wf(fn, tmp_path)
    assert result.value == 1, result.reason
    assert (tmp_path / "reasons").read_text().split() == ["turn", "nudge"]
