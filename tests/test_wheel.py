"""The wheel works outside the clone: built from it, installed in a fresh venv elsewhere, it runs
`awf run` on a copy of examples/review_fix and a project's own tests with agentswf's pytest plugin.

The package's dependencies (and pytest) come from the configured index; agentswf itself only from
the wheel, which is checked to hold every file of the package: keeper.py and tmux_runner.py are
started as scripts by their path, and py.typed marks the package typed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

from agentswf.__about__ import __version__

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[1]
BUILD_TIMEOUT_SECONDS = 300  # pip fetches hatchling into an isolated build environment
INSTALL_TIMEOUT_SECONDS = 600  # the dependencies and pytest, from the index
RUN_TIMEOUT_SECONDS = 120

USERS_TEST = """
import msgspec

from agentswf import Workflow, workflow
from agentswf.testing import answer, run_workflow


class Verdict(msgspec.Struct):
    verdict: str


@workflow(name="mine", description="One review.")
async def mine(wf: Workflow) -> str:
    reviewer = await wf.agents.open("reviewer", runtime="claude")
    return (await reviewer.run("Review src/.", schema=Verdict)).value.verdict


async def test_the_review_approves(run_root):
    run = await run_workflow(mine, agents={"reviewer": answer(Verdict("approve"))}, run_root=run_root)
    assert run.value == "approve"
"""


def _package_files() -> set[str]:
    """Every file of the package in the clone, as the wheel names it."""
    return {
        str(path.relative_to(REPO))
        for path in (REPO / "agentswf").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


def _clean_env(venv: Path) -> dict[str, str]:
    """The environment of a shell in another project: the new venv first, nothing of this one's."""
    ours = os.path.dirname(sys.executable)
    path = [venv / "bin", *(entry for entry in os.environ.get("PATH", "").split(os.pathsep) if entry != ours)]
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTEST_ADDOPTS")
        and not name.startswith(("PYTEST_", "WFA", "AWF"))
    }
    return {**env, "PATH": os.pathsep.join(map(str, path))}


def _run(argv: list[str | Path], *, cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(arg) for arg in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, (
        f"{argv} exited {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    )
    return done


def test_the_wheel_runs_a_workflow_and_its_tests_outside_the_clone(tmp_path: Path) -> None:
    assert not tmp_path.is_relative_to(REPO)
    dist, venv, project = tmp_path / "dist", tmp_path / "venv", tmp_path / "project"
    env = _clean_env(venv)
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", dist, REPO],
        cwd=tmp_path, env=env, timeout=BUILD_TIMEOUT_SECONDS,
    )  # fmt: skip
    [wheel] = dist.glob("agentswf-*.whl")

    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = Parser().parsestr(archive.read(f"agentswf-{__version__}.dist-info/METADATA").decode())
        entry_points = archive.read(f"agentswf-{__version__}.dist-info/entry_points.txt").decode()
    assert {name for name in names if name.startswith("agentswf/")} == _package_files()
    assert metadata["Version"] == __version__
    assert metadata["License-Expression"] == "MIT"
    assert "Typing :: Typed" in metadata.get_all("Classifier", [])
    assert "agents" in metadata["Keywords"].split(",")
    assert "awf = agentswf_entry:main" in entry_points
    assert "agentswf = agentswf.testing.pytest_plugin" in entry_points

    try:
        _run([sys.executable, "-m", "venv", venv], cwd=tmp_path, env=env, timeout=RUN_TIMEOUT_SECONDS)
        _run(
            [venv / "bin" / "python", "-m", "pip", "install", "--quiet", wheel, "pytest"],
            cwd=tmp_path, env=env, timeout=INSTALL_TIMEOUT_SECONDS,
        )  # fmt: skip
        project.mkdir()
        found = _run(
            [venv / "bin" / "python", "-c", "import agentswf; print(agentswf.__file__)"],
            cwd=project, env=env, timeout=RUN_TIMEOUT_SECONDS,
        )  # fmt: skip
        installed = Path(found.stdout.strip())
        assert installed.is_relative_to(venv), installed

        example = project / "review_fix"
        shutil.copytree(REPO / "examples" / "review_fix", example, ignore=shutil.ignore_patterns("__pycache__", ".awf"))
        ran = _run([venv / "bin" / "awf", "run", "review_fix.py"], cwd=example, env=env, timeout=RUN_TIMEOUT_SECONDS)
        assert json.loads(ran.stdout) == {"verdict": "approve", "rounds": 2, "fixed": ["calc.py"]}
        assert "review-fix completed" in ran.stderr

        (project / "test_mine.py").write_text(USERS_TEST)
        tested = _run(
            [venv / "bin" / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_mine.py"],
            cwd=project, env=env, timeout=RUN_TIMEOUT_SECONDS,
        )  # fmt: skip
        assert "2 passed" in tested.stdout  # on asyncio and on trio, with no conftest
    finally:
        shutil.rmtree(venv, ignore_errors=True)  # tens of megabytes; pytest keeps its last temp dirs
