"""The pytest plugin, as a new project meets it: pytest run in a fresh directory, no conftest.

The README's testing snippet is taken from README.md itself, so the README can't drift
from what passes. Each pytest runs in this process (pytester's `runpytest_inprocess`, with the
plugins found by their entry points as in a project of the user's): a pytest of its own process
spent seconds importing its plugins, six times over. tests/test_wheel.py runs the plugin from an
installed wheel in a process of its own.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"

EXTRA_TESTS = '''
import pytest
import trio

from agentswf.testing import answer, run_workflow
from review import Verdict, review


def test_a_skip_says_why():
    pytest.skip("no claude here")


@pytest.mark.trio
async def test_pytest_trio_keeps_its_own_tests():
    trio.lowlevel.current_trio_token()  # raises outside trio


async def test_the_run_root_is_under_tmp_path(run_root, tmp_path, run_record):
    run = await run_workflow(review, agents={"reviewer": answer(Verdict("approve"))}, run_root=run_root)
    assert run.run_dir.is_relative_to(tmp_path)
    assert run_record().turns == run.record.turns != []
    assert run_record(run.run_dir).output["outcome"] == "completed"
'''


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.DOTALL)


def _project(pytester: pytest.Pytester, *, extra: bool = False, ini: str | None = None) -> pytest.Pytester:
    """A fresh project: the README's workflow as review.py and its testing snippet as a test."""
    blocks = _python_blocks(README.read_text())
    snippet = next(block for block in blocks if "run_workflow" in block)
    pytester.makepyfile(review=blocks[0], test_review=snippet)
    if extra:
        pytester.makepyfile(test_extra=EXTRA_TESTS)
    if ini is not None:
        pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.syspathinsert()  # as pytest's rootdir is on the path of a project's own pytest
    return pytester


class _Done:
    """What a pytest run said, as a process's would read: its exit status, stdout and stderr."""

    def __init__(self, result: pytest.RunResult) -> None:
        self.returncode = int(result.ret)
        self.stdout = result.stdout.str()
        self.stderr = result.stderr.str()


def _pytest(project: pytest.Pytester, *args: str) -> _Done:
    return _Done(project.runpytest_inprocess("-v", "-p", "no:cacheprovider", *args))


def test_the_readme_snippet_passes_on_both_backends_as_written(pytester):
    done = _pytest(_project(pytester))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_review_approves[asyncio] PASSED" in done.stdout
    assert "test_review_approves[trio] PASSED" in done.stdout
    assert "2 passed" in done.stdout


def test_skips_say_why_pytest_trio_keeps_its_tests_and_the_fixtures_work(pytester):
    done = _pytest(_project(pytester, extra=True))
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"SKIPPED \[1\] test_extra.py:\d+: no claude here", done.stdout), done.stdout
    assert "test_pytest_trio_keeps_its_own_tests PASSED" in done.stdout  # once, not per backend
    assert "test_the_run_root_is_under_tmp_path[trio] PASSED" in done.stdout
    quiet = _pytest(pytester, "-rN", "test_extra.py")
    assert "SKIPPED [1]" not in quiet.stdout


def test_one_backend_is_chosen_by_option_or_ini(pytester):
    project = _project(pytester)
    by_option = _pytest(project, "--agentswf-backend", "trio")
    assert by_option.returncode == 0, by_option.stdout + by_option.stderr
    assert "[trio] PASSED" in by_option.stdout and "[asyncio]" not in by_option.stdout
    assert "1 passed, 1 deselected" in by_option.stdout
    project.makeini("[pytest]\nagentswf_backend = asyncio\n")
    by_ini = _pytest(project)
    assert "[asyncio] PASSED" in by_ini.stdout and "[trio]" not in by_ini.stdout
    project.makeini("[pytest]\nagentswf_backend = curio\n")
    wrong = _pytest(project)
    assert wrong.returncode == 4  # pytest's usage error
    assert "agentswf_backend = curio: it is one of asyncio, trio" in wrong.stderr


def test_under_trio_mode_pytest_trio_runs_every_async_test(pytester):
    done = _pytest(_project(pytester, ini="trio_mode = true"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_review_approves PASSED" in done.stdout
    assert "1 passed" in done.stdout


SCRATCH_TEST = '''
from agentswf.testing import answer, run_workflow
from review import Verdict, review


async def test_no_run_root_given():
    run = await run_workflow(review, agents={"reviewer": answer(Verdict("approve"))})
    with open("scratch.txt", "a") as said:
        said.write(str(run.run_dir.parent) + "\\n")
'''


def test_a_scratch_run_root_is_removed_as_the_session_ends(pytester):
    """run_workflow with no run_root makes one in the temporary directory; an xdist worker exits
    without atexit's functions, so the plugin removes it as pytest's session ends."""
    project = _project(pytester)
    project.makepyfile(test_scratch=SCRATCH_TEST)
    done = _pytest(project, "test_scratch.py")
    assert done.returncode == 0, done.stdout + done.stderr
    roots = (project.path / "scratch.txt").read_text().split()
    assert len(roots) == 2 and all("awf-test-runs-" in root for root in roots)  # one a backend
    assert not any(Path(root).exists() for root in roots)
