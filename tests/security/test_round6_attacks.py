"""Round 6: what an agent can put in front of a person, and what a person's `awf` reads back.

An agent that isn't sandboxed runs as the person and can write any run's record under the run
root (docs/guide/security.md): `awf ls`, `awf tail`, `awf logs`, `awf status` and `awf run`'s own
views read it, as they read what the run's operator socket (which run.json names) answers. So:

- `awf ls` printed a run's outcome (output.json's) as the record had it: an escape sequence there
  set the clipboard (OSC 52), cleared the screen or started a line that read as awf's;
- a line of the record of the wrong shape (an outcome that is a string, a usage whose cost is a
  word, a time that isn't one, a `wf.log` field named `event`) raised in the watcher reading it:
  `awf run`'s view died for the rest of the run (an agent then worked unseen), and `awf ls`,
  `awf tail` and `awf logs` printed a traceback in place of the runs;
- a record file read whole (a `turns.jsonl` made sparse and 8 GiB with `truncate`) was read into
  memory by each of them, the live view of the run itself included;
- a forged operator socket's status of the wrong shape raised in `awf status` and the live view;
- text an agent fills (a `wf.log` field carrying its answer, a model name its CLI reports, a
  failed turn's reason) was printed whole, a line of megabytes, by `awf logs` and `awf run`.

Each test runs real shell agents and real `awf` processes, as a person would.
"""

from __future__ import annotations

import io
import json
import os
import resource
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

import agentswf
from agentswf import tool, workflow
from agentswf.testing.models import ScriptedModel

from ..cli.here import Said, awf_here
from ..clis import forging, needs_clis, real_runtimes
from ..harnesses.kit import run_wf, shell_agent

AWF = [sys.executable, "-m", "agentswf"]
RLO = "\u202e"
CONTROLS = ("\x1b", "\x07", "\x9b", RLO)
HOSTILE = "\x1b[2J\x1b]52;c;cm0gLXJmIH4K\x07done\nFORGED 09:30:12 awf: all runs completed" + RLO
MEMORY_BOUND_BYTES = 1536 << 20  # an `awf` command's address space here: far below the sparse file it is given
SPARSE_BYTES = 8 << 30  # a record file an agent grew with `truncate -s`: no disk used, and more than the bound above


def awf(cwd: Path, *args: str, memory: int | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """A person's `awf` command (run where the record is), its address space bounded to `memory` if given."""

    def bounded() -> None:
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run(
        [*AWF, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False, preexec_fn=bounded
    )


@pytest.fixture
def awf_read(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., Said]:
    """`awf ls`, `tail`, `logs` or `trace` of a finished run's record, in the test's process: what is
    attacked is what they read and print, and a raise fails the test as a traceback did. The
    sparse-file tests run each of them as a process, its address space bounded."""

    def read(cwd: Path, *args: str) -> Said:
        return awf_here(cwd, *args, monkeypatch=monkeypatch, capsys=capsys)

    return read


def forged_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.lstrip().startswith("FORGED")]


def obeyed(text: str) -> list[str]:
    """The characters of `text` a terminal would obey, not print."""
    return [char for char in CONTROLS if char in text]


# 1. awf ls ---------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # what is attacked is awf reading a record: once is enough
async def test_awf_ls_shows_the_outcome_an_agent_wrote_in_a_record_not_obeys_it(tmp_path: Path, anyio_backend: str, awf_read: Callable[..., Said]) -> None:
    """An agent rewrites an earlier run's output.json (its outcome a clipboard-setting escape and a
    forged line) and run.json (its start a word): `awf ls` prints the outcome as its escapes, on
    its own row, and the start it can't read as unknown."""

    async def first(wf: Any) -> str:
        return "ok"

    earlier = await run_wf(first, tmp_path, name="earlier")
    assert earlier.outcome == "completed", earlier.reason
    output = earlier.run_dir / "output.json"
    forge = tmp_path / "forge.py"
    forge.write_text(
        "import json, sys\n"
        "def forge(path, field, value):\n"
        "    record = json.load(open(path))\n"
        "    record[field] = value\n"
        "    open(path, 'w').write(json.dumps(record))\n"
        f"forge(sys.argv[1] + '/output.json', 'outcome', {HOSTILE!r})\n"
        "forge(sys.argv[1] + '/run.json', 'started_at', 'yesterday')\n"
    )
    body = f'{sys.executable} {forge} {earlier.run_dir}\necho done | "$WFA" result "$WFA_CALL_ID"'

    async def fn(wf: Any) -> None:
        a = await wf.agents.open("a", runtime=shell_agent(tmp_path, "a", body))
        await a.run("Work.")

    result = await run_wf(fn, tmp_path)
    assert result.outcome == "completed", result.reason
    assert "\x1b]52" in output.read_text() or "\\u001b]52" in output.read_text()
    listed = awf_read(tmp_path, "ls", "--run-root", "runs")
    assert listed.returncode == 0, listed.stderr
    assert earlier.run_dir.name in listed.stdout and "done\\nFORGED" in listed.stdout, listed.stdout
    assert obeyed(listed.stdout) == [] and forged_lines(listed.stdout) == [], listed.stdout


# 2. Lines of the wrong shape ----------------------------------------------------------------

# Lines an agent appends to its own run's record, each of a shape no line of the run's is: what
# a reader that takes the record's shapes for granted raises on.
WRONG_SHAPES = {
    "turns.jsonl": [
        {"agent": "a", "n": "one", "call_id": "c", "outcome": "answered", "started_at": 1.0, "ended_at": 2.0},
        {"agent": "a", "n": 1, "call_id": "c", "outcome": {"kind": "answered", "value": 1}, "started_at": 1.0,
         "ended_at": "later", "usage": {"input_tokens": "many", "cost_usd": "lots"}},
        {"agent": ["a"], "n": 1, "call_id": 7, "outcome": ["answered"], "started_at": None, "ended_at": None},
    ],
    "tools.jsonl": [{"agent": "a", "tool": ["x"], "input": 1, "outcome": {"r": 1}, "started_at": "now", "ended_at": []}],
    "approvals.jsonl": [{"agent": "a", "tool": "x", "call_id": "c", "decision": "yes", "at": "now"}],
    "messages.jsonl": [{"event": "sent", "mail": "hello"}, {"event": "sent", "mail": {"at": "now", "to": 1}},
                       {"event": "read", "at": "now", "by": 1}],
    "log.jsonl": [{"at": 3.0, "message": "forged", "fields": {"event": "x"}}, {"at": 4.0, "message": 1, "fields": [1]},
                  {"at": "now", "message": "m", "fields": {}}],
}  # fmt: skip
LATER_LINE = "the agent's later tool call"

FLOW = """
import io
import json
from collections.abc import Callable
from pathlib import Path
from agentswf import tool, workflow

HERE = Path(__file__).parent


@workflow(name="w", description="An agent that appends lines of the wrong shape to its record.")
async def w(wf):
    (HERE / "run_dir").write_text(str(wf.run_dir))
    wf.log("before the forgery")
    a = await wf.agents.open("a", runtime="shell:" + str(HERE / "a.sh"), tools={"label": tool(lambda: "labelled", description="Label.")})
    turn = await a.run("Work.", timeout=60)
    wf.log("after the forgery", said=turn.value)
    return turn.value
"""


def _appending_agent(tmp_path: Path, lines: dict[str, list[dict[str, Any]]]) -> None:
    """a.sh: appends `lines` to its run's record files, waits for the view to read them, calls a tool, answers."""
    forged = tmp_path / "forged"
    forged.mkdir()
    for name, records in lines.items():
        (forged / name).write_text("".join(json.dumps(record) + "\n" for record in records))
    appends = "\n".join(f'cat "$OUT/forged/{name}" >>"$RUN/{name}"' for name in lines)
    body = textwrap.dedent(
        """\
        RUN=$(cat "$OUT/run_dir")
        {appends}
        sleep 1
        "$WFA" tool label >/dev/null
        sleep 1
        echo "{later}" | "$WFA" result "$WFA_CALL_ID"
        """
    ).format(appends=appends, later=LATER_LINE)
    shell_agent(tmp_path, "a", body)


def test_lines_of_the_wrong_shape_an_agent_appends_to_its_record_blind_no_view(tmp_path: Path, awf_read: Callable[..., Said]) -> None:
    """`awf run`'s view goes on past the agent's lines (its tool call after them is shown, and the
    run's last wf.log line); `awf tail` and `awf ls` pass them over; `awf logs` and `awf trace` say
    in a line that they can't read the record (they printed a traceback)."""
    (tmp_path / "flow.py").write_text(FLOW)
    _appending_agent(tmp_path, WRONG_SHAPES)
    done = awf(tmp_path, "run", "flow.py", "--run-root", "runs", "--plain", timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert [line for line in done.stderr.split("\n") if "tool called" in line and "label" in line], done.stderr
    assert [line for line in done.stderr.split("\n") if "after the forgery" in line], done.stderr
    run_id = Path((tmp_path / "run_dir").read_text()).name
    listed = awf_read(tmp_path, "ls", "--run-root", "runs")
    assert listed.returncode == 0 and run_id in listed.stdout, listed.stdout + listed.stderr
    tail = awf_read(tmp_path, "tail", run_id, "--no-follow", "--run-root", "runs")
    assert tail.returncode == 0 and "Traceback" not in tail.stderr, tail.stderr
    assert "tool label" in tail.stdout and LATER_LINE in tail.stdout, tail.stdout
    for command in ("logs", "trace"):  # whole, or nothing: it says why in a line
        printed = awf_read(tmp_path, command, run_id, "--run-root", "runs")
        assert printed.returncode == 2 and printed.stdout == "", (command, printed.stdout)
        assert "record can't be read" in printed.stderr and printed.stderr.count("\n") == 1, (command, printed.stderr)


# 3. A record file of gigabytes ----------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # what is attacked is awf reading a record: once is enough
async def test_a_record_file_an_agent_made_sparse_and_huge_is_not_read_into_memory(tmp_path: Path, anyio_backend: str) -> None:
    """An agent grows its run's turns.jsonl and log.jsonl to 8 GiB with `truncate -s` (no disk
    used): `awf ls`, `awf tail`, `awf logs` and `awf continue` bounded to 1.5 GiB of address space
    say what they can and exit, none dies of memory."""
    body = (
        f'for name in turns log tools; do truncate -s {SPARSE_BYTES} "$(cat "$OUT/run_dir")/$name.jsonl"; done\n'
        'echo done | "$WFA" result "$WFA_CALL_ID"'
    )

    async def fn(wf: Any) -> None:
        (tmp_path / "run_dir").write_text(str(wf.run_dir))
        a = await wf.agents.open("a", runtime=shell_agent(tmp_path, "a", body))
        await a.run("Work.")
        raise RuntimeError("the run fails, so that awf continue goes on with it")

    result = await run_wf(fn, tmp_path, name="w")
    assert (result.run_dir / "turns.jsonl").stat().st_size >= SPARSE_BYTES
    run_id = result.run_dir.name
    (tmp_path / "flow.py").write_text(
        "from agentswf import workflow\n\n"
        "@workflow(name='w', description='Goes on.')\n"
        "async def w(wf):\n"
        "    return 'went on'\n"
    )
    for command in (("ls",), ("tail", run_id, "--no-follow"), ("logs", run_id), ("continue", "flow.py", run_id)):
        done = awf(tmp_path, *command, "--run-root", "runs", memory=MEMORY_BOUND_BYTES)
        assert "MemoryError" not in done.stderr and "Traceback" not in done.stderr, (command, done.stderr[-2000:])
        assert done.returncode in (0, 1, 2), (command, done.returncode, done.stderr[-2000:])


def test_a_replay_or_a_fork_at_a_turn_of_a_record_made_sparse_and_huge_is_refused_in_a_line(tmp_path: Path) -> None:
    """`awf replay` and `awf continue --from KEY:N` read the record through agentswf/replay/recorded.py,
    which measures a file before reading it (held before this round too)."""
    shell_agent(tmp_path, "a", 'echo done | "$WFA" result "$WFA_CALL_ID"')
    (tmp_path / "flow.py").write_text(
        "from pathlib import Path\n"
        "from agentswf import workflow\n\n"
        "HERE = Path(__file__).parent\n\n"
        "@workflow(name='w', description='Two turns.')\n"
        "async def w(wf):\n"
        "    a = await wf.agents.open('a', runtime='shell:' + str(HERE / 'a.sh'))\n"
        "    await a.run('Work.')\n"
        "    return (await a.run('More.')).value\n"
    )
    ran = awf(tmp_path, "run", "flow.py", "--run-root", "runs", "--plain")
    assert ran.returncode == 0, ran.stderr
    [run_dir] = (tmp_path / "runs" / "w").iterdir()
    os.truncate(run_dir / "turns.jsonl", SPARSE_BYTES)  # what the agent's `truncate -s` does
    for command in (("replay", run_dir.name, "flow.py"), ("continue", "flow.py", run_dir.name, "--from", "a:1")):
        done = awf(tmp_path, *command, "--run-root", "runs", memory=MEMORY_BOUND_BYTES)
        assert done.returncode == 2 and "Traceback" not in done.stderr, (command, done.stderr[-2000:])
        assert "is over" in done.stderr.split("\n")[-2], (command, done.stderr)


def test_the_live_view_of_awf_run_reads_no_sparse_file_an_agent_made_whole(tmp_path: Path) -> None:
    """The same in `awf run`'s own process: its view reads the run's record as it grows, and goes on
    showing it (the agent's tool call after the file was grown), bounded to 1.5 GiB."""
    (tmp_path / "flow.py").write_text(FLOW)
    body = textwrap.dedent(
        f"""\
        RUN=$(cat "$OUT/run_dir")
        truncate -s {SPARSE_BYTES} "$RUN/log.jsonl"
        sleep 1
        "$WFA" tool label >/dev/null
        sleep 1
        echo "{LATER_LINE}" | "$WFA" result "$WFA_CALL_ID"
        """
    )
    shell_agent(tmp_path, "a", body)
    done = awf(tmp_path, "run", "flow.py", "--run-root", "runs", "--plain", memory=MEMORY_BOUND_BYTES, timeout=120)
    assert "MemoryError" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 0, done.stderr[-3000:]
    assert [line for line in done.stderr.split("\n") if "tool called" in line and "label" in line], done.stderr[-3000:]


# 4. A forged operator socket's status ----------------------------------------------------------


def _answering(path: Path, value: Any, stop: threading.Event) -> threading.Thread:
    """A socket at `path` that answers every request with an ok status of `value`, until `stop`."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    server.settimeout(0.1)
    response = json.dumps({"ok": True, "message": "1 agent(s)", "value": value}).encode() + b"\n"

    def serve() -> None:
        with server:
            while not stop.is_set():
                try:
                    connection, _ = server.accept()
                except (TimeoutError, OSError):
                    continue
                with connection:
                    connection.settimeout(2)
                    try:
                        connection.recv(65536)
                        connection.sendall(response)
                    except OSError:
                        continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


WRONG_STATUSES = [
    {"agents": ["a"], "pending": [], "participants": []},
    {"agents": [{"key": "a", "in_turn": "yes", "tools": "label", "owes": [1], "awaits": ["b"]}], "pending": "x"},
    {"agents": [{"key": 1}], "pending": [{"agent": "a", "tool": 2}], "participants": [None]},
]


@pytest.mark.parametrize("status", WRONG_STATUSES, ids=["agents", "fields", "keys"])
def test_a_status_of_the_wrong_shape_from_a_socket_an_agent_put_in_the_runs_place_is_refused_in_a_line(
    tmp_path: Path, status: dict[str, Any]
) -> None:
    """An agent points run.json's `control` at a socket of its own (docs/guide/security.md) that
    answers `awf status` with values of other types than the run's: `awf status` says so in one
    line, and the live view of the run goes on drawing without them."""
    from rich.console import Console

    from agentswf.cli import live

    run_dir = tmp_path / ".awf" / "runs" / "w" / "20261201-000000-abcd"
    run_dir.mkdir(parents=True)
    control = tmp_path / "c.sock"
    (run_dir / "run.json").write_text(json.dumps({"version": 1, "workflow": "w", "control": str(control), "started_at": 1.0}))
    stop = threading.Event()
    server = _answering(control, status, stop)
    try:
        for args in (("status",), ("status", "--json")):
            done = awf(tmp_path, *args)
            assert "Traceback" not in done.stderr, (args, done.stderr)
            assert done.returncode == 1 and done.stderr.count("\n") == 1, (args, done.stderr)
        view = live.RunView("live", Console(file=io.StringIO(), force_terminal=True, width=120))
        errors: list[BaseException] = []
        threading.excepthook = lambda hook: errors.append(hook.exc_value)  # type: ignore[assignment,misc]
        try:
            view("20261201-000000-abcd", run_dir)
            threading.Event().wait(2 * live.STATUS_REFRESH_SECONDS)
            view.close()
        finally:
            threading.excepthook = threading.__excepthook__  # type: ignore[attr-defined]
        assert errors == []
    finally:
        stop.set()
        server.join(timeout=5)


# 5. Enormous text ---------------------------------------------------------------------------

ENORMOUS_CHARS = 1_000_000  # an answer of a MB on one line (wfa reads at most a MiB)
TOOL_INPUT_CHARS = 60_000  # a tool's input of 60 KB (at most 64 KiB), and its error quoting it
WIDEST_LINE_CHARS = 8192  # what awf prints on a line at most, here: a few screens' width, not a MiB


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # what is attacked is awf reading a record: once is enough
async def test_an_answer_of_a_mebibyte_a_workflow_logs_is_not_printed_whole(tmp_path: Path, anyio_backend: str, awf_read: Callable[..., Said]) -> None:
    """An agent answers with a MB on one line, and the workflow logs it (`wf.log("answered",
    said=turn.value)`, and as a message, `wf.log(turn.value)`), as workflows do with their agents'
    words: `awf logs`, `awf tail` and `awf run`'s lines cut each (`awf tail` printed the message whole)."""
    (tmp_path / "flow.py").write_text(
        "from pathlib import Path\n"
        "from agentswf import workflow\n\n"
        "HERE = Path(__file__).parent\n\n"
        "@workflow(name='w', description='Logs what its agent answered.')\n"
        "async def w(wf):\n"
        "    a = await wf.agents.open('a', runtime='shell:' + str(HERE / 'a.sh'))\n"
        "    turn = await a.run('Answer.', timeout=60)\n"
        "    wf.log('answered', said=turn.value)\n"
        "    wf.log(turn.value)\n"
        "    return len(turn.value)\n"
    )
    shell_agent(
        tmp_path, "a",
        f"{sys.executable} -c \"print('x' * {ENORMOUS_CHARS}, end='')\" >\"$OUT/answer\"\n"
        '"$WFA" result "$WFA_CALL_ID" <"$OUT/answer"',
    )  # fmt: skip
    done = awf(tmp_path, "run", "flow.py", "--run-root", "runs", "--plain", timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert max(len(line) for line in done.stderr.split("\n")) < WIDEST_LINE_CHARS, "a line of awf run's is a MiB"
    logs = awf_read(tmp_path, "logs", "--run-root", "runs")
    assert logs.returncode == 0, logs.stderr
    assert "answered" in logs.stdout
    assert max(len(line) for line in logs.stdout.split("\n")) < WIDEST_LINE_CHARS, "a line of awf logs is a MiB"
    [run_dir] = (tmp_path / "runs" / "w").iterdir()
    tail = awf_read(tmp_path, "tail", run_dir.name, "--no-follow", "--run-root", "runs")
    assert tail.returncode == 0 and "answered" in tail.stdout, tail.stderr
    assert max(len(line) for line in tail.stdout.split("\n")) < WIDEST_LINE_CHARS, "a line of awf tail is a MiB"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # what is attacked is awf reading a record: once is enough
async def test_a_failed_turns_reason_and_a_tools_error_of_60_kb_are_cut_in_awf_logs(tmp_path: Path, anyio_backend: str, awf_read: Callable[..., Said]) -> None:
    """A tool that raises with the 60 KB an agent gave it, and a shell agent that fails with them
    on one line of its standard error (its turn's reason quotes it): `awf logs` prints neither whole."""

    def echo(text: str) -> str:
        raise ValueError(text)

    body = (
        f"{sys.executable} -c \"import json; print(json.dumps({{'text': 'y' * {TOOL_INPUT_CHARS}}}))\" >\"$OUT/big\"\n"
        '"$WFA" tool echo <"$OUT/big" >/dev/null 2>&1\n'
        'cat "$OUT/big" >&2\nexit 3'
    )

    async def fn(wf: Any) -> str:
        a = await wf.agents.open(
            "a", runtime=shell_agent(tmp_path, "a", body), tools={"echo": tool(echo, description="Echo.")}
        )
        turn = await a.run("Work.", timeout=60)
        return turn.outcome.kind

    result = await run_wf(fn, tmp_path)
    assert result.outcome == "completed", result.reason
    logs = awf_read(tmp_path, "logs", result.run_dir.name, "--run-root", "runs")
    assert logs.returncode == 0, logs.stderr
    assert "yyyy" in logs.stdout
    assert max(len(line) for line in logs.stdout.split("\n")) < WIDEST_LINE_CHARS, "a line of awf logs is a MiB"


MODEL_CHARS = 100_000  # a model's name, as the forged line gives it


@needs_clis
@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # a real CLI: once is enough
async def test_a_model_name_an_agent_writes_into_its_clis_output_is_shown_cut(tmp_path: Path, anyio_backend: str, awf_read: Callable[..., Said]) -> None:
    """claude's agent writes an init line naming a model of 100 KB, escapes and forged lines in it,
    into claude's own output: the turn's spend names it (the record keeps what the CLI said), and
    `awf logs` prints it escaped and cut (it printed the 100 KB on one line)."""
    model_name = "claude-x" + ("\x1b]52;c;cm0gLXJmIH4K\x07\nFORGED awf: spent nothing " * (MODEL_CHARS // 50))

    script = forging(json.dumps({"type": "system", "subtype": "init", "model": model_name}), tmp_path)

    async with ScriptedModel(script) as model:
        claude = real_runtimes(model, tmp_path / "homes")["claude"]

        @workflow(name="forged-model", description="An agent forges its CLI's model.")
        async def flow(wf: Any) -> Any:
            agent = await wf.agents.open("claude", runtime=claude)
            turn = await agent.run("Say done.", timeout=60)
            return msgspec.to_builtins(turn)

        result = await agentswf.run(flow, run_root=tmp_path / "runs", cwd=tmp_path)
    assert result.outcome == "completed", result.reason
    assert (tmp_path / "forged").exists(), "the forged line was not written"
    logs = awf_read(tmp_path, "logs", result.run_dir.name, "--run-root", "runs")
    assert logs.returncode == 0, logs.stderr
    assert "on claude-x" in logs.stdout, logs.stdout[:3000]
    assert obeyed(logs.stdout) == [] and forged_lines(logs.stdout) == [], logs.stdout[:3000]
    assert max(len(line) for line in logs.stdout.split("\n")) < WIDEST_LINE_CHARS, "a line of awf logs is 100 KB"


NAME_CHARS = 1_000_000  # a name in a line of the record an agent wrote: of the right type, any length
LOG_FIELDS = 5_000  # the fields of a wf.log line an agent wrote


def test_a_line_an_agent_appends_with_a_name_of_a_megabyte_or_thousands_of_fields_is_cut(tmp_path: Path, awf_read: Callable[..., Said]) -> None:
    """Lines of the record's own shape, with a tool's name of a MB and a wf.log line of 5,000
    fields: `awf run`'s plain lines and `awf tail` cut each line (they printed it whole)."""
    (tmp_path / "flow.py").write_text(FLOW)
    fields = {f"f{n}": "v" * 100 for n in range(LOG_FIELDS)}
    tool_line = {"call_id": "c", "turn_call_id": "t", "agent": "a" * NAME_CHARS, "tool": "t" * NAME_CHARS, "input": {},
                 "outcome": "o" * NAME_CHARS, "started_at": 1.0, "ended_at": 2.0}  # fmt: skip
    _appending_agent(tmp_path, {"tools.jsonl": [tool_line], "log.jsonl": [{"at": 3.0, "message": "m", "fields": fields}]})
    done = awf(tmp_path, "run", "flow.py", "--run-root", "runs", "--plain", timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [line for line in done.stderr.split("\n") if "tool called" in line and "label" in line], done.stderr[-2000:]
    assert max(len(line) for line in done.stderr.split("\n")) < WIDEST_LINE_CHARS, "a line of awf run's is a MB"
    run_id = Path((tmp_path / "run_dir").read_text()).name
    tail = awf_read(tmp_path, "tail", run_id, "--no-follow", "--run-root", "runs")
    assert tail.returncode == 0 and LATER_LINE in tail.stdout, tail.stderr
    assert max(len(line) for line in tail.stdout.split("\n")) < WIDEST_LINE_CHARS, "a line of awf tail is a MB"
