"""The named ACP runtimes: opencode, qwen, gemini and copilot, each the ACP harness and what its CLI needs.

Measured offline (docs/guide/acp-agents.md; ../shared/reference/acp-agents.md has the details):
each runs its shell commands itself and asks for permission first (opencode only where its config
says `"bash": "ask"`); each reports its spend in a place of its own (`AcpAgent.usage`); opencode's
and copilot's npm packages start a native binary, which is run directly, so a signal reaches it.
The environment here only keeps each quiet (no update checks, no telemetry where a variable turns
it off); the model and its credentials are the user's own configuration, as for the CLI alone.
"""

from __future__ import annotations

import glob
import os
import platform
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from .acp import AcpAgent
from .versions import install_command

ELF_MAGIC = b"\x7fELF"
_ARCH = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}
GEMINI_MINUTE = "%Y-%m-%dT%H-%M"  # the minute in gemini's session file names


def _platform() -> str:
    return f"{sys.platform.removesuffix('32')}-{_ARCH.get(platform.machine().lower(), platform.machine().lower())}"


def _is_native(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(4) == ELF_MAGIC
    except OSError:
        return False


def native_in(*packages: str) -> Callable[[str], str]:
    """A `native` mapping for an npm bin whose package starts a platform binary: the first of
    `packages` (paths under node_modules, `{platform}` filled in) that is an executable ELF file,
    or the bin itself where it already is one (npm 11 hard-links some) or none is found."""

    def native(found: str) -> str:
        real = Path(os.path.realpath(found))
        if _is_native(real):
            return found
        modules = next((parent for parent in real.parents if parent.name == "node_modules"), None)
        for package in packages:
            if modules is None:
                break
            candidate = modules / package.format(platform=_platform())
            if _is_native(candidate) and os.access(candidate, os.X_OK):
                return str(candidate)
        return found

    return native


def gemini_before_load(session: str, env: Mapping[str, str]) -> None:
    """gemini 0.61 starts a fresh recording of a session it loads in `session-<this minute>-<id8>.jsonl`:
    loading a session written in the same minute resets its own file, and the load fails ("No previous
    sessions found"). Renaming that file first keeps it (gemini finds a session by the id inside)."""
    home = env.get("GEMINI_CLI_HOME") or env.get("HOME")
    if not home or not session[:8].isalnum():
        return
    store = os.path.realpath(os.path.join(home, ".gemini", "tmp"))
    minutes = {time.strftime(GEMINI_MINUTE, time.localtime()), time.strftime(GEMINI_MINUTE, time.gmtime())}
    for minute in minutes:
        pattern = os.path.join(glob.escape(store), "*", "chats", f"session-{minute}-{session[:8]}.jsonl")
        for path in glob.glob(pattern):
            if os.path.realpath(path) != path:  # a link: a sandboxed agent's home is its own to write, not what it names
                continue
            os.rename(path, f"{path.removesuffix('.jsonl')}-{time.time_ns()}.jsonl")  # a name of its own: none replaced


OPENCODE = AcpAgent(
    "opencode", "opencode", ("acp",),
    env={"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
         "OPENCODE_DISABLE_LSP_DOWNLOAD": "1"},
    install=install_command("opencode"),
    native=native_in("opencode-{platform}/bin/opencode", "opencode-{platform}-baseline/bin/opencode"),
    usage=("response",),  # the last model call's only: opencode reports no turn's tokens over ACP
    running_cost=True, version_cli="opencode",
)
QWEN = AcpAgent("qwen", "qwen", ("--acp",), install=install_command("qwen"), usage=("meta",), version_cli="qwen")
GEMINI = AcpAgent(
    "gemini", "gemini", ("--acp",), install=install_command("gemini"), usage=("quota",),
    before_load=gemini_before_load, version_cli="gemini",
)
COPILOT = AcpAgent(
    "copilot", "copilot", ("--acp", "--disable-client-telemetry"), env={"COPILOT_AUTO_UPDATE": "false"},
    install=install_command("copilot"),
    native=native_in("@github/copilot-{platform}/copilot"),
    usage=("response",), version_cli="copilot", model_env="COPILOT_MODEL",
)
ACP_AGENTS: dict[str, AcpAgent] = {agent.name: agent for agent in (OPENCODE, QWEN, GEMINI, COPILOT)}
