"""`awf` called in the test's own process, for a command another test already runs as a real
process: its words, exit status and what it prints, without the 0.4 CPU-s of a new interpreter.

What only a process shows (a traceback at exit, the exit status the interpreter gives, signals)
is for those subprocess tests; here, what `main` takes from the process is held off: it leaves the
collector's pacing as the test process has it, and returns its status rather than `os._exit` past
a thread it finds (pytest's own, here).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentswf.cli import main as awf_main
from agentswf.cli.worktrees import command_worktrees


@dataclass(frozen=True)
class Said:
    """What a command said: as `subprocess.CompletedProcess` names it."""

    returncode: int
    stdout: str
    stderr: str


def awf_here(cwd: Path, *words: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Said:
    with monkeypatch.context() as patched:
        patched.chdir(cwd)
        patched.setattr(awf_main, "pace_collector", lambda: None)
        patched.setattr(awf_main, "_exit_past_abandoned_threads", lambda code: code)
        # `awf worktrees` writes to the sys.stdout it found when imported (its `out`): this test's instead
        patched.setattr(command_worktrees, "__defaults__", (sys.stdout,))
        capsys.readouterr()
        try:
            code = awf_main.main(list(words))
        except SystemExit as exit:  # argparse's, after --help
            code = exit.code if isinstance(exit.code, int) else 1
        out, err = capsys.readouterr()
    return Said(code, out, err)
