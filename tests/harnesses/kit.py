"""Helpers for tests that run real shell agents through `agentswf.run`."""

from __future__ import annotations

import os
import shlex
import sys
import textwrap
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import msgspec

import agentswf
from agentswf import tool, workflow
from agentswf.engine.record.layout import read_json, read_lines


class N(msgspec.Struct, forbid_unknown_fields=True):
    n: int


def shell_agent(tmp_path: Path, name: str, body: str) -> str:
    """A shell agent running `body` (sh), with $OUT the test's directory; its runtime alias."""
    script = tmp_path / f"{name}.sh"
    script.write_text(f"#!/bin/sh\nOUT={shlex.quote(str(tmp_path))}\nexport OUT\n{body}\n")
    script.chmod(0o755)
    return f"shell:{script}"


def text(tmp_path: Path, name: str) -> str:
    return (tmp_path / name).read_text()


def lines(tmp_path: Path, name: str) -> list[str]:
    path = tmp_path / name
    return path.read_text().split() if path.exists() else []


def rc(tmp_path: Path, name: str) -> int:
    return int(text(tmp_path, name).strip())


async def run_wf(
    fn: Callable[..., Awaitable[Any]], tmp_path: Path, *, name: str = "t", **kwargs: Any
) -> agentswf.RunResult:
    definition = workflow(name=name, description="A test workflow.")(fn)
    return await agentswf.run(definition, run_root=tmp_path / "runs", cwd=tmp_path, **kwargs)


def turns(result: agentswf.RunResult) -> list[dict[str, Any]]:
    return list(read_lines(result.run_dir / "turns.jsonl"))


def candidates(result: agentswf.RunResult, call_id: str) -> list[dict[str, Any]]:
    return list(read_lines(result.run_dir / "calls" / call_id / "candidates.jsonl"))


def output(result: agentswf.RunResult) -> dict[str, Any]:
    return read_json(result.run_dir / "output.json")


# Processes and temp directories ----------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return data[data.rindex(")") + 2 :].split()  # state, ppid, pgrp, ...


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie waiting for a reaper is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    """The live processes of process group `pgid`."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None and int(stat[2]) == pgid and stat[0] not in ("Z", "X"):
                members.append(int(entry))
    return members


WAIT_FOR = 'wait_for() { i=0; while [ ! -e "$OUT/$1" ] && [ $i -lt 400 ]; do sleep 0.025; i=$((i+1)); done; }\n'
"""A shell function: `wait_for NAME` waits (at most 10 s) for $OUT/NAME to exist."""

Person = Callable[[Any, str, str], Awaitable[Any]]  # (wf, control socket, pending call id) -> what it saw


async def operator_attack(
    tmp_path: Path, attack: str, out: str, person: Person | None = None
) -> tuple[agentswf.RunResult, list[str]]:
    """Agent a, with an approval-gated `deploy` call pending, runs the Python `attack`
    with the operator socket and the call id, its stdout to $OUT/`out`. After the attack
    (and `person`, if given, in the workflow), the call is rejected if still pending.
    Returns the run, whose value is (whether the call was still pending, what `person`
    gave), and the deploys that ran; the attack's script is $tmp_path/attack.py."""
    deploys: list[str] = []
    script = tmp_path / "attack.py"
    script.write_text(attack)
    body = WAIT_FOR + textwrap.dedent(
        f"""\
        "$WFA" tool deploy >"$OUT/deploy.out" 2>&1 &
        wait_for pending
        {sys.executable} {script} "$(cat "$OUT/control")" "$(cat "$OUT/pending")" >"$OUT/{out}" 2>"$OUT/op.err"
        touch "$OUT/op.done"
        wait
        "$WFA" result "$WFA_CALL_ID" --n 1
        """
    )

    async def fn(wf: Any) -> Any:
        a = await wf.agents.open(
            "a",
            runtime=shell_agent(tmp_path, "a", body),
            tools={"deploy": tool(lambda: deploys.append("deployed"), description="Deploy.", requires_approval=True)},
        )
        control = read_json(wf.run_dir / "run.json")["control"]
        (tmp_path / "control").write_text(control)
        async with anyio.create_task_group() as group:
            group.start_soon(partial(a.run, "Deploy.", schema=N, timeout=30))
            with anyio.fail_after(15):
                while not (pending := await wf.approvals.pending()):
                    await anyio.sleep(0.02)
            (tmp_path / "pending").write_text(pending[0].call_id)
            with anyio.fail_after(15):
                while not (tmp_path / "op.done").exists():
                    await anyio.sleep(0.02)
            still = [p.call_id for p in await wf.approvals.pending()] == [pending[0].call_id]
            seen = None if person is None else await person(wf, control, pending[0].call_id)
            if still:
                await wf.approvals.reject(pending[0].call_id, reason="not by an agent")
        return still, seen

    result = await run_wf(fn, tmp_path)
    assert result.outcome == "completed", result.reason
    return result, deploys
