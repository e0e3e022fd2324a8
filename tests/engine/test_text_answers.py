"""A turn without a schema is answered in plain text: a heredoc, words, or a JSON string."""

from __future__ import annotations

import pytest

from agentswf.wire.prompts import answer_block
from agentswf.wire.teaching import ReadError, Taught
from tests.harnesses.kit import run_wf, shell_agent

pytestmark = pytest.mark.anyio


def test_text_is_read_as_it_comes():
    text = Taught(str)
    assert text.read([], "Two findings.\nBoth in src/.\n") == "Two findings.\nBoth in src/."
    assert text.read([], '"quoted JSON"') == "quoted JSON"
    assert text.read(["All", "good."], None) == "All good."
    with pytest.raises(ReadError, match="plain text"):
        text.read(["--verdict", "ok"], None)
    with pytest.raises(ReadError, match="nothing was given"):
        text.read([], "\n")


def test_the_prompt_teaches_a_plain_text_heredoc():
    block = answer_block("/tmp/awf-x/a1/wfa", "c1", Taught(str))
    assert "/tmp/awf-x/a1/wfa result c1 <<'WF_TEXT'\n<your answer, as plain text>\nWF_TEXT" in block
    assert "schema" not in block


@pytest.mark.parametrize(
    "answering, expected",
    [
        ("\"$WFA\" result \"$WFA_CALL_ID\" <<'WF_TEXT'\nLooks right.\nWF_TEXT", "Looks right."),
        ('"$WFA" result "$WFA_CALL_ID" Looks right.', "Looks right."),
    ],
)
async def test_a_shell_agent_answers_in_plain_text(tmp_path, answering, expected):
    runtime = shell_agent(tmp_path, "agent", answering)

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=runtime)
        return (await agent.run("Review.", timeout="10s")).value

    result = await run_wf(fn, tmp_path)
    assert result.value == expected, result.reason
