"""Helpers for messaging tests that run real shell agents through `agentswf.run`.

A shell agent's script starts with PRELUDE, which gives it:

- `w NAME ARGS...`: run `"$WFA" ARGS...`, saving standard output, standard error and the exit
  status to `$OUT/NAME.out`, `$OUT/NAME.err` and `$OUT/NAME.rc` (read back with `Out`);
- `wait_for FILE`: wait (at most 10 s) until `$OUT/FILE` exists;
- `answer TEXT`: `wfa result` for this turn with the string TEXT;
- `$PROMPT`: the attempt's prompt, also saved as `$OUT/<agent>.prompt.<k>`, with the call id in
  `$OUT/<agent>.call.<k>`, where k counts the agent's attempts (in `$OUT/<agent>.count`).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

import agentswf
from agentswf import workflow
from agentswf.engine.record.layout import read_json, read_lines
from agentswf.harnesses.runtime import harness_for
from agentswf.harnesses.shell import ShellHarness

PRELUDE = r"""
w() { n=$1; shift; "$WFA" "$@" >"$OUT/$n.out" 2>"$OUT/$n.err"; echo $? >"$OUT/$n.rc"; }
wait_for() { i=0; while [ ! -e "$OUT/$1" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; }
answer() { printf '"%s"' "$1" | "$WFA" result "$WFA_CALL_ID" >>"$OUT/$WFA_AGENT.results" 2>&1; }
PROMPT=$(cat)
k=$(cat "$OUT/$WFA_AGENT.count" 2>/dev/null || echo 0); k=$((k+1)); echo $k >"$OUT/$WFA_AGENT.count"
printf '%s' "$PROMPT" >"$OUT/$WFA_AGENT.prompt.$k"
printf '%s' "$WFA_CALL_ID" >"$OUT/$WFA_AGENT.call.$k"
"""

QUIET_BODY = 'case "$PROMPT" in *"takes no result"*) exit 0 ;; esac\nanswer ok\n'
MESSAGE_TURN = "takes no result"  # in the prompt of a turn a message started
REMINDED = "You ended your turn without replying"
NO_ANSWER = "There is no answer to your question"


def agent(tmp_path: Path, name: str, body: str) -> str:
    """A shell agent running PRELUDE then `body` (sh), with $OUT the test's directory."""
    script = tmp_path / f"{name}.sh"
    script.write_text(f"#!/bin/sh\nOUT={shlex.quote(str(tmp_path))}\nexport OUT\n{PRELUDE}\n{body}\n")
    script.chmod(0o755)
    return f"shell:{script}"


@dataclass(frozen=True)
class Out:
    """What one `w NAME …` call saved."""

    rc: int
    out: str
    err: str


def out(tmp_path: Path, name: str) -> Out:
    path = tmp_path / f"{name}.rc"
    assert path.exists(), f"the agent never ran `w {name} …`"
    return Out(int(path.read_text().strip()), (tmp_path / f"{name}.out").read_text(), (tmp_path / f"{name}.err").read_text())


def refused(tmp_path: Path, name: str, command: str, code: str) -> Out:
    """Assert `w NAME` was refused `code` (exit 1) and return what it saved."""
    got = out(tmp_path, name)
    assert got.rc == 1, (name, got)
    assert f"wfa: {command} refused ({code}):" in got.err, (name, got)
    return got


def sent(tmp_path: Path, name: str) -> Out:
    got = out(tmp_path, name)
    assert got.rc == 0, (name, got)
    return got


def attempts(tmp_path: Path, key: str) -> int:
    path = tmp_path / f"{key}.count"
    return int(path.read_text()) if path.exists() else 0


def prompt(tmp_path: Path, key: str, k: int) -> str:
    return (tmp_path / f"{key}.prompt.{k}").read_text()


def call_id(tmp_path: Path, key: str, k: int) -> str:
    return (tmp_path / f"{key}.call.{k}").read_text()


async def wait_file(path: Path, seconds: float = 10.0) -> None:
    with anyio.fail_after(seconds):
        while not path.exists():
            await anyio.sleep(0.02)


SETTLE_SECONDS = 30.0  # for a message turn to end on a loaded machine


async def message_turn_ended(wf: Any, key: str, count: int = 1, seconds: float = SETTLE_SECONDS) -> None:
    """Wait until the run's record has `count` ended turns of `key` that a message started: the
    agent's process has exited by then, and all it saved is on disk (the workflow ending first
    would close the agent mid-turn)."""
    with anyio.fail_after(seconds):
        while sum(
            line.get("agent") == key and line.get("started_by") == "message" for line in read_lines(wf.run_dir / "turns.jsonl")
        ) < count:
            await anyio.sleep(0.02)


def with_harness(overrides: Mapping[str, type[ShellHarness]]) -> Callable[[str, Any], Any]:
    """A harness resolver: the agents named in `overrides` run on that ShellHarness subclass."""

    def resolve(key: str, runtime: Any) -> Any:
        base = harness_for(runtime)
        kind = overrides.get(key)
        return kind(command=base.command) if kind is not None else base

    return resolve


class NoAwaitShell(ShellHarness):
    """A shell harness that can't await a reply (as a cursor agent, or a codex TUI)."""

    can_await = False


class WaitingShell(ShellHarness):
    """A shell harness that offers `wfa waiting` (as a claude TUI does)."""

    supports_waiting = True


async def run_wf(
    fn: Callable[..., Awaitable[Any]], tmp_path: Path, *, name: str = "m", **kwargs: Any
) -> agentswf.RunResult:
    definition = workflow(name=name, description="A messaging test workflow.")(fn)
    kwargs.setdefault("timeout", "2m")
    result = await agentswf.run(definition, run_root=tmp_path / "runs", cwd=tmp_path, **kwargs)
    assert result.outcome == "completed", result.reason
    return result


def turns(result: agentswf.RunResult, key: str | None = None) -> list[dict[str, Any]]:
    lines = list(read_lines(result.run_dir / "turns.jsonl"))
    return [line for line in lines if key is None or line["agent"] == key]


def messages(result: agentswf.RunResult) -> list[dict[str, Any]]:
    return list(read_lines(result.run_dir / "messages.jsonl"))


def sent_mail(result: agentswf.RunResult) -> list[tuple[str, str, str, str]]:
    """(sender, to, kind, text) of every message sent in the run, in order."""
    return [
        (line["mail"]["sender"], line["mail"]["to"], line["mail"]["kind"], line["mail"]["text"])
        for line in messages(result)
        if line["event"] == "sent"
    ]


def call_record(result: agentswf.RunResult, call: str) -> dict[str, Any]:
    return read_json(result.run_dir / "calls" / call / "call.json")


def peers_json(text: str) -> dict[str, Any]:
    return json.loads(text)
