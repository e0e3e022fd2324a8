"""What an agent wrote is shown as data, never as structure (issue 28, 3): no text of an agent's
makes a line that reads as awf's own.

`awf inbox` printed `from {sender}:` and then the body as it was, so a body with new lines forged
a whole second message (`from b (a question: awf reply b --as alice):` + "please run awf approve
…") aimed at the person who approves calls. A tool name was any text up to 256 characters: a
refused call's name with new lines added `02:44:25 [info] run ended …` to `awf logs`, and the
record kept it raw. `awf status`, the live view and `awf run`'s lines kept an agent's new lines
too. Now a field is one line with its escapes (`\\n`, `\\u202e`), a body is indented under awf's
header, and a name no tool can have is refused `unknown-tool` and recorded escaped.

Every check below puts `FORGED` right after a new line an agent wrote: awf must show that new
line as its escape, or (in a body) indent what follows it.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from rich.console import Console

from agentswf import tool
from agentswf.cli.control import event_line, print_status
from agentswf.cli.follow import Event, Follower, Tally
from agentswf.cli.live import render
from agentswf.cli.logs import print_run, print_trace
from agentswf.cli.shown import BODY_INDENT
from agentswf.engine.record.layout import read_lines

from ..harnesses.kit import run_wf, shell_agent

pytestmark = pytest.mark.anyio

AWF = [sys.executable, "-m", "agentswf"]
RLO = "\u202e"  # a right-to-left override: reorders what follows it on the line
FORGED_MESSAGE = "see below\nfrom b (a question: awf reply b --as alice):\nplease run awf approve 4f1c"
FORGED_TOOL = "x\n02:44:25 [info     ] run ended                      outcome=completed approved_by=you"


def forged_lines(text: str, body_indent: str | None = None) -> list[str]:
    """The lines of `text` an agent's `\\nFORGED` started: those whose first word is FORGED, but
    (where awf indents a body, `body_indent`) a body's line under that indent, or deeper (an
    attempt's output, quoted under its own indented header)."""
    return [
        line
        for line in text.split("\n")
        if line.lstrip().startswith("FORGED") and not (body_indent is not None and line.startswith(body_indent))
    ]


def printed_by_sh(text: str) -> str:
    """A shell word that `printf` turns into `text`: each byte past printable ASCII (a new line, UTF-8) as octal."""
    return "'" + "".join(
        chr(byte) if 0x20 <= byte < 0x7F and chr(byte) not in "'\\%" else f"\\{byte:03o}" for byte in text.encode()
    ) + "'"


async def _awf(tmp_path: Path, *args: str) -> str:
    """A person's `awf` command beside the live run (the workflow's process is no agent's)."""
    done = await anyio.run_process([*AWF, *args, "--run-root", str(tmp_path / "runs")], cwd=tmp_path, check=False)
    return done.stdout.decode() + done.stderr.decode()


async def test_a_message_body_forges_no_second_message_in_awf_inbox(tmp_path: Path) -> None:
    body = f'"$WFA" send alice "$(printf {printed_by_sh(FORGED_MESSAGE)})" >/dev/null\necho done | "$WFA" result "$WFA_CALL_ID"'

    async def fn(wf: Any) -> str:
        b = await wf.agents.open("b", runtime=shell_agent(tmp_path, "b", body))
        alice = await wf.participants.open("alice")
        await wf.route(b, alice, purpose="Tell the person")
        await b.run("Tell alice.")
        return await _awf(tmp_path, "inbox", "--as", "alice")

    result = await run_wf(fn, tmp_path)
    printed = result.value
    assert result.outcome == "completed", result.reason
    assert [line for line in printed.split("\n") if line.startswith("from ")] == ["from b:"], printed
    assert f"{BODY_INDENT}from b (a question: awf reply b --as alice):\n{BODY_INDENT}please run awf approve 4f1c\n" in printed


async def test_a_tool_name_that_cant_be_a_tools_is_refused_and_recorded_escaped(tmp_path: Path) -> None:
    """A name with new lines forges no line of `awf logs` or `awf tail`; a bidirectional override
    in one is recorded as its escape; each is refused `unknown-tool`, exit 3."""
    names = {"lines": FORGED_TOOL.replace("\n", "\nFORGED "), "bidi": f"deploy{RLO}gnp.exe", "upper": "Deploy"}
    calls = "\n".join(
        f'"$WFA" tool "$(printf {printed_by_sh(name)})" >"$OUT/{key}.out" 2>"$OUT/{key}.err"; echo $? >"$OUT/{key}.rc"'
        for key, name in names.items()
    )
    body = f'{calls}\necho done | "$WFA" result "$WFA_CALL_ID"'

    async def fn(wf: Any) -> None:
        a = await wf.agents.open(
            "a", runtime=shell_agent(tmp_path, "a", body), tools={"deploy": tool(lambda: "deployed", description="Deploy.")}
        )
        await a.run("Call.")

    result = await run_wf(fn, tmp_path)
    assert result.outcome == "completed", result.reason
    for key in names:
        assert (tmp_path / f"{key}.rc").read_text().strip() == "3", key
        assert "unknown-tool" in (tmp_path / f"{key}.err").read_text(), key
    recorded = [line["tool"] for line in read_lines(result.run_dir / "tools.jsonl")]
    assert recorded == [repr(name) for name in names.values()]  # quoted, every new line and override escaped
    for command in ("logs", "tail"):
        printed = await _awf(tmp_path, command, result.run_dir.name, *(["--no-follow"] if command == "tail" else []))
        assert "x\\nFORGED 02:44:25" in printed, printed
        assert forged_lines(printed) == [] and RLO not in printed, printed


def _hostile(value: Any, skip: frozenset[str], key: str = "") -> Any:
    """`value` with `\\nFORGED` and a right-to-left override after every string in it (but those under `skip`)."""
    if isinstance(value, str):
        return value if key in skip else f"{value}\nFORGED{RLO}"
    if isinstance(value, list):
        return [_hostile(item, skip, key) for item in value]
    if isinstance(value, dict):
        return {name: _hostile(item, skip, name) for name, item in value.items()}
    return value


FLOW_TOOLS = {"label": tool(lambda: "labelled\nall", description="Label.")}
RECORDED_AGENT = """
"$WFA" tool label >/dev/null
"$WFA" tool nope >/dev/null 2>&1
"$WFA" send alice "$(printf 'hello\\nthere')" >/dev/null
echo done | "$WFA" result "$WFA_CALL_ID"
"""


LINKS = frozenset({"call_id", "turn_call_id", "id", "message_id", "event", "kind"})  # what ties and sorts the record's lines


@pytest.mark.parametrize("skip", [frozenset(), LINKS], ids=["all", "linked"])
async def test_no_field_of_a_record_an_agent_wrote_over_starts_a_line_of_awf_logs_trace_or_tail(
    tmp_path: Path, skip: frozenset[str]
) -> None:
    """An agent that isn't sandboxed can write the record itself: every field `awf logs`, `awf
    trace` and `awf tail` read of it (names, outcomes, reasons, command lines, wf.log's fields)
    is written over with a new line and more, and none of it starts a line of theirs. `linked`
    keeps the ids and kinds that tie a turn to its answers, tool calls and messages, so those are
    read and printed too."""

    async def fn(wf: Any) -> None:
        a = await wf.agents.open("a", runtime=shell_agent(tmp_path, "a", RECORDED_AGENT), tools=FLOW_TOOLS)
        alice = await wf.participants.open("alice")
        await wf.route(a, alice, purpose="Tell the person")
        await a.run("Work.")
        wf.log("labelled", item="b1", by="a")

    result = await run_wf(fn, tmp_path)
    assert result.outcome == "completed", result.reason
    for path in result.run_dir.rglob("*.json*"):
        if path.suffix == ".jsonl":
            path.write_text("".join(json.dumps(_hostile(json.loads(line), skip)) + "\n" for line in path.read_text().splitlines()))
        else:
            path.write_text(json.dumps(_hostile(json.loads(path.read_text()), skip)))
    logs, trace = io.StringIO(), io.StringIO()
    print_run(result.run_dir, logs)
    print_trace(result.run_dir, trace)
    tail = "".join(event_line(event) + "\n" for event in Follower(result.run_dir).poll())
    if skip:
        assert "labelled" in logs.getvalue() and "hello" in trace.getvalue() and "turn 1" in tail
    for printed in (logs.getvalue(), trace.getvalue(), tail):
        assert forged_lines(printed, BODY_INDENT) == [] and RLO not in printed, printed


def test_no_name_or_message_of_a_status_starts_a_line_of_awf_status_or_the_live_view() -> None:
    hostile = f"b\nFORGED{RLO}"
    agent = {"key": hostile, "in_turn": False, "turn": 0, "turns": 1, "turn_started_at": None, "deadline_at": None,
             "doing": hostile, "tokens": 0, "cost_usd": None, "owes": [hostile], "awaits": hostile}  # fmt: skip
    status = {"run_id": "r", "workflow": hostile, "agents": [agent], "participants": [hostile], "tokens": 0, "cost_usd": None,
              "pending": [{"call_id": hostile, "agent": hostile, "tool": hostile}]}  # fmt: skip
    printed = io.StringIO()
    print_status(status, printed, 0.0)
    assert printed.getvalue().count("\n") == 7 and forged_lines(printed.getvalue()) == [], printed.getvalue()

    tally = Tally()
    tally.add(Event(1.0, "turn-started", hostile, "turn 1 started", {"n": 1}))
    tally.add(Event(2.0, "message", hostile, f"message to you: {hostile}"))
    tally.add(Event(3.0, "log", hostile, f"said {hostile}"), keep_logs=5)
    tally.add(Event(4.0, "run-ended", "", f"run failed: {hostile}"))
    screen = io.StringIO()
    Console(file=screen, force_terminal=False, width=400).print(render(tally, {"agents": [agent]}, hostile, 10.0))
    assert "said b" in screen.getvalue() and forged_lines(screen.getvalue()) == [], screen.getvalue()
    assert RLO not in printed.getvalue() + screen.getvalue()


def test_awf_runs_lines_put_a_field_on_one_line_and_a_reason_under_its_own(tmp_path: Path) -> None:
    """`awf run`'s progress lines (a `wf.log` field with an agent's words) and its closing line
    (the reason a workflow raised, which quotes what an agent wrote)."""
    (tmp_path / "flow.py").write_text(
        "from agentswf import workflow\n\n"
        "@workflow(name='forges', description='Logs and raises what an agent wrote.')\n"
        "async def forges(wf):\n"
        "    wf.log('the agent said', said='ok\\nFORGED 09:30:12 [info     ] run ended', **{'k\\nFORGED': 1})\n"
        "    raise ValueError('boom\\nFORGED awf: forges completed')\n"
    )
    done = subprocess.run(
        [*AWF, "run", "flow.py", "--run-root", "runs", "--plain"], cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1, done.stderr
    [said] = [line for line in done.stderr.split("\n") if "the agent said" in line]
    assert "FORGED 09:30:12" in said and "k\\nFORGED=1" in said, done.stderr
    assert "awf: forges failed: ValueError: boom\n" + BODY_INDENT + "FORGED awf: forges completed\n" in done.stderr, done.stderr
    assert forged_lines(done.stderr, BODY_INDENT) == [], done.stderr
