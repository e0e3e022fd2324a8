"""An agent's words reach a person's terminal through `awf logs` and `awf tail`: an answer with an
escape sequence in it (OSC 52 sets the clipboard in many terminals; others hide or rewrite lines)
or a bidirectional override is printed as escapes, never obeyed."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentswf.cli.shown import quoted, shown

from ..harnesses.kit import run_wf, shell_agent

pytestmark = pytest.mark.anyio

# "\e]52;c;<rm -rf ~ in base64>\a": the clipboard, in a terminal that honours OSC 52; then a line
# rewritten over (\r, erase line) and text reversed by a right-to-left override.
HOSTILE = r"printf '\033]52;c;cm0gLXJmIH4K\007ok\r\033[2Kall tests passed \342\200\256gnp.exe'"
CONTROLS = ("\x1b", "\x07", "\r", "\u202e")


@given(st.text())
def test_shown_text_is_one_line_with_no_control_character(text):
    assert shown(text).isprintable()  # no new line, tab, control character or bidirectional override


@given(st.text(), st.sampled_from(["    ", "  > "]))
def test_a_quoted_body_has_every_line_under_its_indent(text, indent):
    """However a body an agent wrote runs over lines, each of them starts with awf's indent."""
    body = quoted(text, indent)
    assert body.endswith("\n")
    lines = body[:-1].split("\n")
    assert len(lines) == text.count("\n") + 1
    assert all(line.startswith(indent) and all(char.isprintable() or char == "\t" for char in line) for line in lines)


@given(st.text(st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"))))
def test_printable_text_is_shown_as_it_is(text):
    assert shown(text) == text


async def test_an_answer_with_escape_sequences_is_shown_not_obeyed_by_awf_logs_and_tail(tmp_path):
    body = f'{HOSTILE} | "$WFA" result "$WFA_CALL_ID"'

    async def fn(wf):
        agent = await wf.agents.open("a", runtime=shell_agent(tmp_path, "a", body))
        return (await agent.run("Say how it went.")).value

    result = await run_wf(fn, tmp_path)
    assert "\x1b]52" in result.value  # what the agent answered, as it answered it
    for command in (["logs", result.run_dir.name], ["tail", result.run_dir.name]):
        done = subprocess.run(
            [sys.executable, "-m", "agentswf", *command, "--run-root", str(tmp_path / "runs")], cwd=tmp_path,
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        if command[0] == "logs":  # the answer, escaped (tail says the turn ended, not what it said)
            assert "\\x1b]52;c;cm0gLXJmIH4K\\x07ok" in done.stdout, done.stdout
        assert not [char for char in CONTROLS if char in done.stdout], (command, done.stdout)


def test_awf_runs_progress_lines_show_what_an_agent_wrote_not_obey_it(tmp_path):
    """A workflow that logs an agent's answer (`wf.log`) prints it through `awf run`'s plain view."""
    flow = tmp_path / "flow.py"
    flow.write_text(
        "from agentswf import workflow\n\n"
        "@workflow(name='echoes', description='Logs what an agent said.')\n"
        "async def echoes(wf):\n"
        "    wf.log('the agent said', said='\\x1b]52;c;cm0gLXJmIH4K\\x07ok\\u202e')\n"
        "    return 'done'\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "agentswf", "run", "flow.py", "--run-root", "runs", "--plain"], cwd=tmp_path,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "\\x1b]52;c;cm0gLXJmIH4K\\x07ok\\u202e" in done.stderr, done.stderr
    assert not [char for char in CONTROLS if char in done.stderr], done.stderr
