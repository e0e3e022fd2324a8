"""What `awf run` shows as the run works: the live view in a real terminal (tmux), plain lines elsewhere."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from agentswf import Budget
from agentswf.cli.follow import Event, Tally
from agentswf.cli.live import render
from agentswf.workflow.budgets import Spent

AWF = [sys.executable, "-m", "agentswf"]
WAIT_SECONDS = 30.0

FLOWS = '''
from agentswf import tool, workflow


def note(text: str) -> str:
    """Keep a note."""
    return "kept"


@workflow(name="chatty", description="An agent calls a tool, tells the workflow, answers.")
async def chatty(wf):
    agent = await wf.agents.open("a", runtime="shell:{script}", tools={"note": tool(note)})
    await wf.route(agent, wf, purpose="notes")
    turn = await agent.run("Note, tell, answer.")
    await wf.receive()
    wf.log("noted", by="a")
    return turn.value


@workflow(name="twice", description="A planned stage, then a build that fails while a file `broken` is there.")
async def twice(wf):
    planner = await wf.agents.open("planner", runtime="shell:echo plan | \\"$WFA\\" result \\"$WFA_CALL_ID\\"")
    builder = await wf.agents.open("builder", runtime="shell:test ! -e broken && echo built | \\"$WFA\\" result \\"$WFA_CALL_ID\\"")
    async def plan():
        return (await planner.run("Plan.")).value
    async def build():
        turn = await builder.run("Build.")
        if not turn.answered:
            wf.stop("no build")
        return turn.value
    await wf.stage("plan", plan, result=str)
    return await wf.stage("build", build, result=str)


@workflow(name="busy", description="Two reviewers: one answers, one sleeps in its turn.")
async def busy(wf):
    quick = await wf.agents.open("review:quick", runtime="shell:echo fine | \\"$WFA\\" result \\"$WFA_CALL_ID\\"")
    await quick.run("Say fine.")
    wf.log("the quick one is done", reviewer="quick")
    sleeper = await wf.agents.open("review:sleeper", runtime="shell:sleep 1000")
    await sleeper.run("Sleep.", timeout="1h")
'''

AGENT = """#!/bin/sh
"$WFA" tool note --text 'first' </dev/null >/dev/null 2>&1
"$WFA" send workflow 'a note is kept' </dev/null >/dev/null 2>&1
echo done | "$WFA" result "$WFA_CALL_ID" >/dev/null 2>&1
"""


@pytest.fixture
def flows(tmp_path: Path) -> Path:
    script = tmp_path / "agent.sh"
    script.write_text(AGENT)
    script.chmod(0o755)
    path = tmp_path / "flows.py"
    path.write_text(FLOWS.replace("{script}", str(script)))
    return path


def _index(lines: list[str], *words: str) -> int:
    return next(n for n, line in enumerate(lines) if all(word in line for word in words))


def test_plain_lines_a_turn_its_tool_call_its_message_and_a_log_line_in_order(tmp_path, flows):
    done = subprocess.run(
        [*AWF, "run", str(flows), "--workflow", "chatty"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    started = _index(lines, "turn started", "agent=a", "turn=1")
    tool = _index(lines, "tool called", "agent=a", "tool=note", "outcome=result")
    message = _index(lines, "message sent", "sender=a", "to=workflow", "kind=message")
    ended = _index(lines, "turn ended", "agent=a", "outcome=answered")
    logged = _index(lines, "noted", "by=a")
    assert _index(lines, "run started") < started < tool < message < ended < logged  # the record's order
    assert sum("turn started" in line for line in lines) == 1  # from the record alone, not twice


def test_a_continued_run_lines_only_its_own_attempt(tmp_path, flows):
    (tmp_path / "broken").touch()
    first = subprocess.run([*AWF, "run", str(flows), "--workflow", "twice"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert first.returncode == 3, first.stderr
    (tmp_path / "broken").unlink()
    again = subprocess.run([*AWF, "continue", str(flows), "--workflow", "twice"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert again.returncode == 0, again.stderr
    lines = again.stderr.splitlines()
    assert not any("agent=planner" in line for line in lines), again.stderr  # its stage is reused: it never ran
    assert sum("turn started" in line for line in lines) == 1, again.stderr  # the builder's turn of attempt 2
    assert sum("turn ended" in line and "outcome=answered" in line for line in lines) == 1, again.stderr


def _tmux(socket: str, *args: str) -> str:
    return subprocess.run(["tmux", "-S", socket, *args], check=True, capture_output=True, text=True, timeout=10).stdout


def _screen_until(socket: str, *patterns: str) -> str:
    """The pane's screen once it shows every pattern at once: the view draws a turn's start (its
    call.json) before a log line written earlier reaches the record's batched logs."""
    deadline = time.monotonic() + WAIT_SECONDS
    screen = ""
    while time.monotonic() < deadline:
        screen = _tmux(socket, "capture-pane", "-p", "-t", "view")
        if all(re.search(pattern, screen) for pattern in patterns):
            return screen
        time.sleep(0.1)
    raise AssertionError(f"the screen never showed {patterns!r}:\n{screen}")


@pytest.mark.needs("tmux")
def test_the_live_view_in_a_real_terminal(tmp_path, flows):
    socket = str(tmp_path / "tmux")  # the server's socket in the test's own directory, gone with it
    # Without pytest's COLUMNS (the tmux server inherits it), as a terminal of its own size.
    command = f"cd {tmp_path} && env -u COLUMNS -u LINES {sys.executable} -m agentswf run {flows} --workflow busy --timeout 2h --budget 10turns; sleep 60"
    _tmux(socket, "new-session", "-d", "-s", "view", "-x", "150", "-y", "30", command)
    try:
        screen = _screen_until(socket, r"review:sleeper\s+in turn", "the quick one is done", "budget: 1/10 turns")
        lines = screen.splitlines()
        group = _index(lines, "review (2)")
        assert "1 in turn" in lines[group]
        quick = _index(lines, "  review:quick")
        sleeper = _index(lines, "  review:sleeper")
        assert group < quick < sleeper  # folded under their group
        assert "idle" in lines[quick] and "turn 1 ended answered" in lines[quick]
        assert re.search(r"in turn\s+1\s+\d+s / (59m5\ds|1h00m)", lines[sleeper]), lines[sleeper]
        assert "the quick one is done reviewer=quick" in screen  # the last log lines
        assert re.search(r"1 in turn · 0 tokens", screen)
        assert "budget: 1/10 turns" in screen  # the quick one's ended turn, of --budget's 10
        assert "turn started" not in screen  # the view, not the plain lines
        stopped = subprocess.run([*AWF, "stop", "--reason", "seen"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert stopped.returncode == 0, stopped.stderr
        screen = _screen_until(socket, r"awf: busy stopped")
        assert "run stopped: stopped by operator: seen" in screen  # the view's last draw
        assert re.search(r"review:sleeper\s+idle", screen)
    finally:
        subprocess.run(["tmux", "-S", socket, "kill-server"], check=False, capture_output=True, timeout=10)


@pytest.mark.needs("tmux")
def test_the_live_view_of_a_continued_run_counts_its_earlier_attempts_toward_the_budget(tmp_path, flows):
    (tmp_path / "broken").touch()
    first = subprocess.run(
        [*AWF, "run", str(flows), "--workflow", "twice", "--budget", "10turns"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert first.returncode == 3, first.stderr  # the planner's turn and the builder's: 2 of 10
    (tmp_path / "broken").unlink()
    socket = str(tmp_path / "tmux")
    command = f"cd {tmp_path} && env -u COLUMNS -u LINES {sys.executable} -m agentswf continue {flows} --workflow twice; sleep 60"
    _tmux(socket, "new-session", "-d", "-s", "view", "-x", "150", "-y", "30", command)
    try:
        screen = _screen_until(socket, r"awf: twice completed")
        assert "budget: 3/10 turns" in screen, screen  # attempt 1's two, and this attempt's builder
    finally:
        subprocess.run(["tmux", "-S", socket, "kill-server"], check=False, capture_output=True, timeout=10)


def test_render_counts_what_earlier_attempts_spent_toward_the_budget():
    tally = Tally()
    tally.add(Event(100.0, "turn-ended", "a", "turn 1 ended answered", {"n": 1, "usage": {"input_tokens": 7, "cost_usd": 0.5}}))
    carried = Spent(turns=2, tokens=100, cost_usd=0.25, seconds=60.0)
    console = Console(width=120, record=True)
    console.print(render(tally, {}, "run x", 160.0, Budget(turns=10, tokens=1000, cost_usd=2.0, wall="1h"), 30.0, carried))
    assert "budget: 3/10 turns · 107/1000 tokens · $0.7500/$2.0000 · 1m30s/1h00m" in console.export_text()


def test_render_folds_a_key_group_and_leaves_a_lone_agent_unfolded():
    tally = Tally()
    for key in ("review:a", "review:b", "fixer"):
        tally.add(Event(100.0, "turn-started", key, "turn 1 started", {"n": 1, "deadline_at": 700_000}))
    tally.add(Event(101.0, "turn-ended", "review:a", "turn 1 ended answered", {"n": 1, "usage": {"input_tokens": 7, "cost_usd": 0.5}}))
    status = {"agents": [{"key": "fixer", "awaits": "review:b", "owes": []}], "pending": [{"call_id": "c1"}]}
    console = Console(width=120, record=True)
    console.print(render(tally, status, "run x", 160.0, Budget(turns=10, cost_usd=2.0, wall="1h"), 90.0))
    text = console.export_text()
    lines = text.splitlines()
    assert any(line.startswith("review (2)") and "1 in turn" in line and "$0.5000" in line for line in lines)
    assert any(line.startswith("  review:b") for line in lines) and any(line.startswith("fixer ") for line in lines)
    assert "awaits review:b's reply" in text and "1m00s / 10m00s" in text
    assert "2 in turn · 7 tokens · $0.5000 · 1 waiting for approval" in text
    assert "budget: 1/10 turns · $0.5000/$2.0000 · 1m30s/1h00m" in text


HOSTILE = "[bold red]loud[/bold red] [link=https://evil.example]click[/link] \x1b]52;c;aGk=\x07"


def test_render_shows_an_agents_markup_and_escapes_as_text_it_wrote():
    tally = Tally()
    tally.add(Event(100.0, "turn-started", "a", "turn 1 started", {"n": 1}))
    tally.add(Event(101.0, "tool", "a", f"tool note {HOSTILE} -> result"))
    tally.add(Event(102.0, "log", "", f"noted {HOSTILE}"), keep_logs=5)
    tally.add(Event(103.0, "run-ended", "", f"run stopped: {HOSTILE}"))
    console = Console(width=400, record=True, force_terminal=True, color_system="truecolor")
    console.print(render(tally, {}, "run [bold]x[/bold]", 110.0))
    styled = console.export_text(styles=True, clear=False)
    text = console.export_text()
    shown_hostile = "[bold red]loud[/bold red] [link=https://evil.example]click[/link] \\x1b]52;c;aGk="
    assert text.count(shown_hostile) == 3, text  # the tool call, the log line, the ending: as written
    assert "run [bold]x[/bold]" in text
    assert "evil.example\x1b" not in styled and "\x1b]8;" not in styled  # no link opened
    assert "\x1b]52" not in styled  # the clipboard escape shown, not sent
    assert "\x1b[1;31mloud" not in styled  # no red bold drawn from the agent's markup


def test_render_shows_a_tool_call_waiting_for_approval_in_its_agents_doing():
    tally = Tally()
    tally.add(Event(100.0, "turn-started", "deployer", "turn 1 started", {"n": 1}))
    status = {"agents": [{"key": "deployer", "awaits": None, "owes": []}],
              "pending": [{"call_id": "c1", "tool": "deploy", "agent": "deployer"}]}  # fmt: skip
    console = Console(width=160, record=True)
    console.print(render(tally, status, "run x", 110.0))
    assert "tool deploy waits for approval (awf pending)" in console.export_text()
