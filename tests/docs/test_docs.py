"""Every code block of the documentation runs, so the docs can't rot.

Each page of docs/ runs on asyncio and on trio (a page that runs no Python here but
its files, through `sh` blocks, once: what it starts is the same on either). A page of Python and
`sh` blocks is one test that runs it on both, its `sh` blocks on asyncio alone: on trio each one's
effect on the directory is copied in instead (`ShellEffects`). Its blocks run in order, in one
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
import shutil
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from .blocks import Block, blocks

Signature = tuple[int, int, int, int]  # an entry's lstat: mode, size, mtime in ns, inode
ShellRunner = Callable[[Block, Path, Path], None]  # runs a `sh` block of a page in a directory

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


def _entries(where: Path) -> dict[str, Signature]:
    """Every file, directory and link under `where` (links not followed), by its path relative to it."""
    found = {}
    for root, dirs, files in os.walk(where):
        for name in dirs + files:
            path = os.path.join(root, name)
            stat = os.lstat(path)
            found[os.path.relpath(path, where)] = (stat.st_mode, stat.st_size, stat.st_mtime_ns, stat.st_ino)
    return found


class ShellEffects:
    """What each `sh` block of a page did to its directory, kept so a second run of the page (on the
    other backend) gets the same without running the block again: its commands (`awf`, `pytest`)
    don't run on the test's backend, so a second run of them would test nothing new.

    A block's effect is the entries it removed and those it wrote (a copy of each, taken right after
    it), in a store outside the page's directory. The second run must be in a directory at the same
    path, as records name their run's absolute paths."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.removed: dict[int, list[str]] = {}
        self.written: dict[int, list[str]] = {}

    def run(self, block: Block, page: Path, where: Path) -> None:
        """Run the block, keeping what it did."""
        before = _entries(where)
        _run_shell(block, page, where)
        after = _entries(where)
        self.removed[block.line] = sorted(set(before) - set(after))
        self.written[block.line] = sorted(rel for rel, sig in after.items() if before.get(rel) != sig)
        kept = self.store / str(block.line)
        for rel in self.written[block.line]:
            source = where / rel
            if source.is_dir() and not source.is_symlink():
                (kept / rel).mkdir(parents=True, exist_ok=True)
            else:
                (kept / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, kept / rel, follow_symlinks=False)

    def replay(self, block: Block, page: Path, where: Path) -> None:
        """Do to `where` what the block did when it ran."""
        for rel in self.removed[block.line]:
            path = where / rel
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.is_symlink() or path.exists():
                path.unlink()
        kept = self.store / str(block.line)
        for rel in self.written[block.line]:  # sorted: a directory before what is in it
            source = kept / rel
            if source.is_dir() and not source.is_symlink():
                (where / rel).mkdir(exist_ok=True)
            else:
                if (where / rel).is_symlink() or (where / rel).exists():
                    (where / rel).unlink()
                shutil.copy2(source, where / rel, follow_symlinks=False)


def run_page(
    page: Path, backend: str, where: Path, monkeypatch: pytest.MonkeyPatch, run_shell: ShellRunner = _run_shell
) -> None:
    """Run the blocks of `page` in the directory `where`, as the module docstring says; a `sh`
    block through `run_shell` (`ShellEffects` keeps what it did, or does it again without running it)."""
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
                run_shell(block, page, where)
        _call_tests(namespace, backend, where)
    finally:
        for name, module in list(sys.modules.items()):
            if str(getattr(module, "__file__", None) or "").startswith(str(where)):
                del sys.modules[name]


def _runs_python(page: Path) -> bool:
    """Whether a block of `page` runs Python in the test's process, where the backend is the test's:
    a page of files and `sh` blocks alone starts `awf`, whose backend is its own flag, the same on both."""
    return any(block.language == "python" and block.title is None and block.skip is None for block in blocks(page.read_text()))


def _runs_shell(page: Path) -> bool:
    return any(block.run and block.skip is None for block in blocks(page.read_text()))


def _backends(page: Path) -> list[tuple[str, ...]]:
    """The backends each test of `page` runs it on: both, apart, for a page of Python alone; both in
    one test for a page that also runs `sh` blocks, so they run once (see `ShellEffects`)."""
    if not _runs_python(page):
        return [("asyncio",)]
    if _runs_shell(page):
        return [("asyncio", "trio")]
    return [("asyncio",), ("trio",)]


def run_page_on(page: Path, backends: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run `page` on each of `backends` in turn, each in a fresh directory at one path; its `sh`
    blocks run on the first, and the others get what they did."""
    where = tmp_path / "page"
    effects = ShellEffects(tmp_path / "shell-effects")
    for n, backend in enumerate(backends):
        if n:
            where.rename(tmp_path / f"page-{backends[n - 1]}")
        where.mkdir()
        with monkeypatch.context() as patched:
            run_page(page, backend, where, patched, effects.replay if n else effects.run)


@pytest.mark.parametrize(
    "page, backends",
    [pytest.param(page, backends, id=f"{_page_id(page)}-{'+'.join(backends)}", marks=_marks(page))
     for page in PAGES for backends in _backends(page)],
)  # fmt: skip
def test_the_page_runs(page: Path, backends: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_page_on(page, backends, tmp_path, monkeypatch)


def test_the_docs_have_pages() -> None:
    assert len(PAGES) > 10, f"no docs found under {DOCS}"
