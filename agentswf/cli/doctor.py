"""`awf doctor`: what this machine has for agentswf, each agent CLI and tool it runs.

Per agent CLI and ACP runtime on PATH: its path (an ACP runtime's native binary), its version
(`--version`, read as a run reads it) against the versions agentswf was tested with
(harnesses/versions.py), and whether its login or key is found: which variables are set and which credential files exist, by name only (none is read).
Then bubblewrap (sandboxes), tmux (panes) and Temporal (`--engine temporal`). Exits 1 when a
CLI found is older than agentswf works with, 0 otherwise.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from ..errors import DefinitionError, HarnessError
from ..harnesses.acp import LOGIN_HINT, locate
from ..harnesses.acp_agents import ACP_AGENTS
from ..harnesses.cli_version import VERSION_TIMEOUT_SECONDS, read_version
from ..harnesses.runtime import CLI_HARNESSES
from ..harnesses.tmux import TMUX_INSTALL
from ..harnesses.versions import TESTED, install_command, shown, standing, tested_ranges
from ..sandbox.runner import find_bwrap, probe

# Per CLI: the variables that carry a key or a login, and (the variable naming its directory,
# that directory under the home, the files in it that hold one).
AUTH: dict[str, tuple[tuple[str, ...], tuple[str, str, tuple[str, ...]]]] = {
    "claude": (("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK",
                "CLAUDE_CODE_USE_VERTEX"), ("CLAUDE_CONFIG_DIR", ".claude", (".credentials.json",))),
    "codex": (("OPENAI_API_KEY", "CODEX_API_KEY"), ("CODEX_HOME", ".codex", ("auth.json", "config.toml"))),
    "pi": (("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY"),
           ("PI_CODING_AGENT_DIR", ".pi/agent", ("auth.json", "models.json"))),
    "cursor": (("CURSOR_API_KEY",), ("", "", ())),  # its login's files aren't known here
    # The ACP runtimes (harnesses/acp_agents.py): the keys their providers read, and their logins' files.
    "opencode": (("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENCODE_API_KEY"), ("", ".local/share/opencode", ("auth.json",))),
    "qwen": (("OPENAI_API_KEY", "DASHSCOPE_API_KEY"), ("", ".qwen", ("oauth_creds.json",))),
    "gemini": (("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS"), ("", ".gemini", ("oauth_creds.json",))),
    "copilot": (("COPILOT_PROVIDER_API_KEY", "COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"),
                ("COPILOT_HOME", ".copilot", ("config.json",))),
}
TOOL_VERSION_TIMEOUT_SECONDS = 10.0  # for `tmux -V` and `bwrap --version`
EMPTY_JSON_BYTES = 2  # `{}`: a credentials file no longer than this holds none


def auth_found(cli: str, env: Mapping[str, str]) -> list[str]:
    """Where `cli`'s key or login may be: the variables set and the files that exist (not read)."""
    variables, (directory_variable, under_home, files) = AUTH[cli]
    found = [name for name in variables if env.get(name)]
    directory = Path(env.get(directory_variable) or Path(env.get("HOME") or Path.home()) / under_home)
    found += [str(directory / name) for name in files if _holds_something(directory / name)]
    return found


def _holds_something(path: Path) -> bool:
    """A file longer than an empty JSON object (pi writes `{}` at its first start): by its size, unread."""
    try:
        return path.is_file() and path.stat().st_size > EMPTY_JSON_BYTES
    except OSError:
        return False


def _tool_version(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_VERSION_TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"({error})"
    return (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr).strip() else ""


def _clis(env: Mapping[str, str]) -> list[tuple[str, str | None, str, str]]:
    """Each agent CLI and ACP runtime: its name, its path on PATH (an ACP runtime's native binary
    where it has one; None: not found), the command that installs it, and how to log it in."""
    found: list[tuple[str, str | None, str, str]] = [
        (name, shutil.which(harness.executable_name, path=env.get("PATH", os.defpath)), harness.install, harness.login_hint)
        for name, harness in CLI_HARNESSES.items()
    ]
    for name, agent in ACP_AGENTS.items():
        try:
            path: str | None = locate(agent, (), env)[0]
        except HarnessError:
            path = None
        found.append((name, path, agent.install, LOGIN_HINT.format(name=name)))
    return found


async def cli_lines(env: Mapping[str, str], cwd: Path) -> tuple[list[str], bool]:
    """A line or two per agent CLI, and whether one found is older than agentswf works with."""
    lines, too_old = [], False
    for name, path, install, login_hint in _clis(env):
        if path is None:
            lines.append(f"  {name}: not on PATH; install it with `{install}`")
            continue
        found = await read_version(name, path, env, cwd)
        if found.version is None:
            said = f"version unknown ({found.problem})"
        elif name not in TESTED:
            said = f"{shown(found.version)}, not tested with agentswf"
        else:
            where = standing(name, found.version)
            too_old = too_old or where == "below"
            said = {
                "below": f"{shown(found.version)}, older than {shown(TESTED[name].minimum)}, the oldest agentswf works "
                         f"with: install a newer one with `{install_command(name)}`",
                "tested": f"{shown(found.version)}, tested ({tested_ranges(name)})",
                "newer": f"{shown(found.version)}, newer than the newest tested, {shown(TESTED[name].newest)}",
                "untested": f"{shown(found.version)}, not tested (tested: {tested_ranges(name)})",
            }[where]
        auth = auth_found(name, env)
        login = f"login or key: {', '.join(auth)}" if auth else f"no login or key found: {login_hint}"
        lines += [f"  {name}: {path}", f"    {said}", f"    {login}"]
    return lines, too_old


async def tool_lines() -> list[str]:
    """bubblewrap's, tmux's and Temporal's availability."""
    lines = []
    try:
        bwrap = find_bwrap()
        await probe(bwrap)
        lines.append(f"  bwrap: {bwrap} ({_tool_version([bwrap, '--version'])}): sandboxes work")
    except DefinitionError as error:
        lines.append(f"  bwrap: sandboxes don't work here: {error}")
    tmux = shutil.which("tmux")
    lines.append(f"  tmux: {tmux} ({_tool_version([tmux, '-V'])}): panes work" if tmux else
                 f"  tmux: not on PATH, so agents can't run in panes: install it with `{TMUX_INSTALL}`")
    if importlib.util.find_spec("temporalio") is None:
        lines.append("  temporal: agentswf[temporal] is not installed (pip install 'agentswf[temporal]')")
    else:
        from ..temporal.devserver import server_binary

        try:
            lines.append(f"  temporal: the SDK is installed; the dev server is {server_binary()}")
        except HarnessError as error:
            lines.append(f"  temporal: the SDK is installed; {error}")
    return lines


def command_doctor(options: argparse.Namespace) -> int:
    async def report() -> tuple[list[str], bool]:
        clis, too_old = await cli_lines(os.environ, Path.cwd())
        return ["agent CLIs:", *clis, "tools:", *await tool_lines()], too_old

    lines, too_old = anyio.run(report)
    sys.stdout.write("".join(f"{line}\n" for line in lines))
    return 1 if too_old else 0


def add_parsers(commands: Any) -> None:
    """`awf doctor`, on awf's subcommands."""
    parser = commands.add_parser(
        "doctor", help="the agent CLIs found, their versions and logins; bubblewrap, tmux and Temporal",
        description=f"Each CLI's --version is given {VERSION_TIMEOUT_SECONDS:g} s. Exits 1 when a CLI is older "
                    "than agentswf works with.",
    )
    parser.set_defaults(handler=command_doctor)
