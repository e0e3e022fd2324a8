"""`awf` called in the test's own process, for a command another test already runs as a real
process: its words, exit status and what it prints, without the 0.4 CPU-s of a new interpreter.

What only a process shows (a traceback at exit, the exit status the interpreter gives, signals)
is for those subprocess tests; here, what `main` takes from the process is held off: it leaves the
collector's pacing and where progress lines go as the test process has them, and returns its status
rather than `os._exit` past a thread it finds (pytest's own, here).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import structlog

from agentswf import progress
from agentswf.cli import main as awf_main


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
        # `awf run` and `awf continue` set where progress lines go (to this test's stderr): as it was after
        patched.setattr(progress, "_shown", progress._shown)
        patched.setattr(progress, "_hidden_sources", progress._hidden_sources)
        logging = structlog.get_config()
        capsys.readouterr()
        try:
            code = awf_main.main(list(words))
        except SystemExit as exit:  # argparse's, after --help
            code = exit.code if isinstance(exit.code, int) else 1
        finally:
            structlog.configure(**logging)
        out, err = capsys.readouterr()
    return Said(code, out, err)
