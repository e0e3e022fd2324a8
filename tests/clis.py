"""The real agent CLIs for the end-to-end tests: where to find them (`.ci/run` installs them
under `.ci/node`), the mark of a test that needs them all (tests/conftest.py makes it `e2e` and
skips it where one is missing), and the taught command the scripted model reads out of a prompt."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from agentswf import Runtime
from agentswf.harnesses.versions import Version, parse_version
from agentswf.testing.models import (
    CLI_DIR_VARIABLE,
    SHELL_ARGUMENTS,
    Conversation,
    ScriptedModel,
    Shell,
    Text,
    claude_env,
    codex_env,
    find_cli,
    pi_env,
)

CLIS = ("claude", "codex", "pi")
ACP_CLIS = ("opencode", "qwen", "gemini", "copilot", "claude-agent-acp", "codex-acp")  # tests/acp's real CLIs
CI_CLI_DIR = Path(__file__).resolve().parents[1] / ".ci" / "node" / "node_modules" / ".bin"
if not os.environ.get(CLI_DIR_VARIABLE) and CI_CLI_DIR.is_dir():
    os.environ[CLI_DIR_VARIABLE] = str(CI_CLI_DIR)

needs_clis = pytest.mark.needs(*CLIS)

TAUGHT = re.compile(r"(/\S+/wfa) result (\w+)")  # the launcher and call id a turn's prompt teaches


def shelling(*commands: str) -> Callable[[Conversation], Shell | Text]:
    """A scripted model whose agent runs `commands` in its shell, one a reply, then answers its turn
    `done` through the `wfa` its prompt taught, then says it finished."""

    def script(conv: Conversation) -> Shell | Text:
        found = TAUGHT.search(conv.prompt)
        assert found, conv.prompt[:300]
        wfa, call = found.groups()
        steps = [*commands, f"{wfa} result {call} done"]
        done = len(conv.tool_results)
        return Shell(steps[done]) if done < len(steps) else Text("Finished.")

    return script


# Run by an agent through its CLI's shell tool: writes the line in the file argv[1] into the
# CLI's own standard output (the first ancestor whose output isn't this shell's), as a process
# of the agent's can through /proc, and the CLI's pid into argv[2]. `forging` runs it.
FORGE = """
import os, sys
line = open(sys.argv[1]).read()
mine = os.readlink("/proc/self/fd/1")
pid = os.getppid()
while pid > 1:
    out = os.readlink(f"/proc/{pid}/fd/1")
    if out != mine and out.startswith("pipe:"):
        with open(f"/proc/{pid}/fd/1", "w") as cli_output:
            cli_output.write(line + "\\n")
        open(sys.argv[2], "w").write(str(pid))
        break
    pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
"""


def forging(line: str, where: Path) -> Callable[[Conversation], Shell | Text]:
    """A scripted model whose agent writes `line` into its CLI's output (FORGE, in `where`), then
    answers `done`; `where/forged` holds the CLI's pid once the line is written."""
    (where / "forge.py").write_text(FORGE)
    (where / "line.json").write_text(line)
    return shelling(f"{sys.executable} {where / 'forge.py'} {where / 'line.json'} {where / 'forged'}")


def real_runtimes(model: ScriptedModel, homes: Path) -> dict[str, Runtime]:
    """The real claude, codex and pi by name, each against `model` with a home of its own under `homes`."""
    return {
        "claude": Runtime(harness="claude", command=(find_cli("claude"),), env=claude_env(model, homes / "claude")),
        "codex": Runtime(harness="codex", command=(find_cli("codex"),), env=codex_env(model, homes / "codex")),
        "pi": Runtime(harness="pi", command=(find_cli("pi"),), model="fake/fake-model", env=pi_env(model, homes / "pi")),
    }


def compacting(conv: Conversation) -> bool:
    """A compaction's summary request, not a turn's: it teaches no `wfa result`, or it offers no
    shell (pi 1.x's carries the conversation, the taught command in it, as text, with no tools)."""
    return TAUGHT.search(conv.prompt) is None or not any(name in SHELL_ARGUMENTS for name in conv.tools)


PI_KEEPS_FOCUS = (1, 4, 0)  # before it, pi drops a compaction's focus from a split turn's summary request
PI_REPORTS_COMPACTION_USAGE = (0, 81, 0)  # from it, pi's rpc answer to `compact` has the summary's usage


def version_of(cli: str) -> Version | None:
    """The version of the CLI the tests run, for what they must check by version (each says why)."""
    found = find_cli(cli)
    if found is None:
        return None
    with tempfile.TemporaryDirectory(prefix="awf-version-") as scratch:  # opencode leaves $TMPDIR/opencode
        said = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=30,
                              env={**os.environ, "TMPDIR": scratch})  # fmt: skip
    return parse_version(said.stdout + said.stderr)  # pi 0.x says it on standard error


def pi_version() -> Version | None:
    return version_of("pi")


def pi_keeps_focus() -> bool:
    version = pi_version()
    return version is not None and version >= PI_KEEPS_FOCUS
