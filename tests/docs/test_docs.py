"""Every code block of the documentation runs, so the docs can't rot.

Each page of docs/ is one test, on asyncio and on trio (a page that runs no Python here but
its files, through `sh` blocks, once: what it starts is the same on either). Its blocks run in order, in one
namespace (`__name__` is `"__main__"`, as in a script), in a fresh directory that is also
on `sys.path`:

- a `python` block runs; a `python` block with a `title="name.py"` is written as that file
  (the page imports it, or a `sh` block runs it);
- a `sh` block marked `<!-- docs-test: run -->` runs with bash there, and must exit 0 (or
  the status it names); other `sh` blocks are commands shown, not run;
- a block marked `<!-- docs-test: skip: <why> -->` is not run, and must say why.

A page whose blocks run a tool besides Python (bubblewrap for guide/sandboxes.md) is an
end-to-end test: `pytest -m e2e` runs it (tests/conftest.py).

`anyio.run(main)` in a block runs on the test's backend, and every `test_*` function a
page defines is then called as pytest would (`tmp_path` is the one fixture given), so an
example written for the reader runs on both backends as written.
"""

from __future__ import annotations

import functools
import inspect
import os
import subprocess
import sys
import types
from pathlib import Path

import anyio
import pytest

from .blocks import Block, blocks

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
NEEDS = {"guide/sandboxes.md": ("bwrap",)}  # what a page's blocks run besides Python, by its id
SHELL_TIMEOUT_SECONDS = 180


def _page_id(page: Path) -> str:
    return str(page.relative_to(DOCS)) if page.is_relative_to(DOCS) else str(page)


def _marks(page: Path) -> list[pytest.MarkDecorator]:
    needed = NEEDS.get(_page_id(page), ())
    return [pytest.mark.needs(*needed)] if needed else []


def _run_shell(block: Block, page: Path, where: Path) -> None:
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    env.pop("PYTEST_CURRENT_TEST", None)
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", block.code],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=SHELL_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == block.exit, (
        f"{_page_id(page)}:{block.line}: the block exited {done.returncode}, not {block.exit}\n"
        f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    )


def _call_tests(namespace: dict[str, object], backend: str, where: Path) -> None:
    """Each `test_*` function the page defined, called as pytest would."""
    for name, fn in list(namespace.items()):
        if not name.startswith("test_") or not inspect.isfunction(fn):
            continue
        params = inspect.signature(fn).parameters
        unknown = set(params) - {"tmp_path"}
        assert not unknown, f"{name} asks for fixtures {sorted(unknown)}; the docs test gives only tmp_path"
        kwargs = {}
        if "tmp_path" in params:
            kwargs["tmp_path"] = where / f".{name}"
            kwargs["tmp_path"].mkdir()
        if inspect.iscoroutinefunction(fn):
            anyio.run(functools.partial(fn, **kwargs), backend=backend)
        else:
            fn(**kwargs)


def run_page(page: Path, backend: str, where: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the blocks of `page` in the directory `where`, as the module docstring says."""
    monkeypatch.chdir(where)
    monkeypatch.syspath_prepend(str(where))
    real_run = anyio.run

    def run_on_this_backend(func, *args, backend=backend, backend_options=None):  # type: ignore[no-untyped-def]
        return real_run(func, *args, backend=backend, backend_options=backend_options)

    monkeypatch.setattr(anyio, "run", run_on_this_backend)
    # The page runs as a script does: as `__main__`, so types it defines resolve their annotations.
    script = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", script)
    namespace = vars(script)
    try:
        for block in blocks(page.read_text()):
            if block.skip is not None:
                continue
            if block.language == "python" and block.title is not None:
                (where / block.title).parent.mkdir(parents=True, exist_ok=True)
                (where / block.title).write_text(block.code)
            elif block.language == "python":
                # Padded so a traceback names the page and the line in it.
                source = "\n" * (block.line - 1) + block.code
                exec(compile(source, str(page), "exec"), namespace)
            elif block.run:
                _run_shell(block, page, where)
        _call_tests(namespace, backend, where)
    finally:
        for name, module in list(sys.modules.items()):
            if str(getattr(module, "__file__", None) or "").startswith(str(where)):
                del sys.modules[name]


def _runs_python(page: Path) -> bool:
    """Whether a block of `page` runs Python in the test's process, where the backend is the test's:
    a page of files and `sh` blocks alone starts `awf`, whose backend is its own flag, the same on both."""
    return any(block.language == "python" and block.title is None and block.skip is None for block in blocks(page.read_text()))


@pytest.mark.parametrize(
    "page, backend",
    [pytest.param(page, backend, id=f"{_page_id(page)}-{backend}", marks=_marks(page))
     for page in PAGES for backend in (("asyncio", "trio") if _runs_python(page) else ("asyncio",))],
)  # fmt: skip
def test_the_page_runs(page: Path, backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_page(page, backend, tmp_path, monkeypatch)


def test_the_docs_have_pages() -> None:
    assert len(PAGES) > 10, f"no docs found under {DOCS}"
