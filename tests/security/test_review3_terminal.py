"""What an agent wrote reaches a person's terminal through more commands than `awf logs` and
`awf tail` (review 3): `awf pending` (a tool call's input, read before approving it), `awf
status` (each agent's last message or call), `awf inbox`, and `awf ls` (a run's workflow name,
from a record an agent can write). Each is a real `awf` subprocess beside a live `awf run`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

AWF = [sys.executable, "-m", "agentswf"]
LIVE_WAIT_SECONDS = 30.0
# OSC 52 (sets the clipboard), a right-to-left override (reorders what is read), and CSI as one
# C1 character (0x9b: an escape sequence's start in terminals that take 8-bit controls).
CONTROLS = ("\x1b", "\u202e", "\x9b")

FLOW = r'''
from agentswf import tool, workflow

def deploy(target: str) -> str:
    return "deployed " + target

@workflow(name="shown", description="An agent writes escape sequences where a person reads.")
async def shown(wf):
    a = await wf.agents.open("a", runtime={runtime!r},
                             tools={{"deploy": tool(deploy, description="Deploy.", requires_approval=True)}})
    you = await wf.participants.open("you")
    await wf.route(a, you, purpose="Tell the person")
    await a.run("Deploy.", timeout="1h")
'''
AGENT = r"""#!/bin/sh
"$WFA" send you "$(printf 'all good\033]52;c;cm0gLXJmIH4K\007 \342\200\256gnp.exe \302\233')" >/dev/null 2>&1
"$WFA" tool deploy --target "$(printf 'staging\342\200\256 \302\2332J\033[2K')" >/dev/null 2>&1
sleep 1000
"""


def awf(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*AWF, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture
def live(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A live `awf run` whose agent sent the person a message and waits for its call's approval."""
    agent = tmp_path / "agent.sh"
    agent.write_text(AGENT)
    agent.chmod(0o755)
    (tmp_path / "flow.py").write_text(FLOW.format(runtime=f"shell:{agent}"))
    run = subprocess.Popen([*AWF, "run", "flow.py", "--plain"], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + LIVE_WAIT_SECONDS
        while "staging" not in awf(tmp_path, "pending").stdout:
            assert time.monotonic() < deadline and run.poll() is None, "the call never waited for approval"
            time.sleep(0.1)
        yield tmp_path
    finally:
        run.terminate()
        try:
            run.wait(timeout=30)
        except subprocess.TimeoutExpired:
            run.kill()
            run.wait()


def _raw(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [char for char in CONTROLS if char in done.stdout + done.stderr]



def test_awf_pending_shows_a_calls_input_not_obeys_it(live: Path) -> None:
    done = awf(live, "pending")
    assert "staging" in done.stdout and _raw(done) == [], done.stdout



def test_awf_status_shows_an_agents_last_message_not_obeys_it(live: Path) -> None:
    done = awf(live, "status")
    assert "last: message to you" in done.stdout and _raw(done) == [], done.stdout


def test_awf_inbox_shows_a_message_not_obeys_it(live: Path) -> None:
    done = awf(live, "inbox", "--as", "you")
    assert "all good" in done.stdout and _raw(done) == [], done.stdout



def test_awf_ls_shows_a_forged_workflow_name_not_obeys_it(tmp_path: Path) -> None:
    (tmp_path / "flow.py").write_text(
        "from agentswf import workflow\n\n"
        "@workflow(name='plain', description='Nothing.')\n"
        "async def plain(wf):\n"
        "    return 1\n"
    )
    assert awf(tmp_path, "run", "flow.py", "--plain").returncode == 0
    [run_json] = (tmp_path / ".awf" / "runs").glob("*/*/run.json")
    record = json.loads(run_json.read_text())
    record["workflow"] = "plain\x1b]52;c;cm0gLXJmIH4K\x07\u202e"  # written over by an agent in the run's directory
    run_json.write_text(json.dumps(record))
    done = awf(tmp_path, "ls")
    assert done.returncode == 0 and "plain" in done.stdout and _raw(done) == [], done.stdout



def test_awf_runs_live_view_shows_an_agents_message_not_obeys_it_nor_reads_it_as_markup() -> None:
    """The live view (`awf run` in a terminal) draws each agent's last message or call with rich:
    a cell given as text is markup there, so `[/]` stops the view (MarkupError) and `[link=…]`
    makes a hyperlink the person didn't see written; an escape sequence goes through as it is."""
    import io

    from rich.console import Console

    from agentswf.cli.follow import Event, Tally
    from agentswf.cli.live import render

    hostile = "all good [/] [link=https://evil.example]the docs[/link] \x1b]52;c;cm0gLXJmIH4K\x07 \u202egnp.exe \x9b2J"
    tally = Tally()
    tally.add(Event(100.0, "turn-started", "a", "turn 1 started", {"n": 1}))
    tally.add(Event(101.0, "message", "a", f"message to you: {hostile}", {}))
    tally.add(Event(102.0, "log", "a", f"the agent said {hostile}", {}), keep_logs=5)
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=400)
    console.print(render(tally, {}, "run x", 160.0))
    drawn = screen.getvalue()
    assert "[/]" in drawn and "[link=https://evil.example]" in drawn  # shown as written
    assert "\x1b]8;" not in drawn  # no hyperlink made of it
    assert "\x1b]52" not in drawn and "\u202e" not in drawn and "\x9b" not in drawn



def test_awf_runs_closing_line_shows_a_failed_agents_stderr_not_obeys_it(tmp_path: Path) -> None:
    """A workflow that reads a failed turn's value fails with the turn's reason, which quotes the
    tail of the agent's command's standard error: what the agent wrote there."""
    agent = tmp_path / "agent.sh"
    agent.write_text("#!/bin/sh\nprintf 'boom\\033]52;c;cm0gLXJmIH4K\\007 \\342\\200\\256gnp\\n' >&2\nexit 2\n")
    agent.chmod(0o755)
    (tmp_path / "flow.py").write_text(
        "from agentswf import workflow\n\n"
        "@workflow(name='fails', description='An agent whose command fails.')\n"
        "async def fails(wf):\n"
        f"    a = await wf.agents.open('a', runtime='shell:{agent}')\n"
        "    return (await a.run('Go.', timeout=10)).value\n"
    )
    done = awf(tmp_path, "run", "flow.py", "--plain")
    assert done.returncode == 1 and "boom" in done.stderr, done.stderr
    assert _raw(done) == [], done.stderr
