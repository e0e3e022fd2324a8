"""The versions of each agent CLI agentswf is tested with, declared in this one place.

Per CLI: its npm package and the ranges of versions its real-CLI tests passed on, oldest first.
The first range's start is the minimum that works (an agent on an older one is refused at its
open); the last range's end is the newest tested (a newer one is warned of, once a run, and
used). A version between two ranges was never tested: it is warned of too. The install hints,
`awf doctor`, the check at an agent's first use (harnesses/cli_version.py) and
docs/guide/agents.md read this table. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Version = tuple[int, ...]
Standing = Literal["below", "tested", "untested", "newer"]

_VERSION = re.compile(r"(?<![\d.])(\d+)\.(\d+)(?:\.(\d+))?")  # the first x.y[.z] a `--version` prints


@dataclass(frozen=True, slots=True)
class Tested:
    """One CLI's npm package and the version ranges (first, last; both included) it was tested on;
    `formerly`, the package it was published as up to a version, where it moved."""

    package: str
    ranges: tuple[tuple[Version, Version], ...]
    formerly: tuple[str, Version] | None = None

    @property
    def minimum(self) -> Version:
        return self.ranges[0][0]

    @property
    def newest(self) -> Version:
        return self.ranges[-1][1]


TESTED: dict[str, Tested] = {
    "claude": Tested("@anthropic-ai/claude-code", (((2, 1, 312), (2, 1, 332)),)),
    "codex": Tested("@openai/codex", (((0, 165, 0), (0, 171, 0)),)),
    # pi 0.70.0 ignores retry.provider.maxRetries (0.70.1 was never published); 1.x runs on Node.js 22.19+.
    "pi": Tested(
        "@earendil-works/pi-coding-agent", (((0, 70, 2), (0, 73, 1)), ((1, 0, 3), (1, 6, 0))),
        formerly=("@mariozechner/pi-coding-agent", (0, 73, 1)),
    ),
    # The ACP runtimes (harnesses/acp_agents.py), each tested over ACP offline.
    "opencode": Tested("opencode-ai", (((1, 18, 33), (1, 18, 33)),)),
    "qwen": Tested("@qwen-code/qwen-code", (((0, 24, 4), (0, 24, 4)),)),
    "gemini": Tested("@google/gemini-cli", (((0, 61, 0), (0, 61, 0)),)),
    "copilot": Tested("@github/copilot", (((1, 0, 102), (1, 0, 102)),)),
    # claude and codex through their ACP adapters (Runtime(harness="acp", command=[…])): tested, not checked at open.
    "claude-agent-acp": Tested("@zed-industries/claude-agent-acp", (((0, 23, 1), (0, 23, 1)),)),
    "codex-acp": Tested("@zed-industries/codex-acp", (((0, 16, 0), (0, 16, 0)),)),
}


def parse_version(text: str) -> Version | None:
    """The version in what a CLI's `--version` printed ("2.1.332 (Claude Code)", "codex-cli 0.171.0")."""
    found = _VERSION.search(text)
    if found is None:
        return None
    return tuple(int(part) for part in found.groups() if part is not None)


def shown(version: Version) -> str:
    return ".".join(str(part) for part in version)


def install_command(cli: str) -> str:
    """The command that installs the newest tested version of `cli`."""
    tested = TESTED[cli]
    return f"npm install -g {tested.package}@{shown(tested.newest)}"


def package_of(cli: str, version: Version) -> str:
    """The npm package `version` of `cli` was published as (pi up to 0.73.1 under its old name)."""
    tested = TESTED[cli]
    if tested.formerly is not None and version <= tested.formerly[1]:
        return tested.formerly[0]
    return tested.package


def standing(cli: str, version: Version) -> Standing:
    """Where `version` of `cli` stands against what was tested: below the minimum, in a tested
    range, between two ranges (untested), or newer than the newest tested."""
    tested = TESTED[cli]
    if version < tested.minimum:
        return "below"
    if version > tested.newest:
        return "newer"
    if any(first <= version <= last for first, last in tested.ranges):
        return "tested"
    return "untested"


def tested_ranges(cli: str) -> str:
    """The ranges tested, as a person reads them: "0.70.2–0.73.1, 1.0.3–1.6.0"."""
    return ", ".join(f"{shown(first)}–{shown(last)}" for first, last in TESTED[cli].ranges)


def verdict(cli: str, version: Version) -> str | None:
    """What to tell a person of `version` of `cli`, or None when it was tested."""
    tested = TESTED[cli]
    match standing(cli, version):
        case "below":
            return (f"{cli} {shown(version)} is older than the oldest version agentswf works with, "
                    f"{shown(tested.minimum)}: install a newer one with `{install_command(cli)}`")
        case "newer":
            return (f"{cli} {shown(version)} is newer than the newest version agentswf was tested with, "
                    f"{shown(tested.newest)}; the run goes on with it")
        case "untested":
            return (f"{cli} {shown(version)} was not tested with agentswf (tested: {tested_ranges(cli)}); "
                    "the run goes on with it")
    return None
