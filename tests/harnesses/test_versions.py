"""The tested version ranges of the agent CLIs, and the pure rules that read them."""

from __future__ import annotations

import pytest

from agentswf.harnesses.cli import refused_flag
from agentswf.harnesses.runtime import CLI_HARNESSES
from agentswf.harnesses.versions import TESTED, install_command, package_of, parse_version, standing, verdict


@pytest.mark.parametrize(
    "said,version",
    [
        ("2.1.332 (Claude Code)\n", (2, 1, 332)),
        ("codex-cli 0.171.0", (0, 171, 0)),
        ("1.6.0\n", (1, 6, 0)),
        ("0.73.1", (0, 73, 1)),
        ("v22.23.5", (22, 23, 5)),
        ("tool 3.4", (3, 4)),
        ("1.6.0-beta.2", (1, 6, 0)),
        ("no version here", None),
        ("", None),
        ("build 12", None),
    ],
)
def test_a_version_is_read_from_what_version_printed(said, version):
    assert parse_version(said) == version


def test_the_declared_ranges():
    assert {cli: (t.minimum, t.newest) for cli, t in TESTED.items()} == {
        "claude": ((2, 1, 312), (2, 1, 332)),
        "codex": ((0, 165, 0), (0, 171, 0)),
        "pi": ((0, 70, 2), (1, 6, 0)),
        "opencode": ((1, 18, 33), (1, 18, 33)),
        "qwen": ((0, 24, 4), (0, 24, 4)),
        "gemini": ((0, 61, 0), (0, 61, 0)),
        "copilot": ((1, 0, 102), (1, 0, 102)),
        "claude-agent-acp": ((0, 23, 1), (0, 23, 1)),
        "codex-acp": ((0, 16, 0), (0, 16, 0)),
    }
    for tested in TESTED.values():  # ranges in order, none empty, none overlapping
        flat = [bound for pair in tested.ranges for bound in pair]
        assert flat == sorted(flat) and all(first <= last for first, last in tested.ranges)


@pytest.mark.parametrize(
    "cli,version,expected",
    [
        ("claude", (2, 1, 311), "below"),
        ("claude", (2, 1, 312), "tested"),
        ("claude", (2, 1, 332), "tested"),
        ("claude", (2, 1, 333), "newer"),
        ("claude", (3,), "newer"),
        ("codex", (0, 164, 9), "below"),
        ("codex", (0, 171, 0), "tested"),
        ("pi", (0, 70, 0), "below"),
        ("pi", (0, 70, 2), "tested"),
        ("pi", (0, 73, 1), "tested"),
        ("pi", (0, 80, 2), "untested"),  # the new package's 0.7x-0.9x, between the ranges
        ("pi", (1, 6, 0), "tested"),
        ("pi", (1, 7, 0), "newer"),
    ],
)
def test_where_a_version_stands(cli, version, expected):
    assert standing(cli, version) == expected


def test_what_a_person_is_told():
    assert verdict("claude", (2, 1, 320)) is None
    below = verdict("claude", (2, 1, 300))
    assert below is not None and all(
        part in below for part in ("2.1.300", "2.1.312", "npm install -g @anthropic-ai/claude-code@2.1.332")
    )
    newer = verdict("pi", (1, 7, 0))
    assert newer is not None and "1.7.0" in newer and "1.6.0" in newer and "goes on" in newer
    untested = verdict("pi", (0, 90, 0))
    assert untested is not None and "0.70.2–0.73.1, 1.0.3–1.6.0" in untested


def test_the_install_hints_name_the_newest_tested():
    assert install_command("pi") == "npm install -g @earendil-works/pi-coding-agent@1.6.0"
    assert package_of("pi", (0, 70, 2)) == "@mariozechner/pi-coding-agent" and package_of("pi", (0, 74, 0)) == TESTED["pi"].package
    assert package_of("claude", (2, 1, 312)) == "@anthropic-ai/claude-code"
    for name, harness in CLI_HARNESSES.items():
        if name in TESTED:
            assert harness.install == install_command(name)


@pytest.mark.parametrize(
    "status,stderr,reported,flag",
    [
        (1, "error: unknown option '--verbose'\n", False, "--verbose"),  # claude (commander)
        (2, "error: unexpected argument '--bogus' found\n\n  tip: ...\nUsage: codex exec", False, "--bogus"),  # codex
        (1, "Error: Unknown option: --bogus\nWarning: No models available. Use /login to log in", False, "--bogus"),  # pi
        (2, "error: something else\n", False, ""),  # the usage status, from a CLI that reported nothing
        (2, "error: something else\n", True, None),  # ... but one that reported its turn exited 2 for another reason
        (1, "API error 500\n", False, None),
        (0, "error: unknown option '--verbose'\n", True, None),
    ],
)
def test_a_command_line_the_cli_refused_and_the_flag_it_names(status, stderr, reported, flag):
    assert refused_flag(status, stderr, reported) == flag
