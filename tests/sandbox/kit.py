"""Helpers for tests of sandboxed agents: the mark of a test that needs bubblewrap, find a test's processes on the host."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

import agentswf
from agentswf import Runtime, workflow

MARK = "SANDBOX_TEST"  # every agent of a test carries this, with the test's own value

needs_bwrap = pytest.mark.needs("bwrap")


def marked(token: str) -> list[int]:
    """Host pids of live processes whose environment has MARK=token (pids inside a sandbox are its own)."""
    wanted = f"{MARK}={token}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as environ:
                variables = environ.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as stat:
                state = stat.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if wanted in variables and state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def agent(where: Path, name: str, body: str, token: str, **env: str) -> Runtime:
    """A shell agent running `body` (sh) from a script in `where`; its report is $R (in its own /tmp)."""
    script = where / f"{name}.sh"
    script.write_text("#!/bin/sh\nR=$(mktemp)\nsay() { echo \"$*\" >>\"$R\"; }\n" + textwrap.dedent(body) + "\n")
    return Runtime(harness="shell", command=("/bin/sh", str(script)), env={MARK: token, **env})


ANSWER = '"$WFA" result "$WFA_CALL_ID" "$(cat "$R")"'
"""The line that answers with the report."""


async def run(fn, tmp_path: Path) -> agentswf.RunResult:
    definition = workflow(name="sbx", description="A sandboxed test workflow.")(fn)
    return await agentswf.run(definition, run_root=tmp_path / "runs", cwd=tmp_path)
