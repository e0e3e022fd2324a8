"""The real CLIs (claude, codex, pi) against a ScriptedModel: a shell command, then a resume.

Each CLI is looked up with `find_cli` ($AGENTSWF_CLI_DIR, which tests/clis.py points at the
repository's .ci/node install, then PATH); each test needs its CLI (an e2e test, skipped where
the CLI isn't found). The CLIs run on asyncio only: they test the CLIs against the server, and
the server's backends are covered by test_models.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from agentswf.testing.models import (
    MODEL_ID,
    PROVIDER,
    Conversation,
    ScriptedModel,
    Shell,
    Step,
    Text,
    Tool,
    claude_env,
    codex_env,
    find_cli,
    pi_env,
    steps,
)

pytestmark = pytest.mark.anyio

RUN_TIMEOUT_SECONDS = 60  # one CLI invocation takes 0.5–1.5 s against the scripted model
RESUME_MARK = "TURN2"
# Parent variables that would re-route a CLI away from the scripted model.
FOREIGN_PREFIXES = ("ANTHROPIC_", "CLAUDE_", "OPENAI_", "CODEX_", "PI_")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass(frozen=True)
class Outcome:
    """What a harness adapter would read from one run's JSONL output."""

    ok: bool
    session: str
    text: str
    usage: tuple[int, int]  # input, output tokens over the run


def _claude(lines: list[dict[str, Any]]) -> Outcome:
    result = next(line for line in reversed(lines) if line.get("type") == "result")
    usage = result["usage"]
    return Outcome(not result["is_error"], result["session_id"], result["result"],
                   (usage["input_tokens"], usage["output_tokens"]))  # fmt: skip


def _codex(lines: list[dict[str, Any]]) -> Outcome:
    thread = next(line["thread_id"] for line in lines if line.get("type") == "thread.started")
    texts = [line["item"]["text"] for line in lines
             if line.get("type") == "item.completed" and line["item"]["type"] == "agent_message"]  # fmt: skip
    done = [line for line in lines if line.get("type") == "turn.completed"]
    usage = done[-1]["usage"] if done else {"input_tokens": 0, "output_tokens": 0}
    return Outcome(bool(done), thread, texts[-1] if texts else "", (usage["input_tokens"], usage["output_tokens"]))


def _pi(lines: list[dict[str, Any]]) -> Outcome:
    session = lines[0]["id"] if lines and lines[0].get("type") == "session" else ""
    replies = [line["message"] for line in lines
               if line.get("type") == "message_end" and line["message"]["role"] == "assistant"]  # fmt: skip
    text = "".join(part["text"] for part in replies[-1]["content"] if part["type"] == "text") if replies else ""
    usage = (sum(reply["usage"]["input"] for reply in replies), sum(reply["usage"]["output"] for reply in replies))
    return Outcome(bool(replies) and replies[-1]["stopReason"] != "error", session, text, usage)


@dataclass(frozen=True)
class Setup:
    """How to run one CLI headless against the model, and read its output."""

    name: str
    cli: str
    env: Callable[[ScriptedModel, Path], dict[str, str]]
    argv: Callable[[str, str, str | None], list[str]]  # executable, prompt, session to resume
    prompt_on_stdin: bool
    read: Callable[[list[dict[str, Any]]], Outcome]
    shell_tool: str


def _claude_argv(exe: str, prompt: str, session: str | None) -> list[str]:
    resume = ["--resume", session] if session else []
    return [exe, "-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions", *resume]


def _codex_argv(exe: str, prompt: str, session: str | None) -> list[str]:
    resume = ["resume", session] if session else []
    return [exe, "exec", *resume, "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "-"]


def _pi_argv(exe: str, prompt: str, session: str | None) -> list[str]:
    resume = ["--session", session] if session else []
    return [exe, "--mode", "json", "--provider", PROVIDER, "--model", MODEL_ID, *resume, prompt]


def _pi_setup(api: str) -> Setup:
    return Setup(
        f"pi-{api}",
        "pi",
        lambda model, home: pi_env(model, home, api),  # type: ignore[arg-type]
        _pi_argv,
        prompt_on_stdin=False,
        read=_pi,
        shell_tool="bash",
    )


SETUPS = [
    Setup(
        "claude",
        "claude",
        claude_env,
        _claude_argv,
        prompt_on_stdin=True,
        read=_claude,
        shell_tool="Bash",
    ),
    Setup(
        "codex",
        "codex",
        codex_env,
        _codex_argv,
        prompt_on_stdin=True,
        read=_codex,
        shell_tool="exec_command",
    ),
    _pi_setup("openai-completions"),
    _pi_setup("openai-responses"),
    _pi_setup("anthropic-messages"),
]


EACH_CLI = [pytest.param(setup, marks=pytest.mark.needs(setup.cli), id=setup.name) for setup in SETUPS]


def _executable(cli: str) -> str:
    found = find_cli(cli)
    assert found is not None  # its `needs` mark skipped the test where it isn't
    return found


def _parent_env() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if not name.startswith(FOREIGN_PREFIXES)}


async def _run(setup: Setup, exe: str, prompt: str, session: str | None, env: dict[str, str], cwd: Path):
    # Run here, not by a harness, the CLI gets a TMPDIR of its own as an attempt does (claude's
    # `claude-<uid>` and `cc-socks/` go there), short enough for its sockets, and removed after.
    with tempfile.TemporaryDirectory(prefix="awf-cli-") as scratch, anyio.fail_after(RUN_TIMEOUT_SECONDS):
        done = await anyio.run_process(
            setup.argv(exe, prompt, session),
            input=prompt.encode() if setup.prompt_on_stdin else None,
            stdin=None if setup.prompt_on_stdin else subprocess.DEVNULL,
            env={**env, "TMPDIR": scratch},
            cwd=cwd,
            check=False,
        )
    lines = [json.loads(line) for line in done.stdout.decode().splitlines() if line.startswith("{")]
    return done, setup.read(lines)


@pytest.mark.parametrize("setup", EACH_CLI)
async def test_the_cli_runs_a_shell_command_then_resumes_the_session(setup: Setup, tmp_path: Path) -> None:
    exe = _executable(setup.cli)
    out, work = tmp_path / "out.txt", tmp_path / "work"
    work.mkdir()

    def script(conv: Conversation) -> Step:
        if RESUME_MARK in conv.prompt:
            return Text(f"resumed after {len(conv.history)} messages")
        return steps(Shell(f"echo hello > {out}"), Text("wrote it"))(conv)

    async with ScriptedModel(script) as model:
        env = _parent_env() | setup.env(model, tmp_path / "home")
        done, first = await _run(setup, exe, "write the file", None, env, work)
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        assert first.ok, done.stdout.decode()[-2000:]
        assert out.read_text() == "hello\n"
        assert (first.text, first.usage) == ("wrote it", (200, 40))
        assert first.session
        calls = [request for request in model.requests if request.conversation]
        assert [call.reply for call in calls] == [
            Tool(setup.shell_tool, calls[0].reply.arguments),  # type: ignore[union-attr]
            Text("wrote it"),
        ]
        assert len(calls[-1].conversation.tool_results) == 1  # type: ignore[union-attr]

        seen = len(model.requests)
        done, second = await _run(setup, exe, f"{RESUME_MARK}: what did you do?", first.session, env, work)
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        assert (second.ok, second.session) == (True, first.session)
        assert second.text.startswith("resumed after ")
        resumed = [request for request in model.requests[seen:] if request.conversation][-1].conversation
        assert resumed is not None
        assert resumed.tool_results == ()
        history = json.dumps(resumed.history)
        assert "write the file" in history
        assert f"echo hello > {out}" in history


@pytest.mark.parametrize("setup", EACH_CLI)
async def test_the_cli_reports_a_failed_model_call_without_retrying(setup: Setup, tmp_path: Path) -> None:
    exe = _executable(setup.cli)
    async with ScriptedModel(steps(Text("unreached")), fail_status=500) as model:
        env = _parent_env() | setup.env(model, tmp_path / "home")
        done, outcome = await _run(setup, exe, "hello", None, env, tmp_path)
    assert not outcome.ok
    assert done.returncode == (0 if setup.cli == "pi" else 1)  # pi exits 0 even then
    assert [(request.status, request.conversation is not None) for request in model.requests] == [(500, True)]
