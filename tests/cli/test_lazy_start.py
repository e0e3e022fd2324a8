"""`awf` imports only the module of the command it runs, and agentswf's packages import their
public names only when they are named (agentswf/lazy.py): `awf ls` started in a third of a second,
most of it importing the engine, every harness and the Temporal commands it never used."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from agentswf.cli import main


def _commands_added_by(module: str) -> set[str]:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers()
    importlib.import_module(f"agentswf.cli.{module}").add_parsers(commands)
    return set(commands.choices)


def test_each_group_names_the_commands_its_module_adds() -> None:
    assert {module: set(names) for module, names in main.GROUPS.items()} == {
        module: _commands_added_by(module) for module in main.GROUPS
    }


def _imported_by(words: list[str], cwd: Path) -> set[str]:
    """The agentswf modules a fresh `awf WORDS` process imported by its end."""
    script = (
        "import sys\nfrom agentswf.cli.main import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print(' '.join(sorted(name for name in sys.modules if name.startswith('agentswf'))), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", script, *words], capture_output=True, text=True, cwd=cwd, timeout=60)
    return set(done.stderr.splitlines()[-1].split())


ENGINE = {"agentswf.engine.run", "agentswf.workflow.running", "agentswf.harnesses.runtime", "agentswf.temporal.messages"}
"""What running a workflow takes: a command that reads a record, or asks a live run, needs none of it."""


@pytest.mark.parametrize(
    "words",
    [["ls"], ["logs"], ["trace"], ["pending"], ["inbox", "--as", "k"], ["send", "b", "hi", "--as", "k"], ["worktrees"],
     ["--version"]],
    ids=lambda words: " ".join(words),
)  # fmt: skip
def test_a_command_that_runs_no_workflow_imports_no_engine(words: list[str], tmp_path: Path) -> None:
    imported = _imported_by([*words], tmp_path)
    assert "agentswf.cli.main" in imported
    assert not imported & ENGINE, sorted(imported & ENGINE)


def test_help_and_a_mistyped_command_still_list_every_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main.main(["--help"])
    listed = capsys.readouterr().out
    assert all(name in listed for names in main.GROUPS.values() for name in names)
    with pytest.raises(SystemExit):
        main.main(["tial"])
    assert "tail" in capsys.readouterr().err  # argparse's choices, every command's


def test_a_public_name_is_imported_when_first_named() -> None:
    code = (
        "import sys, agentswf\n"
        "assert 'agentswf.workflow.running' not in sys.modules\n"
        "import agentswf.workflow.durations\n"  # a submodule of the package named `workflow`...
        "from agentswf import workflow, run, Agent, AgentswfError\n"
        "assert callable(workflow) and workflow.__module__ == 'agentswf.workflow.definition'\n"  # ...is not the decorator
        "assert agentswf.workflow is workflow and 'agentswf.workflow.running' in sys.modules\n"
        "assert set(agentswf.__all__) <= set(dir(agentswf))\n"
        "from agentswf.actors import Supervisor; from agentswf.sandbox import SandboxSpec\n"
        "from agentswf.temporal import DevServer\n"
        "import agentswf.testing.replay, agentswf.testing.fork\n"  # submodules named as two of its functions
        "from agentswf.testing import replay, fork\n"
        "assert callable(replay) and callable(fork)\n"
        "try:\n    agentswf.nothing\nexcept AttributeError as error:\n    print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "module 'agentswf' has no attribute 'nothing'"


TEMPORAL_WITHOUT_THE_EXTRA = ("DevServer", "RunKey", "load_key")  # agentswf.temporal's names that import no temporalio


@pytest.mark.parametrize("package", ["agentswf", "agentswf.actors", "agentswf.sandbox", "agentswf.temporal", "agentswf.testing"])
def test_every_public_name_of_a_lazy_package_is_there(package: str) -> None:
    module = importlib.import_module(package)
    extra = package != "agentswf.temporal" or importlib.util.find_spec("temporalio") is not None
    for name in module.__all__ if extra else TEMPORAL_WITHOUT_THE_EXTRA:
        assert getattr(module, name) is not None, name
