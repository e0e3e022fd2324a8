"""What an agent's processes say for a person (harnesses/said.py): a shell agent's standard output and
every attempt's standard error are kept, bounded, in the call's attempts.jsonl (a stopped attempt's
too); a turn that times out with its CLI still running says the CLI's last lines in its reason;
`awf status` shows an agent's latest line and how long ago; `awf logs` shows each attempt's last
lines and each turn's session. Every byte of it is the agent's: bounded, and printed escaped.

Real shell agents and real runs (a stand-in codex script for a CLI's JSON output, and the real codex
that can't reach its model where it is installed).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import msgspec

import agentswf
from agentswf import Runtime, workflow
from agentswf.cli.logs import print_run
from agentswf.engine.record.layout import read_lines
from agentswf.harnesses.said import LAST_LINES, LINE_CHARS, SAID_TAIL_BYTES, Said

from .kit import run_wf, shell_agent, turns

HOSTILE = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J\u202eevil\rforged"  # OSC 52, a screen clear, a bidi override, a CR
ON_ONE_LINE = HOSTILE.split("\r")[0]
WAIT_SECONDS = 30.0


def attempt_lines(result: agentswf.RunResult, call_id: str) -> list[dict]:
    return list(read_lines(result.run_dir / "calls" / call_id / "attempts.jsonl"))


def logs(result: agentswf.RunResult, said: int | None = 3) -> str:
    out = io.StringIO()
    print_run(result.run_dir, out, said)
    return out.getvalue()


async def test_a_shell_agents_output_and_error_are_recorded_and_awf_logs_shows_them(tmp_path):
    body = 'echo to-stdout; echo to-stderr >&2; "$WFA" result "$WFA_CALL_ID" done >/dev/null'

    async def work(wf):
        agent = await wf.agents.open("a", runtime=shell_agent(tmp_path, "a", body))
        return (await agent.run("Work.")).value

    result = await run_wf(work, tmp_path)
    assert result.value == "done", result.reason
    [turn] = turns(result)
    [line] = attempt_lines(result, turn["call_id"])
    assert line["ending"] == "exited"
    assert line["output"] == "to-stdout\n" and line["stderr"] == "to-stderr\n"
    shown = logs(result)
    assert "    standard output, its lines:\n      to-stdout\n" in shown, shown
    assert "    standard error, its lines:\n      to-stderr\n" in shown, shown


async def test_a_turn_that_times_out_says_its_clis_last_lines_and_records_its_stopped_attempt(tmp_path):
    body = 'echo starting; for n in 1 2 3 4 5 6 7; do echo "Reconnecting... $n/7 waiting for network" >&2; done; sleep 600'

    async def work(wf):
        agent = await wf.agents.open("reviewer", runtime=shell_agent(tmp_path, "r", body))
        turn = await agent.run("Review.", timeout="2s", nudge=False)
        return [turn.outcome.kind, turn.outcome.reason]

    result = await run_wf(work, tmp_path)
    kind, reason = result.value
    assert kind == "timed-out"
    expected = "\n".join(f"Reconnecting... {n}/7 waiting for network" for n in range(8 - LAST_LINES, 8))
    assert reason == f"the turn's deadline passed before an answer was accepted; the CLI's last lines:\n{expected}"
    [turn] = turns(result)
    assert turn["outcome"]["reason"] == reason  # turns.jsonl, and so `awf logs`, say it too
    [line] = attempt_lines(result, turn["call_id"])
    assert line["ending"] == "stopped" and line["output"] == "starting\n"
    assert line["stderr"].splitlines() == [f"Reconnecting... {n}/7 waiting for network" for n in range(1, 8)]
    shown = logs(result)
    assert "attempt was stopped as its turn ended" in shown
    assert "standard error, its last 3 of 7 lines (awf logs --output: all):" in shown, shown
    assert "      Reconnecting... 1/7 waiting for network\n" in logs(result, None)


async def test_what_an_agent_writes_is_kept_bounded_and_printed_escaped(tmp_path):
    flood = f"head -c {1 << 20} /dev/zero | tr '\\0' x >&2; echo >&2"  # 1 MiB on one line, then a new line
    hostile = HOSTILE.replace("\x1b", "\\033").replace("\x07", "\\007").replace("\r", "\\r")
    body = f"{flood}; printf '{hostile}\\n' >&2; printf 'out{hostile}\\n'; sleep 600"

    async def work(wf):
        agent = await wf.agents.open("a", runtime=shell_agent(tmp_path, "a", body))
        turn = await agent.run("Work.", timeout="3s", nudge=False)
        return turn.outcome.reason

    result = await run_wf(work, tmp_path)
    reason = result.value
    said = reason.split("the CLI's last lines:\n", 1)[1].split("\n")
    assert said[-1] == HOSTILE.replace("\r", "\n").split("\n")[-1]  # a carriage return ends a line
    assert 0 < len(said) <= LAST_LINES and all(len(line) <= LINE_CHARS for line in said)
    [turn] = turns(result)
    [line] = attempt_lines(result, turn["call_id"])
    assert len(line["stderr"].encode()) <= SAID_TAIL_BYTES and line["stderr"].endswith(HOSTILE + "\n")
    for shown in (logs(result), logs(result, None)):
        assert "\\x1b]52;c;" in shown and "\\u202eevil\n" in shown and "forged\n" in shown, shown[-2000:]
        assert not {"\x1b", "\x07", "\r", "\u202e"} & set(shown)
        assert all(not line or line.startswith(("run ", " ", "\n")) or line[:2].isdigit() for line in shown.split("\n"))


def test_said_keeps_each_streams_last_bytes_and_its_latest_line():
    said = Said()
    assert said.latest_line() is None and said.last_lines() == []
    said.heard_stdout(b"out 1\n")
    said.heard_stderr(b"x" * (2 * SAID_TAIL_BYTES) + b"\nerr 1\n\n  \n")
    assert len(said.stderr) == SAID_TAIL_BYTES and said.latest_line() == "err 1"
    said.heard_stdout(b"out 2\rout 3\n")
    assert said.latest_line() == "out 3"
    said.heard_stdout(b"\n\n")  # blanks say nothing: the latest line and its time stay
    assert said.latest == "stdout" and said.latest_line() == "out 3"
    said.note("Reconnecting...")
    assert said.last_lines(2) == ["err 1", "Reconnecting..."]
    assert said.last_lines(1)[0] == "Reconnecting..." and said.latest_line() == "Reconnecting..."


CODEX_STANDIN = """#!/bin/sh
case "$1" in --version) echo "codex-cli 0.171.0"; exit 0;; esac
cat >/dev/null
echo '{"type":"thread.started","thread_id":"thread-0001"}'
echo '{"type":"turn.started"}'
if [ -e "$OUT/hang" ]; then
  echo '{"type":"error","message":"Reconnecting... waiting for network (Connection failed)"}'
  echo "a warning of its own" >&2
  exec sleep 600
fi
"$WFA" result "$WFA_CALL_ID" fine >/dev/null
echo '{"type":"turn.completed","usage":{"input_tokens":3,"output_tokens":1}}'
"""


async def test_a_cli_agents_session_is_in_awf_logs_and_the_errors_its_json_reported_in_a_timed_out_reason(tmp_path):
    cli = tmp_path / "codex"
    cli.write_text(CODEX_STANDIN)
    cli.chmod(0o755)

    @workflow(name="cx", description="A stand-in codex: a turn answered, then one that can't reach its model.")
    async def flow(wf):
        agent = await wf.agents.open("reviewer", runtime=Runtime(harness="codex", command=(str(cli),), env={"OUT": str(tmp_path)}))
        first = await agent.run("One.", timeout="20s")
        (tmp_path / "hang").touch()
        second = await agent.run("Two.", timeout="3s", nudge=False)
        return [first.value, second.outcome.kind, second.outcome.reason]

    result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    answer, kind, reason = result.value
    assert (answer, kind) == ("fine", "timed-out")
    assert reason.endswith(
        "; the CLI's last lines:\nReconnecting... waiting for network (Connection failed)\na warning of its own"
    ) or reason.endswith("; the CLI's last lines:\na warning of its own\nReconnecting... waiting for network (Connection failed)")
    shown = logs(result)
    assert "  session: thread-0001\n  answer: fine\n" in shown, shown
    assert "Reconnecting... waiting for network" in shown


STATUS_FLOW = '''
from agentswf import workflow


@workflow(name="quiet", description="An agent that says one thing, then waits.")
async def quiet(wf):
    agent = await wf.agents.open("reviewer", runtime="shell:{script}")
    await agent.run("Review.", timeout="1h")
'''


def test_awf_status_shows_an_agent_in_a_turn_its_latest_line_escaped_and_how_long_ago(tmp_path):
    script = tmp_path / "quiet.sh"
    hostile = ON_ONE_LINE.replace("\x1b", "\\033").replace("\x07", "\\007")
    script.write_text(f"#!/bin/sh\necho earlier >&2\nprintf 'Reconnecting... {hostile}\\n' >&2\ntouch {tmp_path}/said\nexec sleep 600\n")
    script.chmod(0o755)
    flows = tmp_path / "quiet.py"
    flows.write_text(STATUS_FLOW.replace("{script}", str(script)))
    awf = [sys.executable, "-m", "agentswf"]
    run = subprocess.Popen([*awf, "run", str(flows), "--plain"], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while not (tmp_path / "said").exists():
            assert time.monotonic() < deadline and run.poll() is None, "the agent never ran"
            time.sleep(0.05)
        time.sleep(1.2)  # a second ago, at least

        def status(*args: str) -> str:
            done = subprocess.run([*awf, "status", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
            assert done.returncode == 0, done.stderr
            return done.stdout

        text = status()
        [line] = [line for line in text.splitlines() if "last output" in line]
        assert line.startswith("    last output, ") and " ago: Reconnecting... \\x1b]52;c;" in line, text
        assert line.endswith("\\x07\\x1b[2J\\u202eevil"), line
        assert not {"\x1b", "\x07", "\r", "\u202e"} & set(text)
        [agent] = json.loads(status("--json"))["agents"]
        assert agent["said"]["line"] == f"Reconnecting... {ON_ONE_LINE}"  # JSON's escapes: `shown_json`
        assert time.time() - 60 < agent["said"]["at"] <= time.time()
    finally:
        run.send_signal(2)
        run.wait(timeout=30)


def test_a_line_is_cut_for_status_and_reasons_and_kept_whole_in_the_record():
    said = Said()
    said.heard_stderr(b"y" * (LINE_CHARS * 2) + b"\n")
    [line] = said.last_lines()
    assert len(line) == LINE_CHARS and line.endswith("…")
    assert said.text("stderr") == "y" * (LINE_CHARS * 2) + "\n"


def test_once_recorded_an_attempts_output_is_let_go_but_its_latest_line_and_when():
    said = Said()
    said.heard_stderr(b"e" * SAID_TAIL_BYTES + b"\nwaiting\n")
    at = said.at
    said.let_go()
    assert said.latest_line() == "waiting" and said.at == at
    assert len(said.stderr) + len(said.stdout) == len("waiting")


FAKE_ACP_AGENT = Path(__file__).parents[1] / "acp" / "fake_agent.py"


class Verdict(msgspec.Struct):
    verdict: str


async def test_an_acp_agents_standard_error_is_recorded_beside_its_transcript(tmp_path):
    command = ("sh", "-c", f'echo "an adapter warns: no config found" >&2; exec {sys.executable} {FAKE_ACP_AGENT}')
    runtime = Runtime(harness="acp", command=command, env={"FAKE_ACP_HOME": str(tmp_path / "home")})

    @workflow(name="acp", description="One turn of the stand-in ACP agent, wrapped to warn first.")
    async def flow(wf):
        agent = await wf.agents.open("fake", runtime=runtime)
        return (await agent.run("SCENARIO answer. Review the change.", schema=Verdict, timeout="60s")).outcome.kind

    (tmp_path / "home").mkdir()
    result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.value == "answered", result.reason
    [turn] = turns(result)
    [line] = attempt_lines(result, turn["call_id"])
    assert line["stderr"] == "an adapter warns: no config found\n" and '"permission"' in line["output"]
    shown = logs(result)
    assert "    standard error, its lines:\n      an adapter warns: no config found\n" in shown, shown
    assert "standard output" not in shown  # a transcript isn't text to show
