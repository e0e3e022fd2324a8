"""Every harness takes a position on every capability, and a runtime can't ask for an absent one."""

from __future__ import annotations

import shutil

import pytest

from agentswf import DefinitionError, HarnessError, Runtime
from agentswf.harnesses.capabilities import CAPABILITIES, EFFORT_LEVELS, TABLE, Absent, Given
from agentswf.harnesses.runtime import ACP_HARNESSES, CLI_HARNESSES, check_runtime, harness_for, resolve_runtime


def test_every_harness_gives_or_explains_every_capability():
    assert set(TABLE) == {"shell", *CLI_HARNESSES, *ACP_HARNESSES}
    for harness, row in TABLE.items():
        assert set(row) == set(CAPABILITIES), harness
        for name, entry in row.items():
            assert isinstance(entry, (Given, Absent)), (harness, name)
            text = entry.how if isinstance(entry, Given) else entry.reason
            assert text.strip(), f"{harness}.{name} gives no reason"


def test_effort_levels_exist_exactly_where_effort_is_given():
    for harness, row in TABLE.items():
        assert (harness in EFFORT_LEVELS) == isinstance(row["effort"], Given), harness


@pytest.mark.parametrize("harness", sorted(CLI_HARNESSES))
def test_await_reply_as_the_harness_says(harness):
    cls = CLI_HARNESSES[harness]
    assert cls("/bin/true").can_await == isinstance(TABLE[harness]["await_reply"], Given)


def test_a_runtime_asking_for_an_absent_capability_is_refused_with_its_reason():
    with pytest.raises(DefinitionError, match="the effort is part of the model id"):
        check_runtime(Runtime(harness="cursor", effort="high"))
    with pytest.raises(DefinitionError, match="its levels are low, medium, high, xhigh, max"):
        check_runtime(Runtime(harness="claude", effort="extreme"))
    with pytest.raises(DefinitionError, match="no harness named"):
        check_runtime(Runtime(harness="gemeni"))
    check_runtime(Runtime(harness="pi", effort="xhigh"))


def test_aliases_name_the_harnesses():
    assert resolve_runtime("codex") == Runtime(harness="codex")
    assert resolve_runtime("shell:./agent.sh").command == ("/bin/sh", "-c", "./agent.sh")
    with pytest.raises(DefinitionError, match="unknown runtime"):
        resolve_runtime("gpt")


@pytest.mark.parametrize("harness", sorted(CLI_HARNESSES))
def test_a_missing_cli_says_how_to_install_it(harness):
    with pytest.raises(HarnessError, match="install it with"):
        harness_for(Runtime(harness=harness), {"PATH": "/nonexistent"})


def test_a_cli_at_a_configured_path_is_used(tmp_path):
    cli = tmp_path / "my-codex"
    cli.write_text("#!/bin/sh\n")
    cli.chmod(0o755)
    harness = harness_for(Runtime(harness="codex", command=(str(cli),)), {"PATH": "/nonexistent"})
    assert harness.executable == str(cli)


def test_claude_codex_and_pi_run_in_panes_and_the_others_say_why():
    for harness in ("claude", "codex", "pi"):
        check_runtime(Runtime(harness=harness, placement="pane"))
    for harness in ("cursor", "shell", "acp", "opencode", "qwen", "gemini", "copilot"):
        with pytest.raises(DefinitionError, match="can't run in a pane"):
            check_runtime(Runtime(harness=harness, placement="pane"))
    with pytest.raises(DefinitionError, match="placement must be"):
        check_runtime(Runtime(harness="claude", placement="window"))  # type: ignore[arg-type]


def test_waiting_is_offered_by_a_claude_pane_and_not_by_headless_claude(tmp_path):
    cli = tmp_path / "claude"
    cli.write_text("#!/bin/sh\n")
    cli.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin"}
    headless = harness_for(Runtime(harness="claude", command=(str(cli),)), env)
    assert not headless.supports_waiting and not headless.confirms_delivery
    if shutil.which("tmux"):
        pane = harness_for(Runtime(harness="claude", command=(str(cli),), placement="pane"), env)
        assert pane.supports_waiting and pane.confirms_delivery and pane.can_await
        for other in ("codex", "pi"):  # their TUIs confirm no delivery: no waiting, no awaited reply
            pane = harness_for(Runtime(harness=other, command=(str(cli),), placement="pane"), env)
            assert not pane.supports_waiting and not pane.confirms_delivery and not pane.can_await


def test_a_pane_without_tmux_says_how_to_install_it(tmp_path):
    cli = tmp_path / "claude"
    cli.write_text("#!/bin/sh\n")
    cli.chmod(0o755)
    with pytest.raises(HarnessError, match="apt-get install -y tmux"):
        harness_for(Runtime(harness="claude", command=(str(cli),), placement="pane"), {"PATH": str(tmp_path)})
