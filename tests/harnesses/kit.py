"""Helpers for tests that run real shell agents through `agentswf.run`."""

from __future__ import annotations

import os
import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec

import agentswf
from agentswf import workflow
from agentswf.engine.records import read_json, read_lines


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
